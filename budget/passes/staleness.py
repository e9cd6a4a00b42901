"""Pass 3, staleness: old results become short stubs, in batches priced by the cost model.

Trimming rewrites old messages and so breaks the cached prefix once. Each request the cut search
(``budget.policy.best_cut``) prices every batch it could run: the one starting at each eligible
result, with every eligible result after it trimmed too (they are re-written anyway). The best
one runs when its net saving is positive (the tokens no longer carried over the requests still
expected, plus the window risk it removes, against the re-write and the read-back risk);
otherwise the session waits. An overflow forces a batch of everything eligible.
"""

from __future__ import annotations

from dataclasses import replace

from budget._ledger import Decision
from budget.passes._context import PassContext, fresh_hidden, trim
from budget.policy import Verdict, allowance, best_cut

__all__ = ["batch", "reason_of", "staleness"]


def batch(ctx: PassContext) -> tuple[int, str] | None:
    """The batch this request runs, as (index of the first eligible result trimmed, reason)."""
    s, cfg = ctx.staleness, ctx.config
    if not s.eligible:
        return None
    if s.forced:
        return 0, "forced"
    costs = ctx.costs
    if not cfg.staleness or costs is None:
        return None
    # The estimate counts this request's fresh results whole: as the earlier passes decided
    # them (a huge output spilled leaves the request far from the window), not as given.
    look = replace(costs.look, tokens=costs.look.tokens - fresh_hidden(ctx))
    if look.tokens >= look.window:
        # Over the window the provider refuses the request: no price to weigh, trim all.
        return 0, "window"
    items = costs.items()
    if spared := s.spared():
        # An output a pointer of this request names is not trimmed: it reclaims nothing.
        items = [
            replace(it, reclaim=0, page=0) if s.eligible[i].result.call_id in spared else it
            for i, it in enumerate(items)
        ]
    verdict = best_cut(
        costs.prices,
        look,
        costs.observed,
        items,
        cached_end=costs.cached_end,
        cold=costs.cold,
        reach=costs.reach(),
        header=costs.header,
        # Only a batch whose re-write the session's own savings cover (issue 30: no session
        # billed above 1.005x sending everything, however soon it ends).
        allowance=allowance(costs.observed, cfg.promise_tolerance),
        max_breach=cfg.promise_risk,
    )
    costs.verdicts[BATCH] = verdict
    if verdict.choice != "trim" or verdict.cut is None:
        return None
    return verdict.cut, reason_of(verdict, cold=costs.cold)


BATCH = "\x00batch"
"""The key of the batch's verdict among the verdicts (no call id holds a NUL first)."""


def reason_of(verdict: Verdict, *, cold: bool) -> str:
    """Why a batch ran, named by what made it pay: no cache at all, an expired cache, the
    window's risk (more than the carried tokens), or the carried tokens themselves."""
    if verdict.regime == "uncached":
        return "no_cache"
    if cold:
        return "cold_cache"
    if verdict.window_gain > verdict.saving:
        return "window"
    return "pays"


def staleness(ctx: PassContext) -> list[Decision]:
    """Trim the eligible results from the chosen cut on; nothing when the session waits."""
    chosen = batch(ctx)
    if chosen is None:
        return []
    cut, reason = chosen
    spared = ctx.staleness.spared()
    return [
        trim(ctx, c.result, reason, c.decision.ref)
        for c in ctx.staleness.eligible[cut:]
        if c.result.call_id not in spared
    ]
