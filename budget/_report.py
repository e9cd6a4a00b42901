"""What one request did and why: a report per request, and the request copy it goes with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from budget._ledger import Kind

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


class Report(BaseModel):
    """What the model saw on one request, and why (SPEC §8)."""

    model_config = ConfigDict(frozen=True)

    request: int
    """1-based number of this request in the session."""
    format: str
    messages: int
    results: int
    """Tool results in the request."""
    decisions: tuple[DecisionReport, ...]
    """Results decided or changed by this request."""
    kept: int
    spilled: int
    trimmed: int
    unspillable: int
    """Counts over the whole request copy, by each result's current decision."""
    chars_before: int
    chars_after: int
    """Characters of tool-result text in the history and in the request copy."""
    tokens_before: int
    tokens_after: int
    """Estimated tokens of the history and of the request copy (anchored on reported usage)."""
    window: int
    prefix_stable: bool
    """The previous request copy is an exact prefix of this one."""
    staleness_ran: bool
    staleness_reason: str | None
    reclaimable_tokens: int
    """Tokens a staleness batch could still reclaim (eligible results left untrimmed)."""
    elapsed_s: float
    compacted: bool = False
    """A compaction ran since the last request (in this ``prepare`` or a ``compact()`` call):
    this is the first copy with its summary, the one intended prefix break."""
    summarized_tokens: int = 0
    """When ``compacted``: estimated tokens of the prefix the summary stands for."""


@dataclass(frozen=True, slots=True)
class Prepared:
    """A request copy and its report."""

    messages: list[Any]
    report: Report
