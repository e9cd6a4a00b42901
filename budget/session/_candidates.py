"""Staleness candidates: the decided results a batch may trim, oldest round first.

A result becomes a candidate once decided (kept or spilled, over the stale floor, with tokens to
reclaim); candidates are kept in round order with cumulative reclaimable tokens, so the cutoff of
a request is one bisect. :class:`_Eligible` builds the pass's :class:`Candidate` values only when
a batch asks for them (most requests only ask how many).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import overload

from budget._envelope import EMPTY_TEXT
from budget._ledger import Decision
from budget._view import ToolResult
from budget.passes import Candidate
from budget.session._journal import Journal
from budget.tokens._memo import TextTokens

__all__ = ["StalenessCandidates"]


@dataclass(frozen=True, slots=True)
class _Cand:
    result: ToolResult
    reclaim_tokens: int


class _Eligible(Sequence[Candidate]):
    """This request's staleness candidates, made on access: most requests only ask how many."""

    __slots__ = ("_cands", "_decide", "_end", "_start")

    def __init__(
        self, cands: list[_Cand], start: int, end: int, decide: Callable[[ToolResult], Decision]
    ) -> None:
        self._cands, self._start, self._end, self._decide = cands, start, end, decide

    def __len__(self) -> int:
        return self._end - self._start

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


class StalenessCandidates(Journal):
    """The session's staleness candidates and the decision a result stands under."""

    _tt: TextTokens
    _cands: list[_Cand]
    _cand_rounds: list[int]
    _cand_cum: list[int]
    _cand_results: dict[str, ToolResult]
    _cand_start: int

    def _current_round(self) -> int:
        """The round of the last message of the history scanned (-1 before any)."""
        raise NotImplementedError  # the history cache knows it

    def _cutoff(self, *, overflowing: bool) -> int:
        """The newest round whose results may be trimmed."""
        protect = 1 if overflowing else self.config.protect_rounds
        return self._current_round() - protect

    def _eligible_end(self, *, overflowing: bool) -> int:
        """The end of the candidates a batch may trim now (the start is ``_cand_start``)."""
        end = bisect_right(self._cand_rounds, self._cutoff(overflowing=overflowing))
        return max(end, self._cand_start)

    def _eligible(self, *, overflowing: bool, retry: bool) -> tuple[_Eligible, int]:
        """This request's candidates and the tokens trimming them all would reclaim."""
        end = self._eligible_end(overflowing=overflowing)
        if retry and not overflowing:
            end = self._cand_start  # nothing is trimmed anew on a retry
        eligible = _Eligible(self._cands, self._cand_start, end, self._current)
        return eligible, self._cand_cum[end] - self._cand_cum[self._cand_start]

    def _reclaimable(self) -> int:
        """Tokens a batch could reclaim now, outside an overflow (the report's figure)."""
        end = self._eligible_end(overflowing=False)
        return self._cand_cum[end] - self._cand_cum[self._cand_start]

    def _trimmed_upto_cutoff(self) -> None:
        """A batch ran: the candidates up to this request's cutoff are trimmed, never again."""
        end = bisect_right(self._cand_rounds, self._cutoff(overflowing=self._overflows > 0))
        self._cand_start = max(self._cand_start, end)

    def _current(self, r: ToolResult) -> Decision:
        """The decision ``r`` stands under: frozen, else the one no pass touched."""
        return self._ledger.get(r.call_id) or self._default(r)

    def _default(self, r: ToolResult) -> Decision:
        """The decision for a result no pass touched."""
        if not r.text and r.extra_chars == 0:
            return Decision(r.call_id, "kept", "empty", 0, text=EMPTY_TEXT, tool=r.tool)
        reason = "exempt" if self.config.cap_for(r.tool) is None else "fits"
        return Decision(r.call_id, "kept", reason, len(r.text), tool=r.tool)

    def _add_candidates(self, results: Iterable[ToolResult]) -> None:
        cfg = self.config
        stub_tokens = (cfg.stub_chars + 150) // 4
        for r in results:
            if r.call_id in self._cand_results:
                continue
            # The decision first: most results of a resumed history are trimmed already.
            d = self._current(r)
            if d.kind not in ("kept", "spilled") or cfg.cap_for(r.tool) is None:
                continue
            if d.shown_chars() <= cfg.stale_floor:
                continue
            reclaim = self._tt(d.shown(r.text)) - stub_tokens
            if reclaim <= 0:
                continue
            if self._cand_rounds and r.round < self._cand_rounds[-1]:
                continue  # out of order (a late result for an old call): stays as it is
            self._cand_results[r.call_id] = r
            self._cands.append(_Cand(r, reclaim))
            self._cand_rounds.append(r.round)
            self._cand_cum.append(self._cand_cum[-1] + reclaim)

    def _results_of(
        self, made: Mapping[str, Decision], new_results: list[ToolResult]
    ) -> dict[str, ToolResult]:
        """The result each decision is for: scanned by this request, or an earlier candidate."""
        by_id = {r.call_id: r for r in new_results}
        for call_id in made:
            if call_id not in by_id:  # a staleness candidate from an earlier request
                by_id[call_id] = self._cand_results[call_id]
        return by_id
