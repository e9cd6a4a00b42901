"""The request copy: the messages a request sends, made from the caller's and the decisions.

A message no decision touches is the caller's own object; one whose results are shown otherwise
is a new message (the format's ``rewrite``). The copy is a new list each request (the caller
owns it; earlier copies never change). ``cache_control`` markers the caller moves in place are
followed (:meth:`RequestCopy._sync_markers`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from budget._ledger import Decision
from budget._markers import Markers, markers
from budget._report import DecisionReport
from budget._view import ToolResult
from budget.session._history import BULK, RESCAN, HistoryCache, call_of

__all__ = ["RequestCopy"]

_MARK_WINDOW = 8
"""Trailing messages whose ``cache_control`` markers are compared on every request, in the
caller's history and in the copies handed out: where agents add markers in place (the reference
loop marks the last three user turns and unmarks the fourth, at most 7 messages back)."""

_NO_MARKS: tuple[Markers, Markers] = ((), ())


class RequestCopy(HistoryCache):
    """Freezes a request's decisions and makes the request-copy messages they change."""

    def _apply(
        self,
        messages: list[Any],
        k: int,
        made: dict[str, Decision],
        by_id: Mapping[str, ToolResult],
    ) -> list[DecisionReport]:
        """Freeze the decisions and build the request-copy messages they change."""
        reports, touched_old = self._freeze(k, made, by_id)
        if any(d.kind == "trimmed" for d in made.values()):
            self._candidates.trimmed_upto_cutoff(
                self._current_round(), overflowing=self._tally.overflows > 0
            )
        for i in sorted(touched_old):
            self._outputs[i] = self._render(messages[i], self._msgs[i].results)
            self._note_markers(i, messages[i])
        counted = self._copy_from(messages, k, made)
        self._count_out(messages, min(touched_old) if touched_old else k, counted)
        self._candidates.add(r for r in by_id.values() if r.msg_index >= k)
        return reports

    def _freeze(
        self, k: int, made: dict[str, Decision], by_id: Mapping[str, ToolResult]
    ) -> tuple[list[DecisionReport], set[int]]:
        """Record the decisions (and the totals they change): (their reports, the messages
        before ``k`` they touch)."""
        reports = []
        touched_old: set[int] = set()
        for call_id, d in made.items():
            r = by_id[call_id]
            prev = self._ledger.get(call_id)
            if r.msg_index < k and prev is not None:
                self._totals.add(prev, len(r.text), -1)
                self._totals.add(d, len(r.text), +1)
                touched_old.add(r.msg_index)
            self._ledger.record(d)
            reports.append(
                DecisionReport(
                    call_id=call_of(call_id),
                    kind=d.kind,
                    reason=d.reason,
                    ref=d.ref,
                    tool=d.tool,
                    chars_before=len(r.text),
                    chars_after=d.shown_chars(),
                )
            )
            self._log.debug(
                "toolbudget.session.decision",
                call_id=call_id,
                kind=d.kind,
                reason=d.reason,
                ref=d.ref,
                chars_before=len(r.text),
                chars_after=d.shown_chars(),
            )
        return reports, touched_old

    def _copy_from(self, messages: list[Any], k: int, made: dict[str, Decision]) -> dict[int, int]:
        """Make the copies of the messages from ``k``: the tokens of those shown as the scan
        counted them, by message."""
        shown, self._shown_now = self._shown_now, {}
        counted: dict[int, int] = {}
        # Bound once: after a resume this loop runs for every message of a long history.
        outputs, msgs, decided, add = self._outputs, self._msgs, self._ledger.get, self._totals.add
        marked_before = len(messages) - RESCAN  # the last ones are scanned again next time
        for i in range(k, len(messages)):
            m = msgs[i]
            results = m.results
            if not results:
                message = messages[i]
                out = message if type(message) is dict else self._render(message, results)
            else:
                ready = shown.get(i)
                if ready is not None and not (made and any(r.call_id in made for r in results)):
                    # Shown as the scan rewrote it: no decision of this request touches it.
                    out = ready[0]
                    counted[i] = ready[1]
                else:
                    out = self._render(messages[i], results)
                for r in results:
                    frozen = decided(r.call_id)
                    if frozen is not None:
                        add(frozen, len(r.text), +1)
            outputs.append(out)
            if out is not messages[i] and i < marked_before:
                self._note_markers(i, messages[i])
        return counted

    def _count_out(self, messages: list[Any], first: int, counted: dict[int, int]) -> None:
        """The tokens of the copies from ``first`` on, and their running sums."""
        self._bulk = len(messages) - first > BULK
        del self._cum_out[first + 1 :]
        for i in range(first, len(messages)):
            m = self._msgs[i]
            out = self._outputs[i]
            if out is messages[i]:
                m.tokens_out = m.tokens_in
            else:
                tokens = counted.get(i)
                if tokens is None:
                    tokens = self._estimate(out)
                m.tokens_out = tokens
            self._cum_out.append(self._cum_out[-1] + m.tokens_out)

    def _as_sent(self, view: list[Any]) -> list[Any]:
        """``view`` with each leading message the last request sent as it sent it (its results
        shown as decided), the rest as they are: what a compaction summarizes."""
        inputs, outputs = self._inputs, self._outputs
        k, n = 0, min(len(inputs), len(outputs), len(view))
        while k < n and view[k] is inputs[k]:
            k += 1
        return [*outputs[:k], *view[k:]]

    def _render(self, message: Any, results: Sequence[ToolResult]) -> Any:
        texts = {}
        for r in results:
            d = self._ledger.get(r.call_id)
            if d is not None and d.text is not None:
                texts[r.slot] = d.text
        if texts:
            return self._format.rewrite(message, texts)
        if type(message) is dict:
            return message
        return self._format.outgoing(message)

    def _note_markers(self, i: int, message: Any) -> None:
        """Remember the markers of message ``i`` and of its copy, as the copy is made."""
        out = self._outputs[i]
        seen = _NO_MARKS if out is message else (markers(message), markers(out))
        if seen[0] or seen[1]:
            self._marks[i] = seen
        else:
            self._marks.pop(i, None)

    def _sync_markers(self, messages: list[Any], k: int) -> None:
        """Make again the copies of earlier messages whose markers changed in place since.

        The caller may have moved a marker in its message (the copy kept the old ones) or in the
        copy it was given (which later copies would show): either way the copy made again shows
        the caller's markers of now. Checked: every message that had a marker (a marker removed
        or changed anywhere is seen) and the last ``_MARK_WINDOW`` messages (where markers are
        added); messages from ``k`` on were made again by this request.
        """
        start = max(len(messages) - _MARK_WINDOW, 0)
        outputs = self._outputs
        check = [i for i in range(start, k) if outputs[i] is not messages[i]]
        if self._marks:
            check += [i for i in self._marks if i < start]
        for i in check:
            message, out = messages[i], outputs[i]
            if out is message:
                continue  # the caller's own object: its markers are the caller's
            if (markers(message), markers(out)) != self._marks.get(i, _NO_MARKS):
                self._outputs[i] = self._render(message, self._msgs[i].results)
                self._note_markers(i, message)
