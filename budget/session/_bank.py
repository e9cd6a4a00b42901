"""The session's bank: the savings its own decisions have realised, and its bill so far.

What a decision that can lose may lose at worst is bounded by them (``budget.policy.allowance``,
issue 30: no session billed above 1.005x sending everything). Both are learned state, logged in
the request record's ``p`` with the rest of :class:`budget.policy.Observed`, and computed only
from the history and the logged counts, so a resumed session banks what the one that went on
banked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from budget._ledger import Decision
from budget.passes.staleness import BATCH
from budget.policy import Observed, Prices, Verdict
from budget.session._tally import Tally
from budget.session._values import Turn

__all__ = ["banked", "banked_now"]


def banked(
    tally: Tally,
    prices: Prices,
    *,
    hidden: int,
    estimate: int,
    cached_end: int,
    page_tokens: float,
) -> Observed:
    """The bank and the bill as of a request, from what the session already decided.

    The ``hidden`` tokens its earlier decisions hide from this request (the history's tokens
    less the copy's) are saved on it at the carry price; each read-back seen since the last
    request costs a request re-reading the prompt and a page. The last request's bill is its
    usage's, or its estimate when no usage came; this request's estimate (what the cache holds
    read, the rest new) waits for its usage.
    """
    observed = tally.observed
    seen = tally.readbacks()
    readbacks = max(seen - observed.readbacks, 0) * (
        prices.carry * estimate + prices.new * page_tokens
    )
    bill = tally.usage_bill if tally.usage_bill is not None else observed.pending_bill
    tally.usage_bill = None
    cached = min(cached_end, estimate)
    return observed.banked(
        bank=observed.bank + hidden * prices.carry - readbacks,
        billed=observed.billed + (bill if tally.requests else 0.0),
        readbacks=max(seen, observed.readbacks),
        pending=prices.carry * cached + prices.new * (estimate - cached),
        recalled=tally.recalled(),
    )


def banked_now(
    observed: Observed,
    turn: Turn,
    made: Mapping[str, Decision],
    verdicts: Mapping[str, Verdict],
    prices: Prices,
    text_tokens: Callable[[str], int],
) -> Observed:
    """The bank after a request's own decisions: a batch's re-write is paid now (what later
    decisions may lose shrinks by it); a fresh result spilled saves its write now."""
    batch = verdicts.get(BATCH)
    trimmed = any(d.kind == "trimmed" for d in made.values())
    paid = batch.rewrite_cost if trimmed and batch is not None and batch.choice == "trim" else 0.0
    fresh = {r.call_id: r for r in turn.fresh}
    # A priced spill's verdict holds its hidden tokens already; a hard limit's is counted.
    spilled = sum(
        v.reclaim_tokens
        if (v := verdicts.get(cid)) is not None
        else text_tokens(r.text) - text_tokens(d.text or "")
        for cid, d in made.items()
        if d.kind == "spilled" and (r := fresh.get(cid)) is not None
    )
    return observed.banked(
        bank=observed.bank - paid + prices.new * max(spilled, 0),
        billed=observed.billed,
        readbacks=observed.readbacks,
        pending=observed.pending_bill,
        recalled=observed.recalled,
    )
