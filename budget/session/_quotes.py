"""Read-back evidence from the results the session kept: would their previews have done?

A session that hides nothing learns nothing from read-backs, so the cost policy's chance that a
spilled result is read back would stay at its prior for as long as that prior keeps it from
spilling. Every result the cost model weighed and kept whole is evidence too: the agent saw it
all, and its answers show whether it needed more than the preview a spill would have left it.
An answer (the model's text and tool inputs, never a tool's output) *quotes* a line of a result
when it holds that line (``budget._quoting``: stripped, long enough not to match by chance, a
numbered view's line without its number). A kept result whose line is quoted and is not in the
envelope its spill would have shown counts once as *needed*; each answer (the model's messages
between two others': Responses' message and function calls of one turn are one) that quotes a
needed result outside that envelope with a line no earlier answer quoted from it counts one
*episode* (a read-back a spill would have cost: an agent editing a file it read quotes it answer
after answer, a part at a time). A kept result counts as *exposed* once it leaves the protected
rounds (``protect_rounds``: the rounds the agent still works with it: most quotes come right
after a result, and counted before them it would say the preview did before the answers that
could say otherwise came). The counts are kept per tool (:func:`budget.policy.readback_chance`).

The index (:mod:`budget.session._lineindex`) is built from the history alone, in history order
(a line's latest holder may be a small result or a read-back page that showed it whole: then no
kept result is charged), so a resumed or diverged session rebuilds the same one. The answers
looked at are those after the last
request's history (all of them when this history does not lead with it), none on a retry. The
results found needed are logged with their request record (``q``), the lines each answer newly
quoted from them in ``e`` (their 64-bit xxh3 hashes: no text) and the counts per tool in ``k``
(a request that failed before its record was logged leaves them to the next record), and
restored, so a resumed session counts each one once, as the session that went on does. Work per
request: the new answers' lines, the results leaving the protected rounds, the last request's
fresh results' lines (none in a session that spills every weighed result).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable, Sequence
from dataclasses import replace
from itertools import chain
from typing import Any

import xxhash

from budget._config import BudgetConfig
from budget._ledger import Ledger
from budget._quoting import MIN_QUOTE_CHARS, answer_strings, quotable, without_gutter
from budget._view import ToolResult
from budget.passes._context import spill_envelope
from budget.passes.cap import weighed
from budget.policy import Observed
from budget.session._history import History
from budget.session._lineindex import LineIndex
from budget.session._records import KeptEvidence
from spill import ref_for

__all__ = ["MIN_QUOTE_CHARS", "Quotes", "answer_strings", "quotable"]


class Quotes:
    """The quotable lines of the history's results, the kept results found needed, and the
    evidence per tool (one agent's file reads may be quoted in its edits, its test runs read
    once). A session part: ``config``, ``ledger`` and ``history`` say which results are weighed,
    which are still kept whole, what a spill would show and where the rounds are."""

    def __init__(
        self,
        config: BudgetConfig,
        ledger: Ledger,
        history: History,
        evidence: KeptEvidence | None = None,
    ) -> None:
        self._config, self._ledger, self._history = config, ledger, history
        evidence = evidence or KeptEvidence()
        self._index = LineIndex()
        """Which result holds a quoted line (the latest: the one a quote is charged to)."""
        self._results: dict[str, ToolResult] = {}
        """The indexed results the cost model weighs, by call id (their would-be previews)."""
        self._seen: set[str] = set()
        """Every noted result's call id (each noted once until :meth:`reset`)."""
        self._pending: deque[ToolResult] = deque()
        """Weighed results still in the protected rounds, in history order."""
        self._matured: set[str] = set(evidence.exposed)
        """Weighed results that left the protected rounds (each counted once; restored: ``w``)."""
        self.exposed_found: list[str] = []
        """The results counted as exposed since the last request record (its ``w``)."""
        self._resumed = True
        """No request has looked yet: results that left the protected rounds before the last
        request were counted by the session that logged it."""
        self.needed: set[str] = set(evidence.needed)
        """Kept results an answer quoted outside their would-be preview (restored from ``q``)."""
        self.found: list[str] = []
        """The results found needed since the last request record (its ``q``: :meth:`record`)."""
        self._kinds: dict[str, list[int]] = {t: list(c) for t, c in evidence.kinds.items()}
        """Per tool: [exposed, needed, episodes] (restored from the request records' ``k``)."""
        self._quoted: dict[str, set[int]] = {c: set(h) for c, h in evidence.quoted.items()}
        """Per needed result, the hashes of its lines answers quoted outside its would-be
        preview (restored from ``e``): a line quoted again is no new read-back."""
        self.lines_found: dict[str, list[int]] = {}
        """The lines found newly quoted since the last request record, per result (its ``e``)."""
        self._changed: set[str] = set()
        """Tools whose counts changed since the last request record (logged in its ``k``)."""

    def note(
        self,
        results: Iterable[ToolResult],
        messages: Sequence[Any],
        *,
        retry: bool,
        last: tuple[int, int | None],
        fresh: Collection[str] = (),
    ) -> None:
        """Index the new ``results``; look for quotes in the answers after the last request's
        history (``last``: its length and fingerprint; all answers when this history does not
        lead with it, none on a retry), none charged to the results this request decides
        (``fresh``: new, or edited since their decision); count the weighed results that left
        the protected rounds. Nothing is weighed without priced spills: then nothing."""
        if not self._config.price_spills:
            return  # no result is weighed: keeping one whole was no choice
        self._index_results(results)
        if retry:
            return  # the request it repeats looked already
        (length, fingerprint), history = last, self._history
        lead = history.anchor_holds(len(messages), length, fingerprint)
        start = length if lead else 0
        if self._chargeable(undecided=False):  # else no answer could be charged to a result
            self._look(messages[start:], start, fresh)
        before = history.round_of(length) if lead and self._resumed else -1
        self._resumed = False
        self._mature(history.current_round() - self._config.protect_rounds, before)

    def _mature(self, last_round: int, counted_before: int) -> None:
        """Count the weighed results of rounds up to ``last_round`` kept whole so far as exposed,
        once each; those of rounds up to ``counted_before`` were counted when a log without ``w``
        was written (a resumed session's first request). One not decided yet (it came with this
        request) is no exposure; a hidden one leaves the index's results (never charged again)."""
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
                self.exposed_found.append(r.call_id)

    def evidence(self, tool: str) -> tuple[int, int, int]:
        """(exposed, needed, episodes) of ``tool``: what :func:`budget.policy.spill_verdict` reads."""
        counts = self._kinds.get(tool)
        return (0, 0, 0) if counts is None else (counts[0], counts[1], counts[2])

    def pooled(self, observed: Observed) -> Observed:
        """``observed`` with the session's totals over every tool (the pooled rate's counts and
        the read-backs per needed result: :func:`budget.policy.readbacks_per_need`)."""
        exposed = needed = episodes = 0
        for e, n, k in self._kinds.values():
            exposed, needed, episodes = exposed + e, needed + n, episodes + k
        if (observed.exposed, observed.needed, observed.episodes) == (exposed, needed, episodes):
            return observed
        return replace(observed, exposed=exposed, needed=needed, episodes=episodes)

    def record(self) -> dict[str, Any]:
        """What was found since the last call, as a request record's fields: the results found
        needed (``q``), the lines newly quoted from them (``e``), those counted as exposed
        (``w``), the counts of the tools changed (``k``). A request that fails before its record is logged leaves them to the next one:
        this session counted them, and a resumed one reads them from the log."""
        fields: dict[str, Any] = {}
        if self.found:
            fields["q"] = self.found
        if self.lines_found:
            fields["e"] = self.lines_found
        if self.exposed_found:
            fields["w"] = self.exposed_found
        if self._changed:
            fields["k"] = {tool: list(self._kinds[tool]) for tool in sorted(self._changed)}
        self.found, self.lines_found, self.exposed_found, self._changed = [], {}, [], set()
        return fields

    def _count(self, tool: str, which: int) -> None:
        counts = self._kinds.get(tool)
        if counts is None:
            counts = self._kinds[tool] = [0, 0, 0]
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
            self._config, result.text, ref=ref_for(result.text), tool=result.tool,
            is_error=result.is_error, path=None, version=self._ledger.preview_version,
        )  # fmt: skip

    def reset(self) -> None:
        """Forget the index (the history diverged or a result was edited): the whole history,
        rescanned, rebuilds it in history order, as a resumed session builds it. The results
        found needed stay found, those counted as exposed stay counted."""
        self._results, self._seen, self._pending = {}, set(), deque()
        self._index.reset()

    def _index_results(self, results: Iterable[ToolResult]) -> None:
        """Index the lines of ``results``, once each (:class:`LineIndex`): every result is a
        holder (a later small result showing a line whole is where a quote of it may come from);
        only those the cost model weighs can be charged."""
        known, seen, pending = self._results, self._seen, self._pending
        self._index.settle(self._chargeable)
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
        self._index.add(new, undecided=all(decided(r.call_id) is None for r in new))

    def _chargeable(self, *, undecided: bool = True) -> bool:
        """Whether a weighed result may be charged: kept whole (or, with ``undecided``, not
        decided yet). Those that never can be again leave :attr:`_results`, oldest first, up to
        the first that may: each leaves once, so the check costs a request a few steps."""
        # A result found needed stays chargeable while kept whole: each answer quoting new lines
        # of it is one more read-back (an episode).
        results, kept = self._results, self._kept_whole
        while results:
            cid = next(iter(results))
            if kept(cid) or self._ledger.get(cid) is None:
                break
            del results[cid]
        # Past the first that may: this request's fresh results (not decided), or a kept one.
        return any(kept(cid) or undecided for cid in results)

    def _look(self, answers: Sequence[Any], start: int, fresh: Collection[str]) -> None:
        """Find the kept results ``answers`` (the history's from message ``start`` on) quote
        outside their would-be preview (into :attr:`found`, the lines newly quoted into
        :attr:`lines_found`). A quote is charged to the latest result holding the line, as long
        as it is weighed and still shown whole (a hidden one's read-backs are counted as such, a
        small one showed the line whole) and came before the answer: answers looked at again
        (a diverged history) did not quote a result that came after them."""
        if not self._index:
            return
        index, results, quoted = self._index, self._results, self._quoted
        previews: dict[str, tuple[str, str]] = {}
        episode: set[str] = set()  # the results this answer (one model turn) counted
        for at, message in enumerate(answers, start):
            strings = answer_strings(message)
            first = next(strings, None)
            if first is None:
                # Not the model's (its items yield their role or type at least): a tool's output
                # or the user's, after which a read-back could come. Consecutive model items
                # (Responses' message and function calls) are one answer.
                episode = set()
                continue
            for text in chain((first,), strings):
                if len(text) < MIN_QUOTE_CHARS:
                    continue  # no line of it is long enough to be a quote
                for line in quotable(text):
                    cid = index.get(line)
                    if cid is None or cid not in results or not self._kept_whole(cid):
                        continue  # hidden (never charged again), or decided by this request
                    if cid in fresh:
                        continue  # edited since its decision: decided anew by this request
                    if results[cid].msg_index > at:
                        continue  # after this answer: the line came from an earlier holder
                    seen = previews.get(cid)
                    if seen is None:
                        r = results[cid]
                        seen = (without_gutter(self._would_show(r)), without_gutter(r.text))
                        previews[cid] = seen
                    shown, whole = seen
                    # The line itself (not another of the same hash), outside the preview.
                    if line in shown or line not in whole:
                        continue
                    if index.held_by_deferred(line):
                        continue  # its latest holder is a fresh result, not decided when it looked
                    digest = xxhash.xxh3_64_intdigest(line.encode("utf-8", "surrogatepass"))
                    lines = quoted.setdefault(cid, set())
                    if digest in lines:
                        continue  # quoted before: the read-back that brought it would show it
                    lines.add(digest)
                    self.lines_found.setdefault(cid, []).append(digest)
                    tool = results[cid].tool
                    if cid not in self.needed:
                        self.needed.add(cid)
                        self.found.append(cid)
                        self._count(tool, 1)
                    if cid not in episode:
                        episode.add(cid)
                        self._count(tool, 2)
