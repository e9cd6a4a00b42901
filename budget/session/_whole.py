"""Results shown whole: what a fresh result repeating one of them points to (the duplicate pass).

A result decided ``kept`` with its text unchanged is in every later copy as the model read it,
until a batch trims it or the caller edits or drops it. Indexed by text and by result key, so a
fresh result finds the earlier one it repeats (the same text from any call) or re-runs (the
latest whole run of the same call, ``ToolResult.call_key``) without a walk of the history.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from typing import Protocol

from budget._envelope import pointer_target
from budget._ledger import Decision, Ledger
from budget._view import Call, ToolResult
from budget.passes.duplicate import POINTERS
from budget.session._keys import call_of

__all__ = ["History", "Whole"]


class History(Protocol):
    """The history as :meth:`Whole.same_output` reads it."""

    def __len__(self) -> int: ...

    def results(self, i: int) -> tuple[ToolResult, ...]: ...

    def same_call(self, key: str, before: int) -> Iterator[str]: ...

    def calls(self, i: int) -> tuple[Call, ...]: ...


class Whole:
    """The results shown whole, by text (each holder, by result key) and by result key."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self._by_text: dict[str, dict[str, ToolResult]] = {}
        """Per text, every result shown whole holding it: a batch trimming the latest may leave
        an earlier one whole, as a resumed session, which notes only those, finds it."""
        self._by_key: dict[str, ToolResult] = {}
        self._rescanned: dict[str, ToolResult] | None = {}
        """The pointers noted since this index was made (a session's first request, or one
        after the history was rebuilt), until :meth:`orphans` asks; None once it has."""
        self._pointed: dict[str, str] = {}
        """Per fresh result of the request under way, the result key of the output it repeats."""

    def note(self, result: ToolResult, decision: Decision) -> None:
        """Index ``result`` if ``decision`` shows it whole (or keep it to check, if a pointer)."""
        if decision.reason in POINTERS and decision.kind == "spilled":
            if self._rescanned is not None:
                self._rescanned[result.call_id] = result  # noted again by a re-pooling
            return
        if decision.kind != "kept" or decision.text is not None or not result.text:
            return
        if result.extra_chars:
            return  # its images are no text: a result equal in text only is not the same
        self._by_key[result.call_id] = result
        self._by_text.setdefault(result.text, {})[result.call_id] = result

    def drop(self, trimmed: Collection[str]) -> None:
        """Forget the results of ``trimmed`` (result keys): a batch trimmed them."""
        for key in trimmed:
            gone = self._by_key.pop(key, None)
            if gone is None:
                continue
            holders = self._by_text.get(gone.text, {})
            holders.pop(key, None)
            if not holders:
                self._by_text.pop(gone.text, None)

    def same_output(self, result: ToolResult, history: History) -> tuple[str, str] | None:
        """(call id, text) of the earlier result ``result`` repeats (the same text) or, failing
        that, re-runs (the latest run of the same call shown whole), decided in an earlier
        request, still shown whole in ``history`` and the only call of its id before ``result``'s;
        else None."""
        holders = self._by_text.get(result.text, {})
        for exact in sorted(holders.values(), key=lambda r: r.order, reverse=True):
            if self._shown(exact, result, history):
                self._pointed[result.call_id] = exact.call_id
                return call_of(exact.call_id), exact.text
        if not result.call_key:
            return None
        for key in history.same_call(result.call_key, result.order):
            run = self._by_key.get(key)
            if run is not None and self._shown(run, result, history):
                self._pointed[result.call_id] = key
                return call_of(key), run.text
        return None

    def orphans(self, history: History) -> list[tuple[ToolResult, Decision]]:
        """The pointers of a history just rebuilt whose call is gone from it (the caller dropped
        or rewrote the earlier messages: compacted its own history), with their decisions.

        Asked once per index: only a rebuilt history (a new index) can have lost an output a
        pointer names; a history that grows keeps every call it had."""
        todo, self._rescanned = list((self._rescanned or {}).values()), None
        if not todo:
            return []
        calls = {c.call_id for i in range(len(history)) for c in history.calls(i)}
        out = []
        for r in todo:
            d = self._ledger.get(r.call_id)
            target = pointer_target(d.text) if d is not None and d.text is not None else None
            if d is not None and target is not None and target not in calls:
                out.append((r, d))
        return out

    def begin(self) -> None:
        """A new request: the pointers of the last one named their outputs for it alone."""
        self._pointed = {}

    def spared(self, made: Mapping[str, Decision]) -> frozenset[str]:
        """The result keys of the outputs this request's pointers (in ``made``) name: trimmed by
        the same request, a pointer would name an output no copy shows, so no batch of this
        request trims them (the cut search leaves them out). They stay candidates."""
        return frozenset(
            target
            for cid, target in self._pointed.items()
            if (d := made.get(cid)) is not None and d.reason in POINTERS
        )

    def _shown(self, earlier: ToolResult, result: ToolResult, history: History) -> bool:
        """Whether ``earlier`` comes before ``result``, ``history`` still shows it whole and its
        call id names no other call before ``result``'s."""
        if earlier.order >= result.order or earlier.msg_index >= len(history):
            return False
        d = self._ledger.get(earlier.call_id)
        if d is None or d.kind != "kept" or d.text is not None:
            return False
        # The caller may have edited or dropped it since (its decision is then a new one).
        if earlier not in history.results(earlier.msg_index):
            return False
        # "The output of call X earlier" must name one call: where servers reuse ids (every
        # turn's call call_0), the model would take the latest call X, whose output may be
        # another one. The fresh result's own call may share the id: it is not earlier.
        named = call_of(earlier.call_id)
        if earlier.call_id != named:
            return False  # not the first result answering its id: an earlier call has the id
        own = call_of(result.call_id) == named
        calls = range(earlier.group, min(result.msg_index, len(history)))
        return sum(c.call_id == named for i in calls for c in history.calls(i)) - own == 1
