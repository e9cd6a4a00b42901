"""The cost model: the expected billed tokens of each option a decision has, and the choice.

Every price is relative to the base price of one input token (1.0). A token kept in the prompt is
paid again on every later request: at the cache-read price when the provider caches, at the
uncached price when it does not (the *carry* price). A token new to the prompt is paid once at the
cache-write price (the *new* price: Anthropic's explicit writes cost 1.25x, OpenAI's and Google's
automatic caching writes at the base price). Hiding a result saves its tokens on every later
request, but the agent may need it again: a read-back is one more request (the prompt read again)
that adds a page which every later request carries. Trimming an old result also re-writes
everything after it, which the cache held. The two sides of every decision are these sums,
over the requests the session is still expected to make.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from budget.policy._observed import Observed

__all__ = [
    "LOOKBACK_BLOCKS",
    "NO_CACHE_AFTER",
    "Item",
    "Outlook",
    "Prices",
    "Regime",
    "Verdict",
    "best_cut",
    "expected_remaining",
    "fill_chance",
    "outlook",
    "prices_for",
    "readback_chance",
    "readback_cost",
    "spill_verdict",
]

Regime = Literal["cached", "uncached", "unknown"]

NO_CACHE_AFTER = 3
"""Chances for a cache read (see :class:`Observed.chances`) with no read at all after which the
session is priced as uncached. One miss is a cold cache or a prefix under the minimum; a cache
that exists is read on the second warm request already (Anthropic docs, "Prompt caching": a
prefix is cached for reuse by the next request within the TTL; OpenAI docs: automatic for
prompts of 1,024 tokens or more), so three in a row within the TTL mean no cache is there."""

READBACK_PRIORS: dict[tuple[bool, bool], tuple[float, float]] = {
    # (fresh, is_error): (read-backs, results) the prior counts as, a Beta(a, b) mean a / (a + b).
    # A fresh result is one the model has not seen yet: it asked for it and will act on it, so
    # it reads it all but one time in five (errors, the failing line or the traceback: all but
    # one in ten), from its start (:func:`spill_verdict`). A stale result (older than the
    # protected rounds) has been read and acted on already; observation masking of such turns
    # hardly changes solve rates (Lindenbauer et al., "The Complexity Trap", DL4C @ NeurIPS
    # 2025), so 1 in 10 (errors 1 in 5). Each prior weighs as 10 hidden results: after about
    # that many the session's own rate counts as much as the prior.
    (True, False): (8.0, 2.0),
    (True, True): (9.0, 1.0),
    (False, False): (1.0, 9.0),
    (False, True): (2.0, 8.0),
}


@dataclass(frozen=True, slots=True)
class Prices:
    """The session's per-token prices and cache rules, relative to the base input price."""

    write: float
    """A token written to the cache (Anthropic 1.25x; automatic caching: 1.0)."""
    read: float
    """A token read from the cache (0.1x on Anthropic, OpenAI and Google price lists)."""
    ttl_s: float
    """Seconds a cache entry lives after its last use."""
    regime: Regime
    uncached: float = 1.0
    """A token billed without the cache (the base price)."""
    explicit: bool = True
    """Explicit breakpoints (writes priced as such: Anthropic), whose lookup looks back only
    :data:`LOOKBACK_BLOCKS` blocks; False for automatic prefix caching (OpenAI, Google)."""

    @property
    def carry(self) -> float:
        """What one token kept in the prompt costs on each later request."""
        return self.uncached if self.regime == "uncached" else self.read

    @property
    def new(self) -> float:
        """What one token new to the prompt costs once."""
        return self.uncached if self.regime == "uncached" else self.write


def prices_for(
    observed: Observed, *, write: float, read: float, ttl_s: float, reads_seen_needed: int = 1
) -> Prices:
    """The prices the session's own usage shows: the regime, the write price, the TTL.

    ``write``, ``read`` and ``ttl_s`` are the configured price list (Anthropic's by default).
    No usage yet: priced as cached at those prices (a trim then costs a re-write: the careful
    side). Reads seen but never a write: automatic caching, whose writes cost the base price
    (OpenAI and Google price lists). No read after :data:`NO_CACHE_AFTER` chances: uncached.
    """
    ttl = max(ttl_s, observed.warm_pause_s)
    if observed.reads >= reads_seen_needed:
        explicit = observed.writes > 0
        w = write if explicit else 1.0
        return Prices(write=w, read=read, ttl_s=ttl, regime="cached", explicit=explicit)
    if observed.chances >= NO_CACHE_AFTER:
        return Prices(write=1.0, read=1.0, ttl_s=ttl, regime="uncached", explicit=False)
    return Prices(write=write, read=read, ttl_s=ttl, regime="unknown")


PAYBACK_SHARE = 0.5
"""The horizon as a share of the requests so far: a decision must pay back within ``m / 2``
later requests, which under Lindy's law a session outlives two times in three."""


