"""Compaction's inputs of later decisions, as the decision log keeps them (issue 28).

* a ``"cmpf"`` record (:data:`FAILED`): a compaction failed, and the breaker's count of
  consecutive failures after it;
* ``"pt"`` of a checkpoint record: the tokens the compaction summarized, for the report after it.

Both are optional: a log written before them restores none (the breaker closed, no compaction
left to report), as it resumed before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["FAILED", "failures_of", "unreported_of"]


FAILED = "cmpf"
"""The log record of a failed compaction: the breaker's count of consecutive failures after it.
A later checkpoint record (a compaction that succeeded) resets the count; a log written before
these records restores none (the breaker closed, as it resumed before)."""


def failures_of(log: Sequence[Mapping[str, Any]]) -> int:
    """Consecutive failed compactions as the log leaves them."""
    for rec in reversed(log):
        kind = rec.get("t")
        if kind == FAILED:
            count = rec.get("failures")
            return count if type(count) is int and count > 0 else 0
        if kind == "cmp" and not rec.get("clear"):
            return 0
    return 0


def unreported_of(log: Sequence[Mapping[str, Any]]) -> int | None:
    """Prefix tokens of a compaction no request has reported yet (a ``compact()`` call the log
    ends with): the next report says a compaction ran, as in the process that compacted."""
    for rec in reversed(log):
        kind = rec.get("t")
        if kind == "req":
            return None
        if kind == "cmp":
            pt = rec.get("pt")
            return pt if not rec.get("clear") and type(pt) is int and pt >= 0 else None
    return None
