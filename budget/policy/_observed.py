"""What the session has learned about itself, online: the facts the cost model prices with.

Everything here comes from the session's own requests (the usage the provider reported, the
times, the results it hid and the read-backs it saw). It is one frozen value, updated once per
request and logged with the request record (``p``), so a resumed session decides as the one that
went on would.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from budget._view import builder

__all__ = ["ONE_HOUR_S", "Observed"]

ONE_HOUR_S = 3_600.0
"""The lifetime of an entry written for an hour (Anthropic docs, "Prompt caching": 5-minute and
1-hour cache writes, the 1-hour ones billed 2x the base input price)."""

MIN_CACHEABLE_PROMPT = 4_096
"""Prompts at least this long count as chances for a cache read. Anthropic's minimum cacheable
prefix is 1,024 tokens for most models and 4,096 for Claude Opus 4.5 / Haiku 4.5 (Anthropic docs,
"Prompt caching", cache limitations); OpenAI caches from 1,024 tokens (OpenAI docs, "Prompt
caching"): the largest of them, so a prompt under it never counts as a miss."""


@dataclass(frozen=True, slots=True)
class Observed:
    """The session's own evidence, as counts: what the cost model's estimates are made from."""

    requests: int = 0
    """Requests prepared before this one."""
    chances: int = 0
    """Reported usages of prompts of at least :data:`MIN_CACHEABLE_PROMPT` tokens, sent within
    the TTL of the request before: requests that would have read the cache if there were one."""
    reads: int = 0
    """Of those, the ones whose usage shows cache reads."""
    writes: int = 0
    """Usages showing cache writes (explicit caching, priced as a write: Anthropic)."""
    warm_pause_s: float = 0.0
    """The longest pause after which the usage still showed a cache read (a TTL at least that
    long: 1-hour cache writes, a provider's longer retention), and at least
    :data:`ONE_HOUR_S` once a usage showed most of its cache writes made for an hour."""
    hidden: int = 0
    """Results hidden so far (spilled or trimmed)."""
    readbacks: int = 0
    """Read-back tool results seen in the history (the agent needed hidden text)."""
    first_tokens: int = 0
    """The estimated tokens of the first request (the growth per request is measured from it)."""
    gap_s: float | None = None
    """The pause before the last request (the one whose usage the next request reports)."""
    bank: float = 0.0
    """Billed tokens the session's own decisions have saved so far, as realised: the tokens
    hidden on each request since, at the carry price, less the re-writes its batches paid and
    the read-backs it saw (:func:`budget.policy.allowance`: what a decision may lose)."""
    billed: float = 0.0
    """Billed tokens of the requests so far: from the usage each response reported (at the
    configured prices), the cost model's estimate for a request whose usage never came."""
    pending_bill: float = 0.0
    """The estimated bill of the last request, counted in ``billed`` when no usage of it comes."""
    exposed: int = 0
    """Results the cost model weighed at first sight and kept whole, counted once they leave the
    protected rounds (the rounds the agent is still working with them): the agent saw all of
    each, so its answers tell whether the preview a spill leaves would have done."""
    needed: int = 0
    """Kept results a later answer quoted a line of that their preview would not have shown
    (``budget.session._quotes``): a read-back a spill would have cost."""
    episodes: int = 0
    """The read-backs those needed results would have cost: each answer that quotes one of them
    outside its preview, with a line no earlier answer quoted from it, counts one (an agent
    working through a file needs more of it than one page)."""
    recalled: int = 0
    """Hidden results read back at least once (``readbacks`` counts every read-back call): the
    results needed, as ``needed`` counts the kept ones; a result read back again adds to
    ``readbacks`` only, as a needed result's later parts add to ``episodes``."""

    def after_usage(
        self,
        *,
        prompt: int,
        cache_read: int,
        cache_write: int,
        answered: int,
        ttl_s: float,
        cache_write_1h: int = 0,
    ) -> Observed:
        """These counts after one reported usage, of the ``answered``-th request (1-based);
        ``cache_write_1h``: of ``cache_write``, the tokens written for an hour."""
        pause_s = self.gap_s
        warm_window = pause_s is None or pause_s < ttl_s
        # The first request has no cache to read: its usage is no chance for a read.
        chance = prompt >= MIN_CACHEABLE_PROMPT and warm_window and answered > 1
        pause = self.warm_pause_s
        if cache_read > 0 and pause_s is not None:
            pause = max(pause, pause_s)
        if cache_write_1h * 2 > cache_write:
            # Entries written for an hour live an hour (Anthropic's 1-hour cache writes).
            pause = max(pause, ONE_HOUR_S)
        return replace(
            self,
            chances=self.chances + chance,
            reads=self.reads + (cache_read > 0),
            writes=self.writes + (cache_write > 0),
            warm_pause_s=pause,
        )

    def now(self, *, requests: int, readbacks: int, recalled: int) -> Observed:
        """These counts as of a request: ``requests`` made before it, ``readbacks`` seen in the
        history and the ``recalled`` results they read."""
        return self._with(requests=requests, readbacks=readbacks, recalled=recalled)

    def banked(
        self, *, bank: float, billed: float, readbacks: int, pending: float, recalled: int
    ) -> Observed:
        """These counts with the bank and the bill as of a request."""
        return self._with(
            bank=bank, billed=billed, readbacks=readbacks, pending_bill=pending, recalled=recalled
        )

    def after_request(self, *, gap_s: float | None, hidden: int) -> Observed:
        """These counts after a request made ``gap_s`` after the last one, hiding ``hidden``
        results for the first time."""
        return self._with(gap_s=gap_s, hidden=self.hidden + hidden)

    def _with(self, **changes: Any) -> Observed:
        """These counts with ``changes``: one constructor call on the record's values, in
        field order (``dataclasses.replace`` takes 6 µs, several times a request)."""
        values = self.to_record()
        for name, value in changes.items():
            values[_POSITION[name]] = value
        return _observed(*values)

    def to_record(self) -> list[Any]:
        """The counts as the request record's ``p`` field (a short JSON list)."""
        return [
            self.requests,
            self.chances,
            self.reads,
            self.writes,
            self.warm_pause_s,
            self.hidden,
            self.readbacks,
            self.first_tokens,
            self.gap_s,
            self.bank,
            self.billed,
            self.pending_bill,
            self.exposed,
            self.needed,
            self.episodes,
            self.recalled,
        ]

    @classmethod
    def from_record(cls, value: object) -> Observed | None:
        """The counts a request record's ``p`` field holds; None when it is not one."""
        # Logs written before the bank have 9 fields: their bank starts empty (the careful side);
        # before the kept results' evidence 12: none of it yet (the priors, as then); before
        # their read-backs were counted 14: one per needed result (the model then); before the
        # results read back were told from the read-backs 15: each read-back one result (then).
        if not isinstance(value, list) or len(value) not in (9, 12, 14, 15, 16):
            return None
        bank, billed, pending = (value[9], value[10], value[11]) if len(value) >= 12 else (0, 0, 0)
        if not _finite(bank) or not _seconds(billed) or not _seconds(pending):
            return None
        if len(value) >= 15:
            kept = value[12:15]
        elif len(value) == 14:
            kept = [value[12], value[13], value[13]]
        else:
            kept = [0, 0, 0]
        recalled = value[15] if len(value) == 16 else value[6]
        ints = [value[i] for i in (0, 1, 2, 3, 5, 6, 7)] + [*kept, recalled]
        if not all(type(v) is int and v >= 0 for v in ints) or recalled > value[6]:
            return None
        pause, gap = value[4], value[8]
        if not _seconds(pause) or not (gap is None or _seconds(gap)):
            return None
        return cls(
            requests=value[0],
            chances=value[1],
            reads=value[2],
            writes=value[3],
            warm_pause_s=float(pause),
            hidden=value[5],
            readbacks=value[6],
            first_tokens=value[7],
            gap_s=None if gap is None else float(gap),
            bank=float(bank),
            billed=float(billed),
            pending_bill=float(pending),
            exposed=kept[0],
            needed=kept[1],
            episodes=kept[2],
            recalled=recalled,
        )

    def describe(self) -> Mapping[str, Any]:
        """The counts by name (events, docs)."""
        return {
            "requests": self.requests,
            "chances": self.chances,
            "reads": self.reads,
            "writes": self.writes,
            "warm_pause_s": self.warm_pause_s,
            "hidden": self.hidden,
            "readbacks": self.readbacks,
            "bank": self.bank,
            "billed": self.billed,
            "exposed": self.exposed,
            "needed": self.needed,
            "episodes": self.episodes,
            "recalled": self.recalled,
        }


_observed = builder(Observed)
"""Observed's constructor at a plain object's cost: a request makes several (see ``_with``)."""
_POSITION = {f.name: i for i, f in enumerate(fields(Observed))}
"""Each field's position in the constructor's arguments and in :meth:`Observed.to_record`."""


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _seconds(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and value >= 0
        and value != float("inf")
    )
