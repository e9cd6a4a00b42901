"""The request copy: the messages a request sends, made from the caller's and the decisions.

A message no decision touches is the caller's own object; one whose results are shown otherwise
is a new message (the format's ``rewrite``). The copy is a new list each request (the caller
owns it; earlier copies never change). ``cache_control`` markers the caller moves in place are
followed (:meth:`Copies.sync_markers`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from budget._ledger import Decision, Ledger
from budget._log import Events
from budget._markers import Markers, markers
from budget._report import DecisionReport
from budget._view import Format, ToolResult
from budget.passes.staleness import BATCH
from budget.policy import Verdict
from budget.session._candidates import Candidates
from budget.session._history import BULK, RESCAN, History
from budget.session._keys import call_of

__all__ = ["Copies"]

_MARK_WINDOW = 8
"""Trailing messages whose ``cache_control`` markers are compared on every request, in the
caller's history and in the copies handed out: where agents add markers in place (the reference
loop marks the last three user turns and unmarks the fourth, at most 7 messages back)."""

_NO_MARKS: tuple[Markers, Markers] = ((), ())


@dataclass(slots=True)
class _Totals:
    results: int = 0
    chars_before: int = 0
    chars_after: int = 0
    kept: int = 0
    spilled: int = 0
    trimmed: int = 0
    unspillable: int = 0

    def add(self, d: Decision, original_chars: int, sign: int) -> None:
        self.results += sign
        self.chars_before += sign * original_chars
        self.chars_after += sign * d.shown_chars()
        if d.kind == "kept":
            self.kept += sign
        elif d.kind == "spilled":
            self.spilled += sign
        elif d.kind == "trimmed":
            self.trimmed += sign
        else:
            self.unspillable += sign


class Copies:
    """The request copy of the last history: per message the copy sent, its tokens' running
    sums, the ``cache_control`` markers it was made with, and the totals of the decisions shown.

    It freezes a request's decisions (in the ledger) and makes the copies they change; the
    scans it makes them from are the :class:`History`'s.
    """

    def __init__(
        self, ledger: Ledger, log: Events, history: History, candidates: Candidates
    ) -> None:
        self._ledger, self._log = ledger, log
        self._history, self._candidates = history, candidates
        self.reset()

    def reset(self) -> None:
        """Forget the copies (not the decisions), with the history cache."""
        self.outputs: list[Any] = []
        """The copy of each message of the history, as the last request handed it out."""
        self.cum_out: list[int] = [0]
        """Running sums of the copies' tokens (``cum_out[i]``: the first ``i``)."""
        self.totals = _Totals()
        self._marks: dict[int, tuple[Markers, Markers]] = {}
        """Per rewritten message that carried ``cache_control`` markers when its copy was made
        (in the caller's message or in the copy): both, as :func:`budget._markers.markers` lists
        them. Checked on every request, so a marker removed or changed anywhere is seen."""

    def truncate(self, k: int) -> None:
        """Forget the copies from message ``k`` on (before the history forgets their scans)."""
        history, decided = self._history, self._ledger.get
        for i in range(len(history) - 1, k - 1, -1):
            for r in history.results(i):
                d = decided(r.call_id)
                if d is not None:
                    self.totals.add(d, len(r.text), -1)
        del self.outputs[k:], self.cum_out[k + 1 :]
        if self._marks:
            for i in [i for i in self._marks if i >= k]:
                del self._marks[i]

    def apply(
        self,
        messages: list[Any],
        k: int,
        made: dict[str, Decision],
        by_id: Mapping[str, ToolResult],
        fmt: Format,
        *,
        overflowing: bool,
        verdicts: Mapping[str, Verdict] | None = None,
    ) -> list[DecisionReport]:
        """Freeze the decisions and build the request-copy messages they change (``verdicts``:
        the priced options behind them, for the reports)."""
        reports, touched_old = self._freeze(k, made, by_id, verdicts or {})
        self._candidates.drop_decided(made)
        for i in sorted(touched_old):
            self.outputs[i] = self._render(messages[i], self._history.results(i), fmt)
            self._note_markers(i, messages[i])
        counted = self._copy_from(messages, k, made, fmt)
        self._count_out(messages, k, touched_old, counted)
        return reports

    def reuse(self, messages: list[Any], start: int, end: int) -> None:
        """Keep the copies of messages ``start`` to ``end`` as the last request made them (their
        messages and they are unchanged): their markers noted as copies made again would be."""
        for i in range(start, end):
            self._marks.pop(i, None)
            if self.outputs[i] is not messages[i] and i < len(messages) - RESCAN:
                self._note_markers(i, messages[i])

    def _freeze(
        self,
        k: int,
        made: dict[str, Decision],
        by_id: Mapping[str, ToolResult],
        verdicts: Mapping[str, Verdict],
    ) -> tuple[list[DecisionReport], set[int]]:
        """Record the decisions (and the totals they change): (their reports, the messages
        before ``k`` they touch)."""
        reports = []
        touched_old: set[int] = set()
        # The event's fields are made only where it goes out (one event per decision).
        events = self._log.emits("toolbudget.session.decision")
        for call_id, d in made.items():
            r = by_id[call_id]
            prev = self._ledger.get(call_id)
            if r.msg_index < k and prev is not None:
                self.totals.add(prev, len(r.text), -1)
                self.totals.add(d, len(r.text), +1)
                touched_old.add(r.msg_index)
            self._ledger.record(d)
            # The priced options behind the decision, where a price decided it (not a cap, a
            # group's budget, an overflow or the window's hard limit).
            priced = d.kind == "kept" or d.reason == "pays" or d.kind == "trimmed"
            cost = verdicts.get(BATCH if d.kind == "trimmed" else call_id) if priced else None
            reports.append(
                DecisionReport(
                    call_id=call_of(call_id),
                    kind=d.kind,
                    reason=d.reason,
                    ref=d.ref,
                    tool=d.tool,
                    chars_before=len(r.text),
                    chars_after=d.shown_chars(),
                    cost=cost,
                )
            )
            if not events:
                continue
            self._log.debug(
                "toolbudget.session.decision",
                call_id=call_id,
                kind=d.kind,
                reason=d.reason,
                ref=d.ref,
                chars_before=len(r.text),
                chars_after=d.shown_chars(),
                **(cost.event_fields() if cost is not None else {}),
            )
        return reports, touched_old

    def _copy_from(
        self, messages: list[Any], k: int, made: dict[str, Decision], fmt: Format
    ) -> dict[int, int]:
        """Make the copies of the messages from ``k``: the tokens of those shown as the scan
        counted them, by message."""
        shown = self._history.take_shown()
        counted: dict[int, int] = {}
        # Bound once: after a resume this loop runs for every message of a long history.
        outputs, results_of = self.outputs, self._history.results
        decided, add = self._ledger.get, self.totals.add
        marked_before = len(messages) - RESCAN  # the last ones are scanned again next time
        for i in range(k, len(messages)):
            results = results_of(i)
            if not results:
                message = messages[i]
                out = message if type(message) is dict else self._render(message, results, fmt)
            else:
                ready = shown.get(i)
                if ready is not None and not (made and any(r.call_id in made for r in results)):
                    # Shown as the scan rewrote it: no decision of this request touches it.
                    out = ready[0]
                    counted[i] = ready[1]
                else:
                    out = self._render(messages[i], results, fmt)
                for r in results:
                    frozen = decided(r.call_id)
                    if frozen is not None:
                        add(frozen, len(r.text), +1)
            outputs.append(out)
            if out is not messages[i] and i < marked_before:
                self._note_markers(i, messages[i])
        return counted

    def _count_out(
        self, messages: list[Any], k: int, touched: set[int], counted: dict[int, int]
    ) -> None:
        """The tokens of the copies this request made, and their running sums: a copy before
        ``k`` made again shifts the sums after it by its change (the others keep the tokens the
        last request counted: markers are never counted)."""
        history, cum_out, outputs = self._history, self.cum_out, self.outputs
        bulk = len(messages) - min(touched, default=k) > BULK

        def count(i: int) -> int:
            out = outputs[i]
            if out is messages[i]:
                return history.tokens_in(i)
            got = counted.get(i)
            return history.estimate(out, bulk=bulk) if got is None else got

        made = sorted(touched)
        for j, i in enumerate(made):
            shift = cum_out[i] + count(i) - cum_out[i + 1]  # the sums up to i are shifted already
            end = made[j + 1] if j + 1 < len(made) else k
            cum_out[i + 1 : end + 1] = [c + shift for c in cum_out[i + 1 : end + 1]]
        for i in range(k, len(messages)):
            cum_out.append(cum_out[-1] + count(i))

    def shown(self, end: int) -> Iterator[tuple[Any, int]]:
        """The copies among the first ``end`` that differ from the caller's message, with their
        tokens (for the saved estimates)."""
        inputs, outputs, cum = self._history.inputs, self.outputs, self.cum_out
        # A copy's markers may have been made again since it was counted (sync_markers):
        # cache_control is never counted, so its tokens are still the copy's.
        return (
            (outputs[i], cum[i + 1] - cum[i]) for i in range(end) if outputs[i] is not inputs[i]
        )

    def as_sent(self, view: list[Any]) -> list[Any]:
        """``view`` with each leading message the last request sent as it sent it (its results
        shown as decided), the rest as they are: what a compaction summarizes."""
        inputs, outputs = self._history.inputs, self.outputs
        k, n = 0, min(len(inputs), len(outputs), len(view))
        # By value too: the history keeps the objects it scanned first, and a caller that
        # rebuilds its messages every turn (from JSON, say) passes equal ones, sent as decided.
        while k < n and (view[k] is inputs[k] or view[k] == inputs[k]):
            k += 1
        return [*outputs[:k], *view[k:]]

    def _render(self, message: Any, results: Sequence[ToolResult], fmt: Format) -> Any:
        texts = {}
        for r in results:
            d = self._ledger.get(r.call_id)
            if d is not None and d.text is not None:
                texts[r.slot] = d.text
        if texts:
            return fmt.rewrite(message, texts)
        if type(message) is dict:
            return message
        return fmt.outgoing(message)

    def _note_markers(self, i: int, message: Any) -> None:
        """Remember the markers of message ``i`` and of its copy, as the copy is made."""
        out = self.outputs[i]
        seen = _NO_MARKS if out is message else (markers(message), markers(out))
        if seen[0] or seen[1]:
            self._marks[i] = seen
        else:
            self._marks.pop(i, None)

    def sync_markers(self, messages: list[Any], k: int, fmt: Format) -> None:
        """Make again the copies of earlier messages whose markers changed in place since.

        The caller may have moved a marker in its message (the copy kept the old ones) or in the
        copy it was given (which later copies would show): either way the copy made again shows
        the caller's markers of now. Checked: every message that had a marker (a marker removed
        or changed anywhere is seen) and the last ``_MARK_WINDOW`` messages (where markers are
        added); messages from ``k`` on were made again by this request.
        """
        start = max(len(messages) - _MARK_WINDOW, 0)
        outputs = self.outputs
        check = [i for i in range(start, k) if outputs[i] is not messages[i]]
        if self._marks:
            check += [i for i in self._marks if i < start]
        for i in check:
            message, out = messages[i], outputs[i]
            if out is message:
                continue  # the caller's own object: its markers are the caller's
            if (markers(message), markers(out)) != self._marks.get(i, _NO_MARKS):
                outputs[i] = self._render(message, self._history.results(i), fmt)
                self._note_markers(i, message)
