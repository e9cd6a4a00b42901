"""Pass 2, aggregate: a group over its budget spills its largest fresh results first."""

from __future__ import annotations

from collections import defaultdict

from budget._envelope import EMPTY_TEXT
from budget._ledger import Decision
from budget._view import ToolResult
from budget.passes._context import PassContext, spill

__all__ = ["aggregate"]


def aggregate(ctx: PassContext) -> list[Decision]:
    """Spill fresh results of each over-budget group, largest first (ties: earlier first)."""
    budget = ctx.group_budget()
    groups: dict[int, list[ToolResult]] = defaultdict(list)
    for result in ctx.fresh:
        groups[result.group].append(result)
    out: list[Decision] = []
    for group, results in groups.items():
        sizes = {r.call_id: _shown_size(ctx, r) for r in results}
        total = ctx.group_frozen_chars.get(group, 0) + sum(sizes.values())
        if total <= budget:
            continue
        movable = [
            r
            for r in results
            if r.call_id not in ctx.decided and ctx.cap_for(r.tool) is not None and r.text
        ]
        movable.sort(key=lambda r: (-sizes[r.call_id], r.order))
        for result in movable:
            if total <= budget:
                break
            decision = spill(ctx, result, "aggregate")
            saved = len(result.text) - len(decision.text or "")
            if saved <= 0:
                # Smaller than its own envelope: spilling it would only grow the group.
                continue
            total -= saved
            out.append(decision)
    return out


def _shown_size(ctx: PassContext, result: ToolResult) -> int:
    decided = ctx.decided.get(result.call_id)
    if decided is None:
        # An empty result is shown as EMPTY_TEXT: those characters are in the group too.
        return result.size or len(EMPTY_TEXT)
    return decided.shown_chars() + result.extra_chars
