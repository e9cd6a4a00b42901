"""What one request did and why: a report per request, and the request copy it goes with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from budget._ledger import Kind
from budget.policy import Verdict

__all__ = ["DecisionReport", "Prepared", "Report"]


class DecisionReport(BaseModel):
    """One result decided or changed by this request."""

    model_config = ConfigDict(frozen=True)

    call_id: str
    kind: Kind
    reason: str
    ref: str | None
    tool: str
    chars_before: int
    chars_after: int
    cost: Verdict | None = None
    """The two options the cost model compared for this decision (``budget.policy``): for a
    spill or a kept result it weighed, spill against keep; for a trim, its batch against
    waiting. None for decisions no price decided (caps, groups, forced trims, small results)."""


class Report(BaseModel):
    """What the model saw on one request, and why (docs/concepts/passes.md).

    Two scopes, not to be confused: :attr:`decisions` lists only what *this* request decided or
    changed (empty on a request that added no result and ran no batch), while :attr:`kept`,
    :attr:`spilled`, :attr:`trimmed` and :attr:`unspillable` count *every* result of the request
    copy by its current decision, including those decided by earlier requests (a result spilled
    on request 1 still counts in ``spilled`` on request 9). :attr:`spilled_now` and
    :attr:`trimmed_now` count this request's decisions only.
    """

    model_config = ConfigDict(frozen=True)

    request: int
    """1-based number of this request in the session."""
    format: str
    messages: int
    results: int
    """Tool results in the request."""
    decisions: tuple[DecisionReport, ...]
    """Results decided or changed by this request only (earlier decisions are not repeated)."""
    kept: int
    """Results of the whole request copy shown unchanged (decided now or earlier)."""
    spilled: int
    """Results of the whole request copy shown as an envelope, whenever they were spilled:
    a running total over the copy, not this request's spills (see :attr:`spilled_now`)."""
    trimmed: int
    """Results of the whole request copy shown as a stub, whenever they were trimmed."""
    unspillable: int
    """Results of the whole request copy kept in full because they could not be spilled."""
    chars_before: int
    chars_after: int
    """Characters of tool-result text in the history and in the request copy."""
    tokens_before: int
    tokens_after: int
    """Estimated tokens of the history and of the request copy (anchored on reported usage,
    the request copy's corrected by what the session learned from earlier usage)."""
    tokens_after_raw: int
    """``tokens_after`` before the session's learned correction (the same until it has learned
    from three requests' usage)."""
    window: int
    prefix_stable: bool
    """The previous request copy is an exact prefix of this one."""
    staleness_ran: bool
    staleness_reason: str | None
    staleness_cost: Verdict | None = None
    """The best batch the cut search found this request (``choice`` ``trim`` when it ran,
    ``wait`` when its net saving was not positive); None when nothing was eligible."""
    reclaimable_tokens: int
    """Tokens a staleness batch could still reclaim (eligible results left untrimmed)."""
    elapsed_s: float
    compacted: bool = False
    """A compaction ran since the last request (in this ``prepare`` or a ``compact()`` call):
    this is the first copy with its summary, the one intended prefix break."""
    summarized_tokens: int = 0
    """When ``compacted``: estimated tokens of the prefix the summary stands for."""

    @property
    def spilled_now(self) -> int:
        """Results this request spilled (the ``spilled`` entries of :attr:`decisions`)."""
        return sum(1 for d in self.decisions if d.kind == "spilled")

    @property
    def trimmed_now(self) -> int:
        """Results this request trimmed to stubs (the ``trimmed`` entries of :attr:`decisions`)."""
        return sum(1 for d in self.decisions if d.kind == "trimmed")


@dataclass(frozen=True, slots=True)
class Prepared:
    """A request copy and its report."""

    messages: list[Any]
    report: Report
