"""The batch decision: where a staleness batch starts, or whether it waits (the cut search).

Every eligible result is a possible cut; a batch trims it and every eligible result after it
(they are re-written anyway). Each cut is priced as :mod:`budget.policy._costs` prices every
decision: the carried tokens saved over the requests still expected, the window risk removed,
against the cache re-write and the read-back risk; the best positive one runs. When the staleness
pass would trim a result kept whole (:func:`stale_trim_after`) is what a spill at first sight is
weighed against.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from budget.policy._costs import (
    RISK,
    Outlook,
    Prices,
    Verdict,
    breach_chance,
    fill_chance,
    made_verdict,
    readback_chance,
)
from budget.policy._observed import Observed

__all__ = [
    "FLOOR_READ_PRICE",
    "LOOKBACK_BLOCKS",
    "Item",
    "best_cut",
    "floor_at",
    "lookup_reach",
    "stale_trim_after",
]


@dataclass(frozen=True, slots=True)
class Item:
    """One result a batch may trim, as the cut search sees it."""

    reclaim: int
    """Tokens trimming it reclaims (its shown tokens less its stub's); 0 for a result no batch
    of this request may trim (a pointer of it names the output): it hides nothing, risks no
    read-back."""
    before: int
    """Tokens of the request before the message that made its call: where the last request
    before it ended, so where a trim starting at it begins re-writing."""
    page: int
    """Tokens a read-back of it brings back (a page of the read-back tool, at most all of it)."""
    is_error: bool
    alive: bool = True
    """The cache entry a trim starting at it falls back to is still alive (with explicit
    breakpoints an entry lives a TTL after the request that wrote or last read it)."""


LOOKBACK_BLOCKS = 20
"""Content blocks before a breakpoint at which Anthropic still finds an earlier cache entry
(Anthropic docs, "Prompt caching": hits are checked at block boundaries up to about 20 blocks
before each explicit breakpoint). A trim further back than that re-writes the whole prompt."""


FLOOR_READ_PRICE = 0.1
"""The read price ``stale_floor`` is set at: the cache pricing the product's defaults are
stated in (writes 1.25x, reads 0.1x of the base input price: Anthropic's list, as GPT-5's and
Gemini 2.5's reads)."""


def floor_at(floor_chars: int, read: float, least: int = 0) -> float:
    """The stale floor at a read price of ``read``: ``floor_chars`` up to
    :data:`FLOOR_READ_PRICE`, lower in proportion at a dearer read, never under ``least`` (the
    stub's length: a trim must not lengthen a result) unless the floor itself is.

    The floor spares a cache re-write for a trim that reclaims little; what is little is what
    the trim saves on each later request, its tokens at the read price. A result of 2,000
    characters carried at Claude's 0.1x costs what one of 400 does at GPT-4o's 0.5x (without a
    cache, at the base price, every result with tokens to reclaim is a candidate). A cheaper
    read keeps the setting: the price then declines the trims that do not pay, and a batch the
    price does not choose (a prompt over the window) trims what is over the setting, as at any
    price. After the provider refused a prompt the session trims under the floor too
    (``budget/session/_passrun.py``)."""
    if read <= FLOOR_READ_PRICE:
        return float(floor_chars)
    return max(min(least, floor_chars), floor_chars * FLOOR_READ_PRICE / read)


def lookup_reach(messages: Sequence[Any], before: Callable[[int], int]) -> int:
    """The earliest token of the request a cache lookup from its end still finds an entry at,
    with explicit breakpoints: the start of its last :data:`LOOKBACK_BLOCKS` content blocks
    (``before(i)``: the request's tokens before message ``i``)."""
    blocks = 0
    for i in range(len(messages) - 1, -1, -1):
        content = messages[i].get("content") if isinstance(messages[i], dict) else None
        blocks += len(content) if isinstance(content, list) and content else 1
        if blocks > LOOKBACK_BLOCKS:
            return before(i + 1)
    return 0


def stale_trim_after(prices: Prices, look: Outlook, hidden: float, rounds: int) -> float:
    """Requests after which the staleness pass would trim a result kept whole, at the earliest:
    once it has left the ``rounds`` protected rounds (a round a request), as soon as trimming it
    alone pays back the re-write from its carried saving. Its re-write is what the session adds
    over those rounds (``look.growth`` a request), written anew less the read a keep pays;
    the saving ``hidden`` tokens at the carry price a request.

    What a spill at first sight saves over keeping the result is carried only until then: from
    that trim on both show a stub. Where trims pay back fast (a high read price, no cache at all)
    that is soon after the protected rounds; at Claude's 0.1x it is far past the horizon. A
    batch trims more than this one result and pays back sooner: the estimate errs late, on the
    side of the spill (the rule before it: kept for good)."""
    if hidden <= 0 or prices.carry <= 0:
        return math.inf
    keep = prices.carry if prices.regime == "uncached" else prices.read
    rewrite = max(prices.new - keep, 0.0) * look.growth * rounds
    return rounds + rewrite / (hidden * prices.carry)


def best_cut(
    prices: Prices,
    look: Outlook,
    observed: Observed,
    items: Sequence[Item],
    *,
    cached_end: int,
    cold: bool,
    reach: int = 0,
    header: int = 0,
    allowance: float = math.inf,
    max_breach: float = RISK,
) -> Verdict:
    """The best batch: the cut (first item trimmed, every later one too) whose net saving is
    largest; ``wait`` when none is positive (with the best one's figures, to explain).

    ``cached_end``: tokens of this request the cache holds from the last request (a trim
    re-writes from a cut to it); ``cold``: the cache expired anyway. ``reach``: the earliest
    token a lookup still finds an entry at (0 for automatic caching; with explicit breakpoints
    the start of the last :data:`LOOKBACK_BLOCKS` blocks): a cut before it, or whose entry
    expired (:attr:`Item.alive`), re-writes the request from its start, ``header`` included.
    Items are oldest first; linear in their number. A cut's worst case is its re-write (the
    session ends right after it); a cut is taken when ``allowance`` covers it or the chance
    the session ends before paying the shortfall back (:func:`breach_chance`) is at most
    ``max_breach`` (:data:`RISK`); else ``wait``, with the best cut's figures (``covered`` False).
    """
    carry, new, n = prices.carry, prices.new, look.requests
    keep_price = new if cold or prices.regime == "uncached" else prices.read
    chance = {e: readback_chance(observed, fresh=False, is_error=e) for e in (False, True)}
    # readback_cost(prices, look, page), split into its fixed part and its price per page token.
    per_request, per_page = carry * look.tokens, new + carry * n
    fill = look.fill_cost(prices)
    before_fill = fill_chance(look.made, look.to_fill(look.tokens))
    reclaim = risk = reclaim_in_cache = 0.0
    best: tuple[float, int, float, float, float, float] | None = None
    best_any: tuple[float, int, float, float, float, float] | None = None
    for j in range(len(items) - 1, -1, -1):
        it = items[j]
        reclaim += it.reclaim
        if it.before < cached_end:
            reclaim_in_cache += it.reclaim
        risk += (it.reclaim > 0) * chance[it.is_error] * (per_request + per_page * it.page)
        shallow = it.before >= reach and it.alive
        span = max(cached_end - it.before, 0) if shallow else cached_end + header
        rewrite = new * (span - reclaim_in_cache) - keep_price * span
        after_fill = fill_chance(look.made, look.to_fill(look.tokens - reclaim))
        gain = fill * (before_fill - after_fill)  # Outlook.window_gain, its parts hoisted
        net = reclaim * carry * n + gain - rewrite - risk
        # Ties go to the later cut (fewer results hidden, less re-written).
        if best_any is None or net > best_any[0]:
            best_any = (net, j, reclaim, rewrite, risk, gain)
        if (best is None or net > best[0]) and (
            breach_chance(look.made, rewrite - allowance, reclaim * carry, 1.0) <= max_breach
        ):
            best = (net, j, reclaim, rewrite, risk, gain)
    if best_any is None:
        return _waiting(prices, look)
    take = best is not None and best[0] > 0
    return _batch_verdict(prices, look, best if take and best is not None else best_any, take,
                          allowance, max_breach)  # fmt: skip


def _batch_verdict(
    prices: Prices,
    look: Outlook,
    cut: tuple[float, int, float, float, float, float],
    take: bool,
    allowance: float,
    max_breach: float = RISK,
) -> Verdict:
    """The verdict on the batch ``cut`` (net, index, reclaim, re-write, risk, window gain)."""
    net, j, reclaim, rewrite, risk, gain = cut
    n = look.requests
    breach = breach_chance(look.made, rewrite - allowance, reclaim * prices.carry, 1.0)
    return made_verdict(
        choice="trim" if take else "wait",
        regime=prices.regime,
        expected_requests=n,
        saving=reclaim * prices.carry * n,
        rewrite_cost=rewrite,
        readback_risk=risk,
        window_gain=gain,
        net=net,
        reclaim_tokens=int(reclaim),
        cut=j,
        worst_case=rewrite,
        covered=breach <= max_breach,
    )


def _waiting(prices: Prices, look: Outlook) -> Verdict:
    """The verdict when nothing is eligible: wait, nothing priced."""
    return made_verdict(
        choice="wait",
        regime=prices.regime,
        expected_requests=look.requests,
        saving=0.0,
        rewrite_cost=0.0,
        readback_risk=0.0,
        window_gain=0.0,
        net=0.0,
    )
