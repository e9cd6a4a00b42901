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
from dataclasses import dataclass
from typing import Literal

from budget._view import builder
from budget.policy._observed import ONE_HOUR_S, Observed

__all__ = [
    "NO_CACHE_AFTER",
    "TOLERANCE",
    "Outlook",
    "Prices",
    "Regime",
    "Verdict",
    "allowance",
    "breach_chance",
    "expected_remaining",
    "fill_chance",
    "outlook",
    "prices_for",
    "readback_chance",
    "readback_cost",
    "readbacks_per_need",
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
    # A fresh result is one the model has not seen yet but for its preview: nothing says how
    # often the preview will do, so the prior is Laplace's (one read-back in two, weighing as two
    # results: the session's own rate soon counts most); an error's failing line or traceback is
    # more likely needed (one read-back more: two in three). A stale result (older than the
    # protected rounds) has been read and acted on already; observation masking of such turns
    # hardly changes solve rates (Lindenbauer et al., "The Complexity Trap", DL4C @ NeurIPS
    # 2025), so 1 in 10 (errors 1 in 5), weighing as 10 results. The rate counts every later
    # call that names a hidden result's ref (the read-back tool's, or the agent's own tools
    # opening the spilled file) and the read-backs a host notes (``Budget.note_readback``).
    (True, False): (1.0, 1.0),
    (True, True): (2.0, 1.0),
    (False, False): (1.0, 9.0),
    (False, True): (2.0, 8.0),
}


TOLERANCE = 0.005
"""What a session may be billed above sending everything, as a share of its bill so far: the
product's promise (issue 30: "no trace above 1.005x" none). A decision that can lose is taken
when its worst case is covered by what the session's decisions already saved plus this share,
or when the chance it leaves the session above that is under :data:`RISK`."""


RISK = 0.05
"""The chance a decision may carry of leaving the session above :data:`TOLERANCE` (the
conventional one in twenty). The bank (:func:`allowance`) makes a decision safe whenever the
session ends; a decision whose worst case the bank does not cover is still taken when the
session is that unlikely to end before its saving has paid the shortfall back (Lindy's law,
:func:`breach_chance`): without it a session that has saved nothing yet could never start."""


def breach_chance(made: int, shortfall: float, per_request: float, chance: float) -> float:
    """The chance a decision leaves the session above the tolerance: it loses ``shortfall``
    more than the allowance unless the session outlives the requests its ``per_request`` saving
    needs to pay that back (Lindy, as :func:`fill_chance`), times the ``chance`` the loss
    happens at all."""
    if shortfall <= 0:
        return 0.0
    if per_request <= 0:
        return chance
    # Requests come whole: the shortfall is paid back only once ``k`` requests have saved it.
    k = math.ceil(shortfall / per_request)
    m = made + 1
    return chance * k / (m + k)


def allowance(observed: Observed, tolerance: float = TOLERANCE) -> float:
    """What a decision of this request may lose at worst (billed tokens): the savings the
    session's own decisions have realised (``observed.bank``) plus ``tolerance``
    (:data:`TOLERANCE`) of what sending everything would have been billed so far: the session's
    bill plus its bank (the promise is relative to that bill, which the bank is the difference
    from).

    The expected-value rule pays on average, and a session that ends right after a batch loses
    the batch's re-write whole: bounding each decision's worst case by the bank keeps the whole
    session within the tolerance of sending everything, whenever it ends (what one decision may
    lose was saved before it, and each loss is taken off the bank before the next decision)."""
    return observed.bank + tolerance * max(observed.billed + observed.bank, 0.0)


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
    observed: Observed,
    *,
    write: float,
    read: float,
    ttl_s: float,
    reads_seen_needed: int = 1,
    explicit: bool = True,
    write_long: float | None = None,
) -> Prices:
    """The prices the session's own usage shows: the regime, the write price, the TTL.

    ``write``, ``read``, ``ttl_s``, ``explicit`` and ``write_long`` (a write to an entry that
    lives an hour; ``write`` when None) are the model's price list
    (:func:`budget.policy.price_list`, Anthropic's when the model is not known) or the caller's.
    No usage yet: priced as cached at those prices (a trim then costs a re-write: the careful
    side). Reads seen but never a write: automatic caching, whose writes cost the base price
    (OpenAI and Google price lists). No read after :data:`NO_CACHE_AFTER` chances: uncached.
    Explicit writes made for an hour (:data:`ONE_HOUR_S` in ``observed.warm_pause_s``) cost
    ``write_long`` and live an hour: a pause of minutes leaves their cache warm.
    """
    ttl = max(ttl_s, observed.warm_pause_s)
    long = write if write_long is None or observed.warm_pause_s < ONE_HOUR_S else write_long
    if observed.reads >= reads_seen_needed:
        explicit = observed.writes > 0
        w = long if explicit else 1.0
        return _prices(write=w, read=read, ttl_s=ttl, regime="cached", explicit=explicit)
    if observed.chances >= NO_CACHE_AFTER:
        return _prices(write=1.0, read=1.0, ttl_s=ttl, regime="uncached", explicit=False)
    return _prices(write=long, read=read, ttl_s=ttl, regime="unknown", explicit=explicit)


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
    return _outlook(made, tokens, window, growth, expected_remaining(made, horizon))


