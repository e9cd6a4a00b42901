"""Staleness candidates: the decided results a batch may trim, oldest round first.

A result becomes a candidate once decided (kept or spilled, over the stale floor, with tokens to
reclaim); candidates are kept in round order with cumulative reclaimable tokens, so the cutoff of
a request is one bisect. :class:`_Eligible` builds the pass's :class:`Candidate` values only when
a batch asks for them (most requests only ask how many).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import overload

from budget._config import BudgetConfig
from budget._envelope import EMPTY_TEXT
from budget._ledger import Decision, Ledger
from budget._view import ToolResult
from budget.passes import Candidate
from budget.session._turns import Turns
from budget.session._whole import Whole
from budget.tokens._memo import TextTokens

__all__ = ["Candidates"]


@dataclass(frozen=True, slots=True)
class _Cand:
    result: ToolResult
    reclaim_tokens: int
    stub_tokens: int
    """Tokens of the stub a trim would show it as."""


class _Eligible(Sequence[Candidate]):
    """This request's staleness candidates, made on access: most requests only ask how many."""

    __slots__ = ("_cands", "_decide", "_end", "_start")

    def __init__(
        self, cands: list[_Cand], start: int, end: int, decide: Callable[[ToolResult], Decision]
    ) -> None:
        self._cands, self._start, self._end, self._decide = cands, start, end, decide

    def __len__(self) -> int:
        return self._end - self._start

    def facts(self) -> list[tuple[ToolResult, int, int]]:
        """Each candidate's result, reclaimable tokens and stub tokens, without building its
        decision."""
        return [
            (c.result, c.reclaim_tokens, c.stub_tokens)
            for c in self._cands[self._start : self._end]
        ]

    @overload
    def __getitem__(self, i: int) -> Candidate: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[Candidate]: ...

    def __getitem__(self, i: int | slice) -> Candidate | Sequence[Candidate]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError("candidate index out of range")
        c = self._cands[self._start + i]
        return Candidate(c.result, self._decide(c.result), c.reclaim_tokens)


@dataclass(slots=True)
class _Pool:
    """Candidates in round order with their cumulative reclaimable tokens."""

    cands: list[_Cand] = field(default_factory=list)
    rounds: list[int] = field(default_factory=list)
    cum: list[int] = field(default_factory=lambda: [0])

    def end(self, cutoff: int) -> int:
        """The end of the candidates of rounds up to ``cutoff``."""
        return bisect_right(self.rounds, cutoff)

    def late(self, rnd: int) -> bool:
        """Whether a result of round ``rnd`` comes after a newer one (it is no candidate)."""
        return bool(self.rounds) and rnd < self.rounds[-1]

    def append(self, cand: _Cand) -> None:
        self.cands.append(cand)
        self.rounds.append(cand.result.round)
        self.cum.append(self.cum[-1] + cand.reclaim_tokens)

    def drop(self, trimmed: set[str]) -> None:
        kept = [c for c in self.cands if c.result.call_id not in trimmed]
        if len(kept) == len(self.cands):
            return
        self.cands, self.rounds = kept, [c.result.round for c in kept]
        self.cum = [0, *accumulate(c.reclaim_tokens for c in kept)]


