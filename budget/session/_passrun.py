"""The passes' turn: the context they read (staleness candidates, estimates) and their run.

``PIPELINE`` is a frozen ordered tuple of pure callables over one :class:`PassContext`; each
sees, through ``decided``, the decisions of the passes before it. A fresh result no pass touched
gets the default decision.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from budget._ledger import Decision
from budget._view import ToolResult
from budget.passes import PIPELINE, PassContext, Staleness
from budget.session._estimator import anchor
from budget.session._parts import Parts
from budget.session._values import Turn
from budget.tokens._usage import ProviderUsage, normalize_usage
from spill import ref_for

__all__ = ["Passes"]


class Passes:
    """The passes' turn in a request: the usage it is anchored on, the context the passes read,
    and their run over the fresh results. No state of its own: it reads the session's parts."""

    def __init__(self, parts: Parts) -> None:
        self.config = parts.config
        self._store, self._log, self._ledger = parts.store, parts.log, parts.ledger
        self._tt, self._tally, self._estimator = parts.text_tokens, parts.tally, parts.estimator
        self._history, self._copies = parts.history, parts.copies
        self._candidates = parts.candidates

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
        return u

    def decide(
        self, turn: Turn, new_results: list[ToolResult], wrapped: Mapping[str, Decision]
    ) -> dict[str, Decision]:
        """Run the passes in order: every fresh result gets a decision (a default at least)."""
        # Results decided before (an earlier process, a rebuilt history) are staleness candidates
        # now, as they would be in a session that had gone on (no-op for known candidates).
        fresh_ids = {r.call_id for r in turn.fresh}
        self._candidates.add(r for r in new_results if r.call_id not in fresh_ids)
        made: dict[str, Decision] = dict(wrapped)
        # ``decided`` is a live view: each pass sees the decisions of the passes before it.
        ctx = self._context(turn, made)
        for _name, run in PIPELINE:
            for d in run(ctx):
                made[d.call_id] = d
        for r in turn.fresh:
            if r.call_id not in made:
                made[r.call_id] = self._candidates.default(r)
        return made

    def _context(self, turn: Turn, made: dict[str, Decision]) -> PassContext:
        overflowing = self._tally.overflows > 0
        messages, k, reported = turn.messages, turn.k, turn.reported
        frozen = self._group_frozen_chars(turn.fresh)
        eligible, reclaim = self._candidates.eligible(
            self._history.current_round(), overflowing=overflowing, retry=turn.retry
        )
        # Messages before ``k`` as the previous request showed them, the rest as their frozen
        # decisions show them: the same figure whether the session went on or was resumed.
        cum_out, cum_pre = self._copies.cum_out, self._history.cum_pre
        full_out = cum_out[k] + (cum_pre[-1] - cum_pre[k])
        raw = max(full_out, anchor(reported, messages, self._tally.last_n, self._history.cum_in))
        estimate = self._estimator.correct(raw, full_out, reported)
        first = eligible[0].result.msg_index if eligible else len(messages)
        # Messages from ``k`` on as their frozen decisions show them (the scan's figures).
        before_first = cum_out[first] if first < k else cum_out[k] + cum_pre[first] - cum_pre[k]
        return PassContext(
            config=self.config,
            fresh=tuple(turn.fresh),
            decided=MappingProxyType(made),
            group_frozen_chars=frozen,
            staleness=Staleness(
                eligible=eligible,
                reclaim_tokens=reclaim,
                rewrite_tokens=full_out - before_first,
                estimate_tokens=estimate,
                window=self._estimator.window(),
                now=turn.now,
                last_request_at=self._tally.last_at,
                requests_so_far=self._tally.requests,
                forced=overflowing,
            ),
            ref_for=ref_for,
            path_of=self._store.path_of,
            cap_scale=0.5 ** min(self._tally.overflows, 3),
            text_tokens=self._tt,
        )

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
