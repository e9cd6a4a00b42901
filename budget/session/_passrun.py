"""The passes' turn: the context they read (staleness candidates, estimates) and their run.

``PIPELINE`` is a frozen ordered tuple of pure callables over one :class:`PassContext`; each
sees, through ``decided``, the decisions of the passes before it. A fresh result no pass touched
gets the default decision.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from types import MappingProxyType
from typing import Any

from budget._errors import BudgetError
from budget._ledger import Decision
from budget._view import ToolResult, builder
from budget.passes import PIPELINE, Costs, PassContext, Staleness
from budget.policy import Item, Prices, lookup_reach, outlook
from budget.previews import Earlier
from budget.session._bank import banked, banked_now
from budget.session._estimator import anchor
from budget.session._parts import Parts
from budget.session._values import Turn
from budget.tokens._usage import ProviderUsage, normalize_usage
from spill import ref_for

__all__ = ["Passes"]


# Made on every request: their constructors at a plain object's cost (budget._view.builder).
_pass_context = builder(PassContext)
_staleness = builder(Staleness)
_made_costs = builder(Costs)


class Passes:
    """The passes' turn in a request: the usage it is anchored on, the context the passes read,
    and their run over the fresh results. No state of its own: it reads the session's parts."""

    def __init__(self, parts: Parts) -> None:
        self.config = parts.config
        self._store, self._log, self._ledger = parts.store, parts.log, parts.ledger
        self._tt, self._tally, self._estimator = parts.text_tokens, parts.tally, parts.estimator
        self._history, self._copies = parts.history, parts.copies
        self._candidates, self._quotes = parts.candidates, parts.quotes
        self._prices, self._bodies = parts.prices, parts.bodies

    def usage_for(self, usage: Any, length: int) -> ProviderUsage | None:
        """The usage reported with this request, if it anchors this history's estimate."""
        # A usage still ends an overflow streak, but anchors the estimate only if it was
        # measured on this history: not after the caller shortened or rewrote it (compaction).
        reported = self._reported_usage(usage)
        holds = self._history.anchor_holds(length, self._tally.last_n, self._tally.last_f)
        if reported is not None and not holds:
            self._log.info(
                "toolbudget.session.usage_anchor_dropped", messages=length, last=self._tally.last_n
            )
            reported = None
        return reported

    def _reported_usage(self, usage: Any) -> ProviderUsage | None:
        if usage is None:
            return None
        u = normalize_usage(usage)
        if u is None:
            return None
        key = (u.input_tokens, u.cache_read_tokens, u.cache_write_tokens, u.output_tokens)
        if key != self._tally.last_usage:
            # A usage we have not seen is a new successful response: the overflow streak ends.
            self._tally.last_usage = key
            self._tally.overflows = 0
            self._tally.usage_bill = self._prices.listed.bill(
                u.input_tokens, u.cache_read_tokens, u.cache_write_tokens, u.cache_write_1h_tokens
            )
            self._tally.observed = self._tally.observed.after_usage(
                prompt=u.prompt_tokens,
                cache_read=u.cache_read_tokens,
                cache_write=u.cache_write_tokens,
                answered=self._tally.requests,
                ttl_s=self.config.cache_ttl_s,
                cache_write_1h=u.cache_write_1h_tokens,
            )
        return u

    def decide(
        self, turn: Turn, new_results: list[ToolResult], wrapped: Mapping[str, Decision]
    ) -> dict[str, Decision]:
        """Run the passes in order: every fresh result gets a decision (a default at least)."""
        # Results decided before (an earlier process, a rebuilt history) are staleness candidates
        # now, as they would be in a session that had gone on (no-op for known candidates).
        fresh_ids = {r.call_id for r in turn.fresh}
        self._candidates.add(r for r in new_results if r.call_id not in fresh_ids)
        self._tally.note_mentions(self._history.mentions, self._ledger.hidden_since)
        # Kept results the new answers quote outside their preview (none this request decides);
        # those leaving the protected rounds (read-back evidence: ``budget.session._quotes``).
        t, last = self._tally, (self._tally.last_n, self._tally.last_f)
        self._quotes.note(new_results, turn.messages, retry=turn.retry, last=last, fresh=fresh_ids)
        t.observed = self._quotes.pooled(t.observed)
        made: dict[str, Decision] = dict(wrapped)
        self._candidates.whole.begin()
        ctx = self._context(turn, made)  # ``decided``: a live view of the passes' decisions
        for _name, run in PIPELINE:
            for d in run(ctx):
                made[d.call_id] = d
        for r in turn.fresh:
            if r.call_id not in made:
                made[r.call_id] = self._candidates.default(r)
        # The first message a batch rewrites: earlier cache entries holding it are dead now.
        rewritten = [
            c.msg_index
            for cid, d in made.items()
            if d.kind == "trimmed" and (c := self._candidates.result(cid)) is not None
        ]
        self._tally.batch_from = min(rewritten, default=None)
        if not turn.retry and ctx.costs is not None:
            tally = self._tally
            tally.observed = banked_now(
                tally.observed, turn, made, tally.verdicts, ctx.costs.prices, self._tt
            )
        return made

    def _context(self, turn: Turn, made: dict[str, Decision]) -> PassContext:
        overflowing = self._tally.overflows > 0
        messages, k, reported = turn.messages, turn.k, turn.reported
        frozen = self._group_frozen_chars(turn.fresh)
        # The usage's counts this request prices with (no count they read changes before the
        # passes run). Without a cache no result is too small to trim as it ages.
        prices = self._prices.now(self._tally.observed)
        # Messages before ``k`` as the previous request showed them, the rest as their frozen
        # decisions show them: the same figure whether the session went on or was resumed.
        cum_out, cum_pre = self._copies.cum_out, self._history.cum_pre
        full_out = cum_out[k] + (cum_pre[-1] - cum_pre[k])
        raw = max(full_out, anchor(reported, messages, self._tally.last_n, self._history.cum_in))
        # The floor spares a cache re-write; after the provider refused the prompt there is
        # none to spare: every aged result with tokens to reclaim is a candidate then.
        eligible, reclaim = self._candidates.eligible(
            self._history.current_round(),
            overflowing=overflowing,
            retry=turn.retry,
            floored=prices.regime != "uncached" and not overflowing,
            turns=self._history.turns,
        )
        estimate = self._estimator.correct(raw, full_out, reported)
        first = eligible[0].result.msg_index if eligible else len(messages)
        # Messages from ``k`` on as their frozen decisions show them (the scan's figures).
        before_first = cum_out[first] if first < k else cum_out[k] + cum_pre[first] - cum_pre[k]
        # The cost model prices with the raw estimate (usage plus what was added): the learned
        # correction is not restored alike by a resumed session, and a price must be.
        costs = self._costs(turn, eligible, raw, prices, k=k, full_out=full_out)
        return _pass_context(
            config=self.config,
            fresh=tuple(turn.fresh),
            decided=MappingProxyType(made),
            group_frozen_chars=frozen,
            staleness=_staleness(
                eligible=eligible,
                reclaim_tokens=reclaim,
                rewrite_tokens=full_out - before_first,
                estimate_tokens=estimate,
                window=self._estimator.window(),
                now=turn.now,
                last_request_at=self._tally.last_at,
                requests_so_far=self._tally.requests,
                forced=overflowing,
                spared=partial(self._candidates.whole.spared, made),
                spills_hold=self._bodies.held,
            ),
            ref_for=ref_for,
            path_of=self._store.path_of,
            cap_scale=0.5 ** min(self._tally.overflows, 3),
            text_tokens=self._tt,
            costs=costs,
            preview_version=self._ledger.preview_version,
            earlier=self._earlier,
            same_output=partial(self._candidates.whole.same_output, history=self._history),
            orphans=partial(self._candidates.whole.orphans, history=self._history),
        )

    def _earlier(self, result: ToolResult) -> Earlier | None:
        """The latest earlier result of the same call as ``result`` (same command, or tool and
        input) decided in an earlier request with its text stored, and that text; else None."""
        key = result.call_key
        if not key:
            return None
        for cid in self._history.same_call(key, result.order):
            d = self._ledger.get(cid)
            if d is None or not d.needs_body or d.ref is None:
                continue  # never stored (kept inline), or not decided: the next earlier run
            try:
                return Earlier(d.ref, self._store.get(d.ref))
            except (BudgetError, OSError):
                return None  # not readable now: no delta, the usual preview
        return None

    def _before_tokens(self, k: int) -> Callable[[int], int]:
        """Tokens of the request before message ``i`` (as the last request showed the first
        ``k`` messages, the rest as their frozen decisions show them)."""
        cum_out, cum_pre = self._copies.cum_out, self._history.cum_pre

        def before(i: int) -> int:
            return cum_out[i] if i < k else cum_out[k] + cum_pre[i] - cum_pre[k]

        return before

    def _costs(
        self,
        turn: Turn,
        eligible: Sequence[Any],
        estimate: int,
        prices: Prices,
        *,
        k: int,
        full_out: int,
    ) -> Costs:
        """The cost model's inputs for this request, from what the session observed."""
        cfg, tally = self.config, self._tally
        before = self._before_tokens(k)
        if tally.requests == 0:
            tally.observed = replace(tally.observed, first_tokens=estimate)
        readbacks = tally.readbacks()
        # What the last request sent (its length is logged): the same figure in a resumed
        # session, whose first request reuses no message.
        cached_end = before(min(tally.last_n, len(turn.messages)))
        if not turn.retry:
            # The bank's prices are this request's: they depend on no count the bank changes.
            tally.observed = banked(
                tally,
                prices,
                hidden=max(self._history.cum_in[-1] - full_out, 0),
                estimate=estimate,
                cached_end=cached_end,
                page_tokens=cfg.read_page_chars / 4,  # the estimator's 4 characters a token
            )
        observed = tally.observed.now(
            requests=tally.requests, readbacks=readbacks, recalled=tally.recalled()
        )
        look = outlook(observed, tokens=estimate, window=self._estimator.window())
        cold = tally.last_at is not None and turn.now - tally.last_at >= prices.ttl_s
        items = self._items(eligible, prices, before, turn.now)
        # Walked when the cut search asks (the sums ``before`` reads hold until the passes ran).
        walk = prices.explicit and len(eligible) > 0
        reach = partial(lookup_reach, turn.messages, before) if walk else (lambda: 0)
        header = max(estimate - full_out, 0)
        tally.verdicts = {}
        v, kind = tally.verdicts, self._quotes.evidence
        return _made_costs(prices, look, observed, cached_end, cold, items, v, reach, header, kind)

    def _items(
        self, eligible: Sequence[Any], prices: Prices, before: Callable[[int], int], now: float
    ) -> Callable[[], list[Item]]:
        """The eligible results as the cut search sees them, made when it asks."""
        page_chars = self.config.read_page_chars
        marks = self._tally.marks

        def fallback(group: int, lengths: list[int]) -> tuple[int, bool]:
            # A trim starting at a result re-writes from the end of the last request before
            # the message that made its call, whose prompt still matches (a batch since then
            # dropped those holding what it rewrote): that entry's position, and whether it is
            # alive. With explicit breakpoints only the entry a request hits is refreshed, so
            # it lives a TTL after that request; automatic caching refreshes every prefix a
            # request shares, so any position is alive there.
            if not prices.explicit:
                return before(group), True
            i = bisect_right(lengths, group) - 1
            if i < 0:
                return 0, False
            return before(marks[i][0]), now - marks[i][1] < prices.ttl_s

        def items() -> list[Item]:
            out = []
            lengths = [m for m, _ in marks] if prices.explicit else []
            for r, reclaim, stub_tokens in eligible.facts():  # type: ignore[attr-defined]
                shown = reclaim + stub_tokens
                chars = max(len(r.text), 1)
                page = shown if chars <= page_chars else round(shown * page_chars / chars)
                at, alive = fallback(r.group, lengths)
                out.append(Item(reclaim, at, page, r.is_error, alive))
            return out

        return items

    def _group_frozen_chars(self, fresh: list[ToolResult]) -> dict[int, int]:
        """Per group of a fresh result, the characters its results decided before show."""
        fresh_ids = {r.call_id for r in fresh}
        frozen: dict[int, int] = {}
        for g in {r.group for r in fresh}:
            frozen[g] = sum(
                d.shown_chars() + r.extra_chars
                for cid, r in self._history.members(g).items()
                if cid not in fresh_ids and (d := self._ledger.get(cid)) is not None
            )
        return frozen