class Candidates:
    """The session's staleness candidates, in round order with cumulative reclaimable tokens,
    and the decision a result stands under. Its state is the candidates and the start of those
    not trimmed yet; the round a request is at is given by the caller (the history knows it)."""

    def __init__(
        self,
        config: BudgetConfig,
        ledger: Ledger,
        text_tokens: TextTokens,
        floor: float,
        stub_of: Callable[[str, str], str],
    ) -> None:
        self._config, self._ledger, self._tt = config, ledger, text_tokens
        self._floor = floor
        """The stale floor in characters at the session's read price (``budget.policy.floor_at``)."""
        self._stub_of = stub_of
        """The stub a trim would show a result's text as, given its tool (its length is that of
        the real one: only the ref differs)."""
        self.reset()

    def reset(self) -> None:
        """Forget every candidate (with the history cache): the next scan finds them again."""
        self._floored = _Pool()
        """Candidates over the stale floor (at the session's read price): what a batch may
        trim where a cache is kept."""
        self._all = _Pool()
        """Every candidate with tokens to reclaim: without a cache nothing re-written is lost,
        so a result is trimmed as it ages whatever its size, when the trim pays."""
        self._cand_results: dict[str, ToolResult] = {}
        self.whole = Whole(self._ledger)
        """The results shown whole (what the duplicate pass points a repeat to)."""

    def cutoff(self, current_round: int, *, overflowing: bool, turns: Turns | None = None) -> int:
        """The newest round whose results may be trimmed: outside the protected rounds, or
        from before the user's ``protect_turns``-th last turn (``turns``)."""
        cfg = self._config
        newest = current_round - (1 if overflowing else cfg.protect_rounds)
        settled = -1 if turns is None else turns.settled(cfg.protect_turns)
        return max(newest, settled)

    def _pool(self, floored: bool) -> _Pool:
        return self._floored if floored else self._all

    def eligible(
        self,
        current_round: int,
        *,
        overflowing: bool,
        retry: bool,
        floored: bool = True,
        turns: Turns | None = None,
    ) -> tuple[_Eligible, int]:
        """This request's candidates and the tokens trimming them all would reclaim: those over
        the stale floor (``floored``, where a cache is kept), else all of them."""
        pool = self._pool(floored)
        end = pool.end(self.cutoff(current_round, overflowing=overflowing, turns=turns))
        if retry and not overflowing:
            end = 0  # nothing is trimmed anew on a retry
        return _Eligible(pool.cands, 0, end, self.current), pool.cum[end]

    def reclaimable(
        self, current_round: int, *, floored: bool = True, turns: Turns | None = None
    ) -> int:
        """Tokens a batch could reclaim now, outside an overflow (the report's figure)."""
        pool = self._pool(floored)
        return pool.cum[pool.end(self.cutoff(current_round, overflowing=False, turns=turns))]

    def drop_decided(self, made: Mapping[str, Decision]) -> None:
        """The candidates this request's decisions end: those trimmed, and those whose trim the
        store refused (frozen kept_unspillable: a resumed session reading that decision finds no
        candidate either, where this one would retry it on every request)."""
        gone = {cid for cid, d in made.items() if d.kind in ("trimmed", "kept_unspillable")}
        if gone:
            self.drop_trimmed(gone)

    def drop_trimmed(self, trimmed: set[str]) -> None:
        """A batch ran: its results are trimmed, never candidates again; those before its cut
        stay candidates (linear in the candidates not trimmed before)."""
        self._floored.drop(trimmed)
        self._all.drop(trimmed)
        self.whole.drop(trimmed)

    def result(self, call_id: str) -> ToolResult | None:
        """The candidate result of ``call_id``, if it is (or was) one."""
        return self._cand_results.get(call_id)

    def current(self, r: ToolResult) -> Decision:
        """The decision ``r`` stands under: frozen, else the one no pass touched."""
        return self._ledger.get(r.call_id) or self.default(r)

    def default(self, r: ToolResult) -> Decision:
        """The decision for a result no pass touched."""
        if not r.text and r.extra_chars == 0:
            return Decision(r.call_id, "kept", "empty", 0, text=EMPTY_TEXT, tool=r.tool)
        limit = self._config.cap_for(r.tool)
        # Over its cap yet untouched: the cap pass found its envelope would not be shorter.
        reason = "exempt" if limit is None else "fits" if len(r.text) <= limit else "not_shorter"
        return Decision(r.call_id, "kept", reason, len(r.text), tool=r.tool)

    def add(self, results: Iterable[ToolResult]) -> None:
        """Make candidates of the decided ``results`` that are not ones yet."""
        cfg = self._config
        for r in results:
            if r.call_id in self._cand_results:
                continue
            # The decision first: most results of a resumed history are trimmed already.
            d = self.current(r)
            self.whole.note(r, d)
            if d.kind not in ("kept", "spilled") or cfg.cap_for(r.tool) is None:
                continue
            # What a trim takes off is what the result shows less its stub: the stub itself,
            # made to ``stub_chars`` (longer only where its head is), not a fixed allowance.
            stub_tokens = self._tt(self._stub_of(r.text, r.tool))
            reclaim = self._tt(d.shown(r.text)) - stub_tokens
            if reclaim <= 0:
                continue
            # Out of order (a late result for an old call) in a pool: it stays as it is there.
            cand, taken = _Cand(r, reclaim, stub_tokens), False
            if d.shown_chars() > self._floor and not self._floored.late(r.round):
                self._floored.append(cand)
                taken = True
            if not self._all.late(r.round):
                self._all.append(cand)
                taken = True
            if taken:
                self._cand_results[r.call_id] = r

    def add_scanned(self, results: Iterable[ToolResult], fresh: Iterable[ToolResult]) -> None:
        """Make candidates of every result of a history scanned whole (``results``, in its
        order), as a resumed session does. A ``fresh`` result older than the newest candidate
        (decided anew: its text edited since) would be left out as a late result, and trimmed by
        a resumed session only: then the pools are made anew, in the history's order."""
        newest = self._all.rounds[-1] if self._all.rounds else -1
        if any(r.round < newest for r in fresh):
            self._floored, self._all, self._cand_results = _Pool(), _Pool(), {}
        self.add(results)

    def results_of(
        self, made: Mapping[str, Decision], new_results: list[ToolResult]
    ) -> dict[str, ToolResult]:
        """The result each decision is for: scanned by this request, or an earlier candidate."""
        by_id = {r.call_id: r for r in new_results}
        for call_id in made:
            if call_id not in by_id:  # a staleness candidate from an earlier request
                by_id[call_id] = self._cand_results[call_id]
        return by_id
