"""Read-back evidence from the results the session kept: would their previews have done?

A session that hides nothing learns nothing from read-backs, so the cost policy's chance that a
spilled result is read back would stay at its prior for as long as that prior keeps it from
spilling. Every result the cost model weighed and kept whole is evidence too: the agent saw it
all, and its answers show whether it needed more than the preview a spill would have left it.
An answer (the model's text and tool inputs, never a tool's output) *quotes* a line of a result
when it holds that line (``budget._quoting``: stripped, long enough not to match by chance, a
numbered view's line without its number). A kept result whose line is quoted and is not in the
envelope its spill would have shown counts once as *needed*. A kept result counts as *exposed*
once it leaves the protected rounds (``protect_rounds``: the rounds the agent is still working
with it), since most quotes of a result come in the answers right after it, and a result counted
before them would say the preview did before the answers that could say otherwise came. Both
counts are kept per tool (:func:`budget.policy.readback_chance`).

The index is built from the history alone (every result, in history order: a line's latest
holder may be a small result or a read-back page that showed it whole, and then no kept result
is charged), so a resumed session rebuilds the same one; a history that diverges (the caller
compacted or edited it) rebuilds it the same way. The answers looked at are those after the last
request's history (all of them when this history does not lead with it), none on a retry. The
results found needed are logged with their request record (``q``) and the counts per tool in
``k``, and restored, so a resumed session counts each one once, as the session that went on
does. Work per request: the new answers' lines, the results leaving the protected rounds, and
the last request's fresh results' lines, indexed once decided, and only while a weighed result
kept whole could still be charged (a session that spills every weighed result indexes none).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from budget._config import BudgetConfig
from budget._ledger import Ledger
from budget._quoting import MIN_QUOTE_CHARS, answer_strings, quotable, without_gutter
from budget._view import ToolResult
from budget.passes._context import spill_envelope
from budget.passes.cap import weighed
from budget.policy import Observed
from budget.session._history import History
from spill import ref_for

__all__ = ["DEFER_MAX", "MIN_QUOTE_CHARS", "Quotes", "answer_strings", "quotable"]

DEFER_MAX = 16
"""Fresh results of a request indexed at the next request (see ``Quotes._index_results``);
a request bringing more (a first request, a rebuilt history) indexes them at once."""


class Quotes:
    """The quotable lines of the history's results, the kept results found needed, and the
    evidence per tool. A session part: ``config``, ``ledger`` and ``history`` say which results
    are weighed, which are still kept whole, what a spill would show and where the rounds are.

    The counts are kept per tool: one agent's file reads may be quoted line by line in its
    edits while its test runs are read once (each tool's rate is its own; the rest of the
    session is its prior: :func:`budget.policy.readback_chance`).
    """

    def __init__(
        self,
        config: BudgetConfig,
        ledger: Ledger,
        history: History,
        needed: Iterable[str] = (),
        kinds: Mapping[str, tuple[int, int]] | None = None,
    ) -> None:
        self._config, self._ledger, self._history = config, ledger, history
        self._index: dict[int, str] = {}
        """Per hash of a stripped line, the call id of the latest result holding it (the one a
        quote is charged to; earlier holders are never asked for)."""
        self._results: dict[str, ToolResult] = {}
        """The indexed results the cost model weighs, by call id (their would-be previews)."""
        self._seen: set[str] = set()
        """Every noted result's call id (each noted once until :meth:`reset`)."""
        self._deferred: list[ToolResult] = []
        """The last request's fresh results, their lines indexed once their decisions are known
        (:meth:`_settle`), and only where a quote of them could still be charged."""
        self._pending: deque[ToolResult] = deque()
        """Weighed results still in the protected rounds, in history order."""
        self._matured: set[str] = set()
        """Weighed results that have left the protected rounds (each counted once)."""
        self._resumed = True
        """No request has looked yet: results that left the protected rounds before the last
        request were counted by the session that logged it."""
        self.needed: set[str] = set(needed)
        """Kept results an answer quoted outside their would-be preview (restored from ``q``)."""
        self.found: list[str] = []
        """The results found needed by the last :meth:`note` (logged with its request)."""
        self._kinds: dict[str, list[int]] = {t: list(c) for t, c in (kinds or {}).items()}
        """Per tool: [exposed, needed] (restored from the request records' ``k``)."""
        self._changed: set[str] = set()
        """Tools whose counts changed since the last request record (logged in its ``k``)."""

    def note(
        self,
        results: Iterable[ToolResult],
        messages: Sequence[Any],
        *,
        retry: bool,
        last: tuple[int, int | None],
    ) -> None:
        """Index the new ``results``; look for quotes in the answers after the last request's
        history (``last``: its length and fingerprint; all answers when this history does not
        lead with it, none on a retry); count the weighed results that left the protected
        rounds. Nothing is weighed without priced spills: then nothing."""
        self.found = []
        if not self._config.price_spills:
            return  # no result is weighed: keeping one whole was no choice
        self._index_results(results)
        if retry:
            return  # the request it repeats looked already
        length, fingerprint = last
        history = self._history
        lead = history.anchor_holds(len(messages), length, fingerprint)
        if self._chargeable(undecided=False):  # else no answer could be charged to a result
            self._look(messages[length if lead else 0 :])
        before = history.round_of(length) if lead and self._resumed else -1
        self._resumed = False
        self._mature(history.current_round() - self._config.protect_rounds, before)

    def _mature(self, last_round: int, counted_before: int) -> None:
        """Count the weighed results of rounds up to ``last_round`` kept whole so far as exposed,
        once each; those of rounds up to ``counted_before`` were counted when the log was written
        (a resumed session's first request). One not decided yet (it came with this request) is
        no exposure; a hidden one leaves the index's results (never charged again)."""
        pending, matured = self._pending, self._matured
        limit = counted_before - self._config.protect_rounds
        while pending and pending[0].round <= last_round:
            r = pending.popleft()
            if r.call_id in matured:
                continue
            matured.add(r.call_id)
            d = self._ledger.get(r.call_id)
            if d is not None and d.kind != "kept":
                self._results.pop(r.call_id, None)
            elif d is not None and r.round > limit:
                self._count(r.tool, 0)

    def evidence(self, tool: str) -> tuple[int, int]:
        """(exposed, needed) of ``tool``: what :func:`budget.policy.readback_chance` reads."""
        counts = self._kinds.get(tool)
        return (0, 0) if counts is None else (counts[0], counts[1])

    def pooled(self, observed: Observed) -> Observed:
        """``observed`` with the session's totals over every tool (the pooled rate's counts)."""
        exposed = needed = 0
        for e, n in self._kinds.values():
            exposed, needed = exposed + e, needed + n
        if (observed.exposed, observed.needed) == (exposed, needed):
            return observed
        return replace(observed, exposed=exposed, needed=needed)

    def record(self) -> dict[str, list[int]]:
        """The counts of the tools changed since the last call (a request record's ``k``)."""
        changed = {tool: list(self._kinds[tool]) for tool in sorted(self._changed)}
        self._changed.clear()
        return changed

    def _count(self, tool: str, which: int) -> None:
        counts = self._kinds.get(tool)
        if counts is None:
            counts = self._kinds[tool] = [0, 0]
        counts[which] += 1
        self._changed.add(tool)

    def _weighable(self, result: ToolResult) -> bool:
        """Whether the cost model weighs a fresh result like ``result`` (``passes.cap``)."""
        cfg = self._config
        return weighed(cfg, result.tool, len(result.text), cfg.cap_for(result.tool))

    def _kept_whole(self, call_id: str) -> bool:
        """Whether the result of ``call_id`` was kept whole (and still is)."""
        d = self._ledger.get(call_id)
        return d is not None and d.kind == "kept"

    def _would_show(self, result: ToolResult) -> str:
        """The envelope a spill of ``result`` would show (its preview, no file path)."""
        return spill_envelope(
            self._config,
            result.text,
            ref=ref_for(result.text),
            tool=result.tool,
            is_error=result.is_error,
            path=None,
            version=self._ledger.preview_version,
        )

    def reset(self) -> None:
        """Forget the index (the history diverged or a result was edited): the whole history,
        rescanned, rebuilds it in history order, as a resumed session builds it. The results
        found needed stay found, those counted as exposed stay counted."""
        self._index, self._results, self._seen = {}, {}, set()
        self._pending, self._deferred = deque(), []

    def _index_results(self, results: Iterable[ToolResult]) -> None:
        """Index the lines of ``results``, once each: a later holder of a line replaces an
        earlier one (a quote is charged to the latest). Every result is a holder (a later small
        result showing a line whole is where a quote of it may come from); only those the cost
        model weighs can be charged.

        A request's few fresh results are indexed at the next one, once decided (:meth:`_settle`);
        until then a quote that would be charged to an earlier holder is checked against them
        (:meth:`_held_by_deferred`). A history's results noted at once (a resume, a rebuild) are
        indexed at once."""
        known, seen, pending = self._results, self._seen, self._pending
        self._settle()
        new: list[ToolResult] = []
        for r in results:
            if r.call_id in seen:
                continue
            seen.add(r.call_id)
            if self._weighable(r):
                known[r.call_id] = r
                pending.append(r)
            new.append(r)
        decided = self._ledger.get
        if len(new) <= DEFER_MAX and all(decided(r.call_id) is None for r in new):
            self._deferred = new
        else:
            for r in new:
                self._index_lines(r)

    def _index_lines(self, r: ToolResult) -> None:
        """Index every stripped line of ``r``, short ones too: they are never looked up (answers
        are searched for quotable lines only), and leaving them in takes no Python step per line
        (splitting, stripping, hashing and the update run in C: ~25 µs of CPU for a 7 kB,
        120-line result). Keys are the lines' hashes, so the index holds no text."""
        lines = without_gutter(r.text).splitlines()
        self._index.update(dict.fromkeys(map(hash, map(str.strip, lines)), r.call_id))

    def _settle(self) -> None:
        """Index the last request's fresh results, now decided, where a quote of a line they hold
        could still be charged: when one of them, or an earlier result, is weighed and kept
        whole. Otherwise their lines are left out: the latest holder of each is one of them or a
        later result, or an earlier one that can never be charged again (hidden or found needed
        stays so until :meth:`reset`); a lookup finds an uncharged holder either way."""
        deferred, self._deferred = self._deferred, []
        if deferred and self._chargeable():
            for r in deferred:
                self._index_lines(r)

    def _chargeable(self, *, undecided: bool = True) -> bool:
        """Whether a weighed result may be charged: kept whole (or, with ``undecided``, not
        decided yet). Those that never can be again leave :attr:`_results`, oldest first, up to
        the first that may: each leaves once, so the check costs a request a few steps."""
        results, needed, kept = self._results, self.needed, self._kept_whole
        while results:
            cid = next(iter(results))
            if cid not in needed and (kept(cid) or self._ledger.get(cid) is None):
                break
            del results[cid]
        # Past the first that may: this request's fresh results (not decided), or a kept one.
        return any(cid not in needed and (kept(cid) or undecided) for cid in results)

    def _held_by_deferred(self, line: str) -> bool:
        """Whether a fresh result not indexed yet holds ``line`` (stripped, without a gutter):
        the latest holder then, not decided when its request looks, so never charged."""
        return any(
            line in r.text and line in map(str.strip, without_gutter(r.text).splitlines())
            for r in self._deferred
        )

    def _look(self, answers: Sequence[Any]) -> None:
        """Find the kept results ``answers`` quote outside their would-be preview (into
        :attr:`found`). A quote is charged to the latest result holding the line, as long as
        it is weighed and still shown whole: a hidden one's read-backs are counted as such, a
        small one showed the line whole."""
        found = self.found
        if not self._index:
            return
        index, results, needed = self._index, self._results, self.needed
        previews: dict[str, str] = {}
        for message in answers:
            for text in answer_strings(message):
                if len(text) < MIN_QUOTE_CHARS:
                    continue  # no line of it is long enough to be a quote
                for line in quotable(text):
                    cid = index.get(hash(line))
                    if cid is None or cid in needed or cid not in results:
                        continue
                    if not self._kept_whole(cid):
                        continue  # hidden (never charged again), or decided by this request
                    shown = previews.get(cid)
                    if shown is None:
                        shown = previews[cid] = without_gutter(self._would_show(results[cid]))
                    # The line itself (not another of the same hash), outside the preview.
                    if line in shown or line not in without_gutter(results[cid].text):
                        continue
                    if not self._held_by_deferred(line):
                        needed.add(cid)
                        found.append(cid)
                        self._count(results[cid].tool, 1)