def readback_chance(
    observed: Observed, *, fresh: bool, is_error: bool, kind: tuple[int, int] = (0, 0)
) -> float:
    """The chance a hidden result is read back: the prior updated by the session's own rate
    (read-backs seen over results hidden so far).

    A read-back is any later call naming a hidden result's ref, with the read-back tool or the
    agent's own tools opening the spilled file the envelope names, so a hidden result that no
    call has named is evidence either way. For a fresh result the results weighed and kept
    whole count too (``observed.exposed``): the agent saw each in full, and a later quote of a
    line its preview would not have shown (``observed.needed``) is the read-back a spill would
    have cost. Without them a session that has hidden nothing would never learn its rate, and
    the prior alone would keep it from ever spilling.

    ``kind``: (exposed, needed) of the result's own tool. One agent quotes its file reads line
    by line in its edits and reads its test logs once, so each tool's rate is its own, with the
    session's rate over the other tools as its prior, weighing as the prior does (``a + b``
    results: empirical Bayes, each result counted once). No evidence of the tool: the session's
    rate.
    """
    a, b = READBACK_PRIORS[(fresh, is_error)]
    # A result read back twice is one result needed (its second read-back is counted by
    # :func:`readbacks_per_need`): the rate is over results, as the kept ones' is.
    seen, hidden = observed.recalled, max(observed.hidden, observed.recalled)
    if not fresh:
        return (a + seen) / (a + b + hidden)
    exposed, needed = kind
    others = max(observed.needed - needed, 0)
    pooled = (a + seen + others) / (a + b + hidden + max(observed.exposed - exposed, others))
    return ((a + b) * pooled + needed) / (a + b + max(exposed, needed))


