"""The request counters: how many requests, the last one's time, length and history tokens,
the overflow streak and the last usage seen, with what a retry rolls back to.

One small mutable part of the session: the journal restores it (``Resumed``), a request reads
and advances it, a retry rolls it back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from budget._errors import InputError
from budget.policy import Observed, Verdict
from budget.session._journal import Counters, Resumed

__all__ = ["Tally"]


@dataclass(slots=True)
class Tally:
    """The session's request counters (see the module doc)."""

    requests: int = 0
    last_at: float | None = None
    last_n: int = 0
    last_f: int | None = None
    """Tokens of the last request's history but its last ``RESCAN`` messages, as given: what
    tells whether a usage measured on that history is still an anchor for the next one."""
    overflows: int = 0
    last_usage: tuple[int, ...] | None = None
    before_last: Counters = (0, None, 0, None)
    """Request count, time, length and history tokens (see ``last_f``) before the last
    request: what a retry rolls back to."""
    observed: Observed = field(default_factory=Observed)
    """What the cost policy learned from this session's usage and times (logged as ``p``)."""
    marks: list[tuple[int, float]] = field(default_factory=list)
    """(history length, time) of the requests whose cache entries still match, by length."""
    named: dict[tuple[str, str], int] = field(default_factory=dict)
    """Per (call id, ref), the message of the history scanned holding a call that names a hidden
    result's ref (the read-back tool's, or the agent's own tools opening the spilled file): the
    agent needed hidden text. Only the history's own: a call the caller withdrew (its history
    cut back, its last answer sent again otherwise) leaves with its message
    (:meth:`forget_from`), as a resumed session, re-counting the history it is given, never
    sees it."""
    noted: int = 0
    """Read-backs the host reported that the history does not show (``Budget.note_readback``)."""
    noted_refs: set[str] = field(default_factory=set)
    """The refs the host's reports named (a report naming none counts one result of its own);
    each note is logged when it is made (a ``rb`` record), so a resumed session counts on."""
    noted_anonymous: int = 0
    """The host's reports that named no ref."""
    batch_from: int | None = None
    """The first message this request's batch rewrites (None: no batch)."""
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    """This request's priced decisions, by result key (the report's ``cost``)."""
    usage_bill: float | None = None
    """The bill of a usage first seen in this request (the last response's), at the configured
    prices; None when this request brought no new usage."""

    @classmethod
    def resumed(cls, resumed: Resumed) -> Tally:
        """The counters a session's decision log left."""
        tally = cls(
            overflows=resumed.overflows,
            last_usage=resumed.last_usage,
            before_last=resumed.before_last,
            observed=resumed.observed,
            marks=list(resumed.marks),
        )
        tally.noted, tally.noted_anonymous, refs = resumed.noted
        tally.noted_refs = set(refs)
        if resumed.counters is not None:
            tally.set(resumed.counters)
        return tally

    def note_mentions(
        self, mentions: list[tuple[str, str, int]], since: Callable[[str], int | None]
    ) -> None:
        """Count the calls among ``mentions`` (call id, ref, index of the message making it)
        made after a copy showed the named result hidden: ``since(ref)``, the fewest messages
        of a request since it was hidden (``Ledger.hidden_since``), is at most the message's
        index. A call made before (the result still shown whole) is no read-back, whenever
        it is looked at: a resumed session, which looks at every call again, counts alike."""
        for cid, ref, i in mentions:
            if (at := since(ref)) is not None and at <= i:
                self.named[cid, ref] = i

    def forget_from(self, k: int) -> None:
        """Forget the read-back calls of messages ``k`` on: the history was cut back there (a
        retry with another last answer, a history cut or rebuilt), and what the scan of the
        history from ``k`` finds again is counted again. The logged count stays a floor
        (:meth:`readbacks`), as it is for a resumed session."""
        if any(i >= k for i in self.named.values()):
            self.named = {key: i for key, i in self.named.items() if i < k}

    @staticmethod
    def check_ref(ref: object) -> None:
        """Raise InputError unless ``ref`` names a result (a non-empty string) or is None."""
        if ref is not None and (not isinstance(ref, str) or not ref):
            raise InputError(f"ref must be a hidden result's ref (a string), not {ref!r:.80}")

    def note(self, ref: str | None) -> None:
        """Count one read-back the host reported, of the result ``ref`` (None: unnamed; checked
        by :meth:`check_ref` before the note was logged)."""
        self.noted += 1
        if ref is None:
            self.noted_anonymous += 1
        else:
            self.noted_refs.add(ref)

    def readbacks(self) -> int:
        """Read-backs seen so far: the history's, those the host noted, and at least as many as
        the log held (a log written before the host's reports were recorded: those are lost)."""
        calls = {cid for cid, _ in self.named}
        return max(len(calls) + self.noted, self.observed.readbacks)

    def recalled(self) -> int:
        """Hidden results read back so far (as :meth:`readbacks`, counting each result once; never
        more than the read-backs: one call naming two refs is one read-back)."""
        refs = {ref for _, ref in self.named}
        named = len(refs | self.noted_refs) + self.noted_anonymous
        return min(max(named, self.observed.recalled), self.readbacks())

    def counters(self) -> Counters:
        """(requests, last time, last length, last history tokens) as a request record has them."""
        return (self.requests, self.last_at, self.last_n, self.last_f)

    def set(self, counters: Counters) -> None:
        """Put the counters back as ``counters`` has them."""
        self.requests, self.last_at, self.last_n, self.last_f = counters

    def is_retry(self, length: int) -> bool:
        """Whether a history of ``length`` messages may repeat the last request."""
        return self.requests > 0 and length == self.last_n
