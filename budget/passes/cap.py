"""Pass 1, per-result cap: a fresh result is spilled whole when over its cap, or when the cost
model says spilling it costs less than keeping it (``budget.policy.spill_verdict``).

A tool's explicit cap (``tools={"x": ToolPolicy(cap=...)}``) is the caller's hard limit: such a
result is spilled over it and kept under it. For every other tool ``result_cap`` is a ceiling:
over it a result is always spilled; under it the cost model decides, at first sight, when
nothing of the result is cached yet and spilling costs no cache re-write.
"""

from __future__ import annotations

from budget._config import BudgetConfig
from budget._ledger import Decision
from budget._view import ToolResult
from budget.passes._context import PassContext, spill
from budget.policy import Verdict, allowance, spill_verdict, stale_trim_after

__all__ = ["ENVELOPE_FRAME_CHARS", "cap", "weigh", "weighed"]

ENVELOPE_FRAME_CHARS = 600
"""Characters an envelope adds to its preview: the header naming the ref, the size and the
read-back hint (about 560 with a file path, measured on ``budget._envelope.envelope``)."""


def cap(ctx: PassContext) -> list[Decision]:
    """Spill every fresh result over its cap, and those whose spill the cost model prefers."""
    out = []
    for result in ctx.fresh:
        limit = ctx.cap_for(result.tool)
        if limit is None or result.call_id in ctx.decided:
            continue
        if len(result.text) > limit:
            out.extend(_shorter(ctx, result, "cap"))
            continue
        if not weighed(ctx.config, result.tool, len(result.text), limit):
            continue  # the caller's own cap or a plain one (a hard limit), or no smaller envelope
        verdict = weigh(ctx, result)
        if verdict is not None and verdict.choice == "spill":
            out.extend(_shorter(ctx, result, "pays"))
    return out


def _shorter(ctx: PassContext, result: ToolResult, reason: str) -> list[Decision]:
    """The spill of ``result``, or nothing when its envelope would not be shorter than the
    output: just over a low cap, or with a long file path in its frame (``include_path``), the
    preview and frame can outgrow the output they would replace; it stays whole, as the
    aggregate pass keeps it (the cost model priced the envelope at its usual frame)."""
    decision = spill(ctx, result, reason)
    return [decision] if len(decision.text or "") < len(result.text) else []


def weighed(cfg: BudgetConfig, tool: str, chars: int, limit: int | None) -> bool:
    """Whether the cost model weighs a fresh result of ``tool`` and ``chars`` characters under
    its cap ``limit``: priced spills on, ``result_cap`` a ceiling (not the caller's own cap for
    the tool), and an envelope smaller than the result."""
    return (
        cfg.price_spills
        and limit is not None
        and cfg.preview_chars + ENVELOPE_FRAME_CHARS < chars <= limit
        and cfg.policy(tool).cap is None
    )


def weigh(ctx: PassContext, result: ToolResult) -> Verdict | None:
    """The cost model's verdict on spilling a fresh ``result`` the cost model weighs
    (:func:`weighed`), recorded for the report; None when there is no cost model."""
    costs, cfg = ctx.costs, ctx.config
    chars = len(result.text)
    if costs is None:
        return None
    tokens = ctx.text_tokens(result.text)
    per_char = tokens / chars
    envelope = round((cfg.preview_chars + ENVELOPE_FRAME_CHARS) * per_char)
    verdict = spill_verdict(
        costs.prices,
        costs.look,
        costs.observed,
        tokens=tokens,
        envelope_tokens=envelope,
        is_error=result.is_error,
        page_tokens=round(min(chars, cfg.read_page_chars) * per_char),
        allowance=allowance(costs.observed, cfg.promise_tolerance),
        kind=costs.kind(result.tool),
        max_breach=cfg.promise_risk,
        # Kept, it would be trimmed once stale where that pays back soon: the alternative.
        trim_after=stale_trim_after(
            costs.prices, costs.look, tokens - envelope, cfg.protect_rounds
        ),
    )
    costs.verdicts[result.call_id] = verdict
    return verdict
