"""Pass 3, staleness: old results become short stubs, in rare batches timed for the cache.

Trimming rewrites old messages and so breaks the cached prefix once. A batch therefore runs only
when it reclaims at least ``min_reclaim_tokens`` and one trigger fires: the cache is cold anyway,
the context is under pressure, or the trim pays for itself over the requests still expected. When
it runs it trims everything eligible, so the next break is far away.
"""

from __future__ import annotations

from budget._envelope import stub
from budget._ledger import Decision
from budget.passes._context import PassContext, replaced

__all__ = ["staleness", "trigger"]


def trigger(ctx: PassContext) -> str | None:
    """Which trigger fires for this request's eligible results, if any: the batch's reason."""
    s, cfg = ctx.staleness, ctx.config
    if not s.eligible:
        return None
    if s.forced:
        return "forced"
    if not cfg.staleness or s.reclaim_tokens < cfg.min_reclaim_tokens:
        return None
    if s.last_request_at is not None and s.now - s.last_request_at >= cfg.cache_ttl_s:
        return "cold_cache"
    estimate = s.estimate_tokens - _saved_this_request(ctx)
    if estimate >= cfg.pressure * s.window:
        return "pressure"
    # Pays for itself: each later request reads R fewer tokens at the cached price, against
    # writing the prefix after the first trimmed result once more (less the read it replaces).
    later = min(s.requests_so_far * cfg.expected_requests_factor, cfg.expected_requests_cap)
    savings = s.reclaim_tokens * cfg.cache_read_price * later
    cost = (s.rewrite_tokens - s.reclaim_tokens) * cfg.cache_write_price - (
        s.rewrite_tokens * cfg.cache_read_price
    )
    if savings > cost:
        return "pays"
    return None


def staleness(ctx: PassContext) -> list[Decision]:
    """Trim every eligible result when a trigger fires; otherwise nothing."""
    reason = trigger(ctx)
    if reason is None:
        return []
    cfg = ctx.config
    out = []
    for cand in ctx.staleness.eligible:
        result, prev = cand.result, cand.decision
        ref = prev.ref or ctx.ref_for(result.text)
        text = stub(
            result.text,
            ref=ref,
            tool=result.tool,
            chars=cfg.stub_chars,
            read_tool=cfg.read_tool_name,
        )
        out.append(replaced(result, "trimmed", reason, text, ref))
    return out


def _saved_this_request(ctx: PassContext) -> int:
    """Tokens the earlier passes of this request already took off the estimate."""
    saved = 0
    by_id = {r.call_id: r for r in ctx.fresh}
    for call_id, d in ctx.decided.items():
        r = by_id.get(call_id)
        if r is not None and d.text is not None:
            saved += ctx.text_tokens(r.text) - ctx.text_tokens(d.text)
    return saved