def readbacks_per_need(observed: Observed, kind: tuple[int, int, int] = (0, 0, 0)) -> float:
    """The read-backs a hidden result costs when the agent needs it: one by the prior (weighing
    as one result), then the session's own count over the kept results it found needed
    (``observed.episodes`` per ``observed.needed``).

    An agent that edits a file it read quotes lines all over it, answer after answer; hidden,
    each of those answers would have read back a part of it first. Which agent reads back how
    much is the session's own: one reads a page and works from it, another comes back to the
    file in every edit. A result needed at all is needed once at least, so the count is never
    below one.

    ``kind``: (exposed, needed, episodes) of the result's own tool. The same agent comes back to
    a file it edits in every answer and reads a test log once, so each tool's count is its own,
    with the session's count over the other tools as its prior, weighing as one result (as
    :func:`readback_chance` weighs each tool's rate). No evidence of the tool: the session's.

    The hidden results read back count alike, in the session's figure (a read-back names no
    tool): each one read back (``observed.recalled``) is a result needed, each read-back of it
    (``observed.readbacks``) a part it needed; the chance counts the results only, so a result
    read back three times weighs once there and three times here, never three times in both."""
    _, needed, episodes = kind
    recalled = min(observed.recalled, observed.readbacks)
    others = (1 + max(observed.episodes - episodes, 0) + observed.readbacks) / (
        1 + max(observed.needed - needed, 0) + recalled
    )
    return (others + episodes) / (1 + needed)


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
    worst_case: float = 0.0
    """What the option acted on loses if the session ends right after this request (a batch: its
    re-write; a spill: a read-back of its first page at once), less what it saves now."""
    covered: bool = True
    """Whether :func:`allowance` covers ``worst_case``: an option that pays on average but is
    not covered is not taken (the choice is then ``keep`` or ``wait``)."""

    def event_fields(self) -> dict[str, object]:
        """The figures as event fields (rounded: billed tokens, not their fractions)."""
        return {
            "regime": self.regime,
            "expected_requests": round(self.expected_requests, 2),
            "saving": round(self.saving),
            "rewrite_cost": round(self.rewrite_cost),
            "readback_risk": round(self.readback_risk),
            "window_gain": round(self.window_gain),
            "net": round(self.net),
            "worst_case": round(self.worst_case),
            "covered": self.covered,
        }


# Made on every request (a verdict per weighed result, the prices and the outlook): their
# constructors at a plain object's cost (budget._view.builder), not a frozen dataclass's.
_prices = builder(Prices)
_outlook = builder(Outlook)
made_verdict = builder(Verdict)
"""Verdict's constructor at a plain object's cost (the cut search makes one too)."""


def spill_verdict(
    prices: Prices,
    look: Outlook,
    observed: Observed,
    *,
    tokens: int,
    envelope_tokens: int,
    is_error: bool,
    page_tokens: int,
    allowance: float = math.inf,
    kind: tuple[int, int, int] = (0, 0, 0),
    max_breach: float = RISK,
    trim_after: float = math.inf,
) -> Verdict:
    """Spill a fresh result (``tokens``) to its envelope, or keep it whole.

    Nothing is cached yet: keeping it writes its tokens now and carries them on every later
    request; spilling writes and carries the envelope instead, and risks a read-back of its
    first page (``page_tokens``, at most all of it), as many times as the needed results of its
    tool were read back (:func:`readbacks_per_need`; ``kind``: its tool's evidence). Its worst
    case is that read-back on the next request and then the end of the session, less the write
    spilling saves now: spilled only when :func:`allowance` (``allowance``) covers it, or when
    the chance of that read-back before the carried saving has paid the shortfall back is at
    most ``max_breach`` (:data:`RISK` by default). Its carried saving runs until ``trim_after``
    requests at most, when the staleness pass would trim it if kept
    (:func:`budget.policy.stale_trim_after`; kept for good by default).
    """
    hidden = max(tokens - envelope_tokens, 0)
    saving = hidden * (prices.new + prices.carry * min(look.requests, trim_after))
    # The agent has seen none of it but the preview: when it needs it, it reads it from the
    # start, a page of the read-back tool at a time (the first page, at most all of it).
    chance = readback_chance(observed, fresh=True, is_error=is_error, kind=kind[:2])
    page = min(page_tokens, tokens)
    risk = chance * readbacks_per_need(observed, kind) * readback_cost(prices, look, page)
    gain = look.window_gain(prices, hidden)
    net = saving + gain - risk
    # The read-back request re-reads the prompt (without the hidden tokens: spilled) and adds
    # the page; nothing after it is carried. Spilling saved the hidden tokens' write now.
    worst = prices.carry * (look.tokens - hidden) + prices.new * page - prices.new * hidden
    covered = (
        breach_chance(look.made, worst - allowance, hidden * prices.carry, chance) <= max_breach
    )
    return made_verdict(
        choice="spill" if net > 0 and hidden > 0 and covered else "keep",
        regime=prices.regime,
        expected_requests=look.requests,
        saving=saving,
        rewrite_cost=0.0,
        readback_risk=risk,
        window_gain=gain,
        net=net,
        reclaim_tokens=hidden,
        worst_case=worst,
        covered=covered,
    )
