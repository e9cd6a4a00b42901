"""The cost policy: every decision compares the expected billed tokens of its options.

One narrow component: :class:`Observed` (what the session learned about itself, logged with each
request), :func:`prices_for` (the cache regime and prices that usage shows, from the model's
published list: :func:`price_list`), :func:`outlook`
(the requests still expected and the window's distance), and the two decisions priced —
:func:`spill_verdict` (a fresh result: spill or keep) and :func:`best_cut` (a batch: where it
starts, or wait). It imports nothing of the session: passes, strategies, tests and the bench
call it with plain numbers. See ``docs/concepts/policy.md``.
"""

from __future__ import annotations

from budget.policy._costs import (
    NO_CACHE_AFTER,
    READBACK_PRIORS,
    RISK,
    TOLERANCE,
    Outlook,
    Prices,
    Regime,
    Verdict,
    allowance,
    breach_chance,
    expected_remaining,
    fill_chance,
    outlook,
    prices_for,
    readback_chance,
    readback_cost,
    readbacks_per_need,
    spill_verdict,
)
from budget.policy._cut import (
    FLOOR_READ_PRICE,
    LOOKBACK_BLOCKS,
    Item,
    best_cut,
    floor_at,
    lookup_reach,
    stale_trim_after,
)
from budget.policy._observed import MIN_CACHEABLE_PROMPT, ONE_HOUR_S, Observed
from budget.policy._pricelist import ANTHROPIC_PRICES, PriceList, price_list

__all__ = [
    "ANTHROPIC_PRICES",
    "FLOOR_READ_PRICE",
    "LOOKBACK_BLOCKS",
    "MIN_CACHEABLE_PROMPT",
    "NO_CACHE_AFTER",
    "ONE_HOUR_S",
    "READBACK_PRIORS",
    "RISK",
    "TOLERANCE",
    "Item",
    "Observed",
    "Outlook",
    "PriceList",
    "Prices",
    "Regime",
    "Verdict",
    "allowance",
    "best_cut",
    "breach_chance",
    "expected_remaining",
    "fill_chance",
    "floor_at",
    "lookup_reach",
    "outlook",
    "price_list",
    "prices_for",
    "readback_chance",
    "readback_cost",
    "readbacks_per_need",
    "spill_verdict",
    "stale_trim_after",
]
