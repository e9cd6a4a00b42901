"""The request counters: how many requests, the last one's time, length and history tokens,
the overflow streak and the last usage seen, with what a retry rolls back to.

One small mutable part of the session: the journal restores it (``Resumed``), a request reads
and advances it, a retry rolls it back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
    readback_ids: set[str] = field(default_factory=set)
    """Results of the read-back tool seen in the history: the agent needed hidden text."""
    batch_from: int | None = None
    """The first message this request's batch rewrites (None: no batch)."""
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    """This request's priced decisions, by result key (the report's ``cost``)."""

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
        if resumed.counters is not None:
            tally.set(resumed.counters)
        return tally

    def counters(self) -> Counters:
        """(requests, last time, last length, last history tokens) as a request record has them."""
        return (self.requests, self.last_at, self.last_n, self.last_f)

    def set(self, counters: Counters) -> None:
        """Put the counters back as ``counters`` has them."""
        self.requests, self.last_at, self.last_n, self.last_f = counters

    def is_retry(self, length: int) -> bool:
        """Whether a history of ``length`` messages may repeat the last request."""
        return self.requests > 0 and length == self.last_n