def expected_remaining(made: int, horizon: float) -> float:
    """Expected requests after this one, when ``made`` were made before it and at most
    ``horizon`` more fit before the window fills.

    Lindy's law (Gott's delta-t argument): a session that has lasted ``m`` requests goes on for
    ``k`` more with probability ``m / (m + k)``, with ``m = made + 1`` (this request counts: the
    prior that a session seen once is as likely to stop as to go on). The expectation of that
    survival summed to ``horizon``, ``sum m / (m + k)``, is ``m ln((m + H + 1/2) / (m + 1/2))``
    to within a fraction of a request (the midpoint rule on ``1 / x``), but at most ``m / 2``
    (:data:`PAYBACK_SHARE`: see below).
    """
    if horizon <= 0:
        return 0.0
    m = made + 1
    mean = m * math.log((m + horizon + 0.5) / (m + 0.5))
    # A trim's cost is paid now and for certain, its saving only as the session goes on: the
    # horizon is never taken past m / 2 requests, which the session outlives with probability
    # m / (m + m/2) = 2/3. What is acted on pays back two times in three (at m, the median,
    # one time in two: a session in three would then cost more than sending everything).
    return min(mean, m * PAYBACK_SHARE, horizon)


def fill_chance(made: int, requests_to_fill: float) -> float:
    """The chance the session lasts ``requests_to_fill`` more requests (Lindy, as above)."""
    if requests_to_fill <= 0:
        return 1.0
    m = made + 1
    return m / (m + requests_to_fill)


@dataclass(frozen=True, slots=True)
class Outlook:
    """The session's expected future at this request."""

    made: int
    """Requests made before this one."""
    tokens: int
    """Estimated tokens of this request."""
    window: int
    growth: float
    """Tokens the prompt grows by per request, measured over the session (a prior before)."""
    requests: float
    """Expected later requests (:func:`expected_remaining` up to the window)."""

    def to_fill(self, tokens: float) -> float:
        """Requests until a prompt of ``tokens`` grows into the window."""
        return (self.window - tokens) / self.growth

    def fill_cost(self, prices: Prices) -> float:
        """What reaching the window costs: the full prompt sent once more (the request that was
        refused, or the agent's compaction reading it) and written anew after (a compacted or
        trimmed prefix is new to the cache)."""
        return self.window * (prices.carry + prices.new)

    def window_gain(self, prices: Prices, reclaim: float) -> float:
        """The expected cost of reaching the window that reclaiming ``reclaim`` tokens avoids."""
        if reclaim <= 0:
            return 0.0
        before = fill_chance(self.made, self.to_fill(self.tokens))
        after = fill_chance(self.made, self.to_fill(self.tokens - reclaim))
        return self.fill_cost(prices) * (before - after)


def outlook(observed: Observed, *, tokens: int, window: int) -> Outlook:
    """The outlook at a request of ``tokens`` in ``window``, from what the session saw.

    The growth per request is measured from the first request; before there is a second one
    (or when the prompt shrank: a compaction), the prior is that every request adds as much as
    the average request so far holds: too fast a growth, on purpose, since it only shortens the
    horizon (fewer trims expected to pay) and brings the window closer.
    """
    made = observed.requests
    grown = tokens - observed.first_tokens
    growth = grown / made if made >= 1 and grown > 0 else max(tokens, 1) / (made + 1)
    growth = max(growth, 1.0)
    horizon = (window - tokens) / growth
    return Outlook(made, tokens, window, growth, expected_remaining(made, horizon))


def readback_chance(observed: Observed, *, fresh: bool, is_error: bool) -> float:
    """The chance a hidden result is read back: the prior updated by the session's own rate
    (read-backs seen over results hidden so far).

    Hidden results never read back count as evidence only where the session sees read-backs
    (``observed.readbacks_visible``): an agent reading spilled files with its own file tools
    (envelopes naming the path) reads back unseen, so there only the read-backs seen count.
    """
    a, b = READBACK_PRIORS[(fresh, is_error)]
    if not observed.readbacks_visible:
        return (a + observed.readbacks) / (a + b + observed.readbacks)
    return (a + observed.readbacks) / (a + b + max(observed.hidden, observed.readbacks))


def readback_cost(prices: Prices, look: Outlook, page_tokens: float) -> float:
    """One read-back: a request re-reading the prompt, whose page is new, then carried."""
    return (
        prices.carry * look.tokens
        + prices.new * page_tokens
        + prices.carry * page_tokens * look.requests
    )


