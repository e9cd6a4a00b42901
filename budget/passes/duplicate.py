"""The duplicate pass (before the cap): a fresh result repeating or re-running an output still
shown whole is shown as a pointer to it.

An agent re-reads a file it has not changed, re-runs a command whose output changed in a few
lines: the new result tells the model little or nothing the earlier one, still in its context,
does not. Shown as a pointer to that earlier call (with the line diff from it, for a re-run that
changed), its text stored and read back like any spilled one's, it costs no cache (a fresh result
is not cached yet) and risks no read-back while the earlier output is shown: every line of it is
in view, in the earlier output or in the diff. So it is not priced: it is taken whenever the
pointer is shorter. Claude Code's own ``Read`` tool does the same for a file unchanged since its
last read ("file unchanged since your last Read. Refer to that earlier tool_result instead.";
anthropics/claude-code#60684).

A tool the caller exempts, or gives a cap of its own, is left to the caller's rule.
"""

from __future__ import annotations

from budget._envelope import same_output
from budget._ledger import Decision
from budget.passes._context import PassContext, replaced
from budget.previews import line_delta

__all__ = ["POINTERS", "duplicate"]

POINTERS = frozenset({"duplicate", "rerun"})
"""The reasons of this pass's decisions: they hide nothing the model does not see (the read-back
rate the cost policy learns counts hidden results without them)."""


def duplicate(ctx: PassContext) -> list[Decision]:
    """Point each fresh result repeating or re-running an output still shown whole to it."""
    cfg = ctx.config
    if not cfg.dedupe_outputs:
        return []
    out = []
    for result in ctx.fresh:
        if ctx.cap_for(result.tool) is None or cfg.policy(result.tool).cap is not None:
            continue
        if result.extra_chars:
            continue  # its images are not compared: not called the same output
        same = ctx.same_output(result)
        if same is None:
            continue
        same_as, earlier = same
        delta = None
        if earlier != result.text:
            # A diff longer than a preview, or than half the output, is read about as hard as
            # the output itself: not a pointer (the envelope's delta takes half a preview so).
            limit = min(cfg.preview_chars, len(result.text) // 2)
            delta = line_delta(earlier, result.text, limit=limit)
            if delta is None:
                continue
        ref = ctx.ref_for(result.text)
        text = same_output(
            result.text,
            ref=ref,
            tool=result.tool,
            same_as=same_as,
            read_tool=cfg.read_tool_name,
            path=ctx.named_file(ref),
            delta=delta,
        )
        if len(text) < len(result.text):
            reason = "duplicate" if delta is None else "rerun"
            out.append(replaced(result, "spilled", reason, text, ref))
    return out
