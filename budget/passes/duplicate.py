"""The duplicate pass (before the cap): a fresh result repeating an output still shown whole
points to it.

An agent re-reads a file it has not changed, re-runs a command whose output did not change: the
new result tells the model nothing the earlier one, still in its context, does not. Shown as a
short pointer to that earlier call (its text stored, read back like any spilled one), it costs
no cache (a fresh result is not cached yet) and risks no read-back while the earlier output is
shown, so it is not priced: it is taken whenever the pointer is shorter. Claude Code's own
``Read`` tool does the same for a file unchanged since its last read ("file unchanged since
your last Read. Refer to that earlier tool_result instead."; anthropics/claude-code#60684).

A tool the caller exempts, or gives a cap of its own, is left to the caller's rule.
"""

from __future__ import annotations

from budget._envelope import same_output
from budget._ledger import Decision
from budget.passes._context import PassContext, replaced

__all__ = ["duplicate"]


def duplicate(ctx: PassContext) -> list[Decision]:
    """Point each fresh result repeating an output still shown whole to that output."""
    cfg = ctx.config
    if not cfg.dedupe_outputs:
        return []
    out = []
    for result in ctx.fresh:
        if ctx.cap_for(result.tool) is None or cfg.policy(result.tool).cap is not None:
            continue
        same_as = ctx.same_output(result)
        if same_as is None:
            continue
        ref = ctx.ref_for(result.text)
        text = same_output(
            result.text,
            ref=ref,
            tool=result.tool,
            same_as=same_as,
            read_tool=cfg.read_tool_name,
            path=ctx.path_of(ref) if cfg.include_path else None,
        )
        if len(text) < len(result.text):
            out.append(replaced(result, "spilled", "duplicate", text, ref))
    return out
