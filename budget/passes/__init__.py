"""The passes, in the order they run on each request: a frozen, ordered list of named callables."""

from __future__ import annotations

from collections.abc import Sequence

from budget.passes._context import Candidate, Costs, Pass, PassContext, Staleness
from budget.passes.aggregate import aggregate
from budget.passes.cap import cap
from budget.passes.duplicate import duplicate
from budget.passes.orphans import orphans
from budget.passes.staleness import staleness

__all__ = ["PIPELINE", "Candidate", "Costs", "Pass", "PassContext", "Staleness"]

PIPELINE: Sequence[tuple[str, Pass]] = (
    ("orphans", orphans),
    ("duplicate", duplicate),
    ("cap", cap),
    ("aggregate", aggregate),
    ("staleness", staleness),
)
"""Every pass sees the decisions of the ones before it. Frozen: built once, run by a plain loop."""