@dataclass(frozen=True, slots=True)
class Verdict:
    """One decision's two options priced: what it saves against what it costs (billed tokens).

    A frozen dataclass, not a pydantic model: one is made per weighed result on every request,
    and it must cost no more than the arithmetic (pydantic's constructor took 5 µs)."""

    choice: Literal["spill", "keep", "trim", "wait"]
    regime: Regime
    expected_requests: float
    """Later requests the session is expected to make (the savings' horizon)."""
    saving: float
    """Billed tokens the hidden text would cost over those requests (and now, for a fresh
    result, its write)."""
    rewrite_cost: float
    """What trimming re-writes now, less what keeping would pay for the same tokens (negative:
    the cache was cold or there is none, so the trim saves even now). 0 for a fresh result."""
    readback_risk: float
    """The expected cost of the read-backs the hidden text will need."""
    window_gain: float
    """The expected cost of reaching the window that the reclaimed tokens avoid."""
    net: float
    """saving + window_gain - rewrite_cost - readback_risk: acted on when positive."""
    reclaim_tokens: int = 0
    cut: int | None = None
    """For a batch: the index, among the eligible results, of the first one trimmed."""


def spill_verdict(
    prices: Prices,
    look: Outlook,
    observed: Observed,
    *,
    tokens: int,
    envelope_tokens: int,
    is_error: bool,
    page_tokens: int,
) -> Verdict:
    """Spill a fresh result (``tokens``) to its envelope, or keep it whole.

    Nothing is cached yet: keeping it writes its tokens now and carries them on every later
    request; spilling writes and carries the envelope instead, and risks a read-back of its
    first page (``page_tokens``, at most all of it).
    """
    hidden = max(tokens - envelope_tokens, 0)
    saving = hidden * (prices.new + prices.carry * look.requests)
    # The agent has seen none of it but the preview: when it needs it, it reads it from the
    # start, a page of the read-back tool at a time (the first page, at most all of it).
    chance = readback_chance(observed, fresh=True, is_error=is_error)
    risk = chance * readback_cost(prices, look, min(page_tokens, tokens))
    gain = look.window_gain(prices, hidden)
    net = saving + gain - risk
    return Verdict(
        choice="spill" if net > 0 and hidden > 0 else "keep",
        regime=prices.regime,
        expected_requests=look.requests,
        saving=saving,
        rewrite_cost=0.0,
        readback_risk=risk,
        window_gain=gain,
        net=net,
        reclaim_tokens=hidden,
    )


@dataclass(frozen=True, slots=True)
class Item:
    """One result a batch may trim, as the cut search sees it."""

    reclaim: int
    """Tokens trimming it reclaims (its shown tokens less its stub's)."""
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
) -> Verdict:
    """The best batch: the cut (first item trimmed, every later one trimmed too) whose net
    saving is largest; ``wait`` when none is positive (the best one's figures, to explain).

    ``cached_end``: tokens of this request the cache holds from the last request (a trim
    re-writes from a cut to it); ``cold``: the cache expired anyway, so keeping writes too. ``reach``: the earliest token a cache lookup still
    finds an entry at (0 for automatic caching, which matches any prefix; with explicit
    breakpoints the start of the last :data:`LOOKBACK_BLOCKS` blocks): a cut before it re-writes
    the request from its start, ``header`` (system prompt, tools) included, as does a cut whose
    entry expired (:attr:`Item.alive`). Items are oldest first; linear in their number.
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
    for j in range(len(items) - 1, -1, -1):
        it = items[j]
        reclaim += it.reclaim
        if it.before < cached_end:
            reclaim_in_cache += it.reclaim
        risk += chance[it.is_error] * (per_request + per_page * it.page)
        shallow = it.before >= reach and it.alive
        span = max(cached_end - it.before, 0) if shallow else cached_end + header
        rewrite = new * (span - reclaim_in_cache) - keep_price * span
        after_fill = fill_chance(look.made, look.to_fill(look.tokens - reclaim))
        gain = fill * (before_fill - after_fill)  # Outlook.window_gain, its parts hoisted
        net = reclaim * carry * n + gain - rewrite - risk
        # Ties go to the later cut (fewer results hidden, less re-written).
        if best is None or net > best[0]:
            best = (net, j, reclaim, rewrite, risk, gain)
    if best is None:
        return _waiting(prices, look)
    net, j, reclaim, rewrite, risk, gain = best
    return Verdict(
        choice="trim" if net > 0 else "wait",
        regime=prices.regime,
        expected_requests=n,
        saving=reclaim * carry * n,
        rewrite_cost=rewrite,
        readback_risk=risk,
        window_gain=gain,
        net=net,
        reclaim_tokens=int(reclaim),
        cut=j,
    )


def _waiting(prices: Prices, look: Outlook) -> Verdict:
    """The verdict when nothing is eligible: wait, nothing priced."""
    return Verdict(
        choice="wait",
        regime=prices.regime,
        expected_requests=look.requests,
        saving=0.0,
        rewrite_cost=0.0,
        readback_risk=0.0,
        window_gain=0.0,
        net=0.0,
    )
