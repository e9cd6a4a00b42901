"""Cost attribution: where a replay's billed tokens go, by result size and by age in rounds.

Each request's billed tokens are split over its segments as the cache simulator billed them
(:mod:`benchmarks.cache`): the first ``cached_tokens`` of the request, in order, at the read
price, the next ``written_tokens`` at the write price, the rest at the base price. A message's
share is then split between its blocks: each tool result's block (its tokens as the replay's
counter counts the block) and the rest of the message (text, tool calls). A result's tokens go
to the bucket of its *original* size and of its age at that request, whatever the strategy
showed for it (whole, an envelope, a stub), so the rows of ``none`` and of a strategy compare
the same results. Read-backs and summary calls are rows of their own.

Buckets (characters of the original result; the thresholds are toolbudget's defaults:
``stale_floor`` 2,000, under which a result is never trimmed, and ``result_cap`` 50,000, over
which a fresh one is spilled; 10,000 splits the middle): ``<=2k``, ``2k-10k``, ``10k-50k``,
``>50k``. Ages, in rounds since the round the result answers (0: the latest round; toolbudget's
default ``protect_rounds`` 5 keeps ages 0-4 whole): ``0-4``, ``5-9``, ``10-19``, ``20-49``,
``50+``. Both tables have the rows ``header`` (system prompt and tool definitions),
``other messages`` (everything that is not a tool result), ``read-backs`` and ``summaries``, so
each column sums to the strategy's billed tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks.cache import CacheResult, CacheRules, Segment

__all__ = [
    "AGE_BUCKETS",
    "ATTRIBUTED",
    "SIZE_BUCKETS",
    "Attribution",
    "Attributor",
    "age_bucket",
    "combine",
    "size_bucket",
]

ATTRIBUTED = frozenset({"none", "toolbudget"})
"""The strategies whose billed tokens are attributed (the baseline and this project's)."""

SIZE_BUCKETS: tuple[tuple[str, int | None], ...] = (
    ("<=2k", 2_000),
    ("2k-10k", 10_000),
    ("10k-50k", 50_000),
    (">50k", None),
)
"""(name, largest original size in characters, None: no limit), in order."""

AGE_BUCKETS: tuple[tuple[str, int | None], ...] = (
    ("0-4", 4),
    ("5-9", 9),
    ("10-19", 19),
    ("20-49", 49),
    ("50+", None),
)
"""(name, oldest age in rounds, None: no limit), in order."""

HEADER, OTHER, READBACKS, SUMMARIES = "header", "other messages", "read-backs", "summaries"
EXTRA_ROWS = (HEADER, OTHER, READBACKS, SUMMARIES)


def _bucket(value: int, buckets: tuple[tuple[str, int | None], ...]) -> str:
    for name, top in buckets:
        if top is None or value <= top:
            return name
    return buckets[-1][0]


def size_bucket(chars: int) -> str:
    """The size bucket of a result of ``chars`` original characters."""
    return _bucket(chars, SIZE_BUCKETS)


def age_bucket(rounds: int) -> str:
    """The age bucket of a result ``rounds`` rounds old (0: it answers the latest round)."""
    return _bucket(max(0, rounds), AGE_BUCKETS)


@dataclass(frozen=True, slots=True)
class Attribution:
    """One replay's billed tokens by size bucket and by age bucket (each sums to the total)."""

    by_size: Mapping[str, float] = field(default_factory=dict)
    by_age: Mapping[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, dict[str, float]]:
        """``{"by_size": {...}, "by_age": {...}}``, every bucket present, in order."""
        return {"by_size": dict(self.by_size), "by_age": dict(self.by_age)}


def _empty(buckets: tuple[tuple[str, int | None], ...]) -> dict[str, float]:
    return {**{name: 0.0 for name, _ in buckets}, **dict.fromkeys(EXTRA_ROWS, 0.0)}


def combine(parts: Sequence[Attribution]) -> Attribution:
    """The sum of several replays' attributions (one strategy over several traces)."""
    by_size, by_age = _empty(SIZE_BUCKETS), _empty(AGE_BUCKETS)
    for part in parts:
        for key, value in part.by_size.items():
            by_size[key] = by_size.get(key, 0.0) + value
        for key, value in part.by_age.items():
            by_age[key] = by_age.get(key, 0.0) + value
    return Attribution(by_size, by_age)


@dataclass(frozen=True, slots=True)
class _Origin:
    """What the attribution needs of one original result: its size and round."""

    chars: int
    round: int


class Attributor:
    """Follows one replay request by request and attributes what each request was billed.

    ``origins`` maps call ids to the original result's size and round; ``rounds_before(n)`` is
    how many rounds start within the first ``n`` messages (the replay's index has both).
    """

    def __init__(
        self,
        origins: Mapping[str, tuple[int, int]],
        rounds_before: Callable[[int], int],
        count: Callable[[Any], int],
        rules: CacheRules,
        write_price: float,
    ) -> None:
        self._origins = {k: _Origin(*v) for k, v in origins.items()}
        self._rounds_before = rounds_before
        self._count = count
        self._rules = rules
        self._write = write_price
        self._by_size = _empty(SIZE_BUCKETS)
        self._by_age = _empty(AGE_BUCKETS)
        self._memo: dict[int, tuple[Any, list[tuple[str | None, int]]]] = {}

    def _parts(self, message: Any) -> list[tuple[str | None, int]]:
        """(call id, tokens) of each tool result block of ``message``, and (None, the rest)."""
        hit = self._memo.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        total = self._count(message)
        parts: list[tuple[str | None, int]] = []
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    call_id = str(block.get("tool_use_id", ""))
                    if call_id in self._origins:
                        parts.append((call_id, self._count(block)))
        used = sum(t for _, t in parts)
        if used > total and used:
            # Blocks counted alone carry framing the message counts once: scale them down.
            parts = [(c, t * total // used) for c, t in parts]
            used = sum(t for _, t in parts)
        parts.append((None, total - used))
        self._memo[id(message)] = (message, parts)
        return parts

    def observe(
        self, n: int, out: Sequence[Any], segments: Sequence[Segment], result: CacheResult
    ) -> None:
        """Attribute one request: its copy ``out`` of a history of ``n`` messages, its
        ``segments`` (the header first) and how the cache simulator billed them."""
        cached, written = result.cached_tokens, result.written_tokens
        rules = self._rules
        rounds = self._rounds_before(n)

        def billed(tokens: int) -> float:
            nonlocal cached, written
            take_c = min(tokens, cached)
            cached -= take_c
            take_w = min(tokens - take_c, written)
            written -= take_w
            rest = tokens - take_c - take_w
            return take_c * rules.read_price + take_w * self._write + rest

        spent = head = billed(segments[0].tokens)
        self._by_size[HEADER] += head
        self._by_age[HEADER] += head
        for message, seg in zip(out, segments[1:], strict=False):
            parts = self._parts(message)
            whole = sum(t for _, t in parts)
            scale = seg.tokens / whole if whole else 0.0
            for call_id, tokens in parts:
                cost = billed(round(tokens * scale))
                spent += cost
                if call_id is None:
                    self._by_size[OTHER] += cost
                    self._by_age[OTHER] += cost
                    continue
                origin = self._origins[call_id]
                self._by_size[size_bucket(origin.chars)] += cost
                age = rounds - 1 - origin.round if origin.round >= 0 else 0
                self._by_age[age_bucket(age)] += cost
        # Rounding the split leaves a few tokens either way: they count as the messages' own.
        self._by_size[OTHER] += result.billed_tokens - spent
        self._by_age[OTHER] += result.billed_tokens - spent

    def result(self, *, readbacks: float = 0.0, summaries: float = 0.0) -> Attribution:
        """The attribution of the replay, with what read-backs and summary calls cost."""
        by_size, by_age = dict(self._by_size), dict(self._by_age)
        by_size[READBACKS] += readbacks
        by_age[READBACKS] += readbacks
        by_size[SUMMARIES] += summaries
        by_age[SUMMARIES] += summaries
        return Attribution(by_size, by_age)
