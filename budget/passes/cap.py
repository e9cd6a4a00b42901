"""Pass 1, per-result cap: a fresh result longer than its cap is spilled whole."""

from __future__ import annotations

from budget._ledger import Decision
from budget.passes._context import PassContext, spill

__all__ = ["cap"]


def cap(ctx: PassContext) -> list[Decision]:
    """Spill every fresh result whose text is strictly longer than its tool's cap."""
    out = []
    for result in ctx.fresh:
        limit = ctx.cap_for(result.tool)
        if limit is not None and len(result.text) > limit:
            out.append(spill(ctx, result, "cap"))
    return out
