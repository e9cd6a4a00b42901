"""One request, its format set, as a pipeline of steps over the session's parts:

scan the history (:class:`Scan`) → decide (the passes over the fresh results, a
:class:`Turn`) → store the bodies and log the decisions → build the copy → report
(:class:`budget.Prepared`). Each step takes and returns values; the parts
(:class:`budget.session._parts.Parts`) keep what outlives the request.

What a request costs, and what it does not:

* Whether the previous history is a prefix of this one is checked in O(1) when the caller passes
  the same list object again (agents append to one list): same list, no shorter, and the same
  message objects at both ends of the previous history. Replacing or deleting an earlier message
  of that list in place is therefore not seen; code that edits its history must pass a new list
  (``list(messages)``), which is compared in full (by identity first, at C speed). The
  ``cache_control`` markers of earlier messages are compared where agents move them in place
  (every message that carried one, and the last few: ``Copies.sync_markers``), not all of
  them.
* Token estimates of big texts are memoized by the identity of the text for two requests
  (:class:`budget.tokens._memo.TextTokens`), so re-scanned messages and staleness candidates are
  not estimated again; very large texts are estimated from samples.
* Staleness candidates are built only when a batch runs (``budget.session._candidates._Eligible``).
* The request copy is a new list (the caller owns it; earlier copies never change), so one
  pointer per message is copied: the only step proportional to the history, done in C.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from budget._report import Prepared
from budget._view import Format, ToolResult
from budget.session._history import RESCAN
from budget.session._outcome import Outcome
from budget.session._parts import Parts
from budget.session._passrun import Passes
from budget.session._tail import Tail
from budget.session._values import Scan, Turn
from budget.tokens._estimates_cache import EstimateCache

__all__ = ["Pipeline"]


class Pipeline:
    """A session's request path (see the module doc): its steps, and the caches they reuse."""

    def __init__(
        self,
        parts: Parts,
        learn_header: Callable[[int, list[Any]], None] = lambda tokens_after, copy: None,
        header: Callable[[], int] = lambda: 0,
    ) -> None:
        self._parts = parts
        self._passes = Passes(parts)
        self._outcome = Outcome(parts, header)
        self._tail = Tail()
        """The last messages and their copies as the last request left them."""
        self._learn_header = learn_header
        """Compaction's header learning (``Compacting.learn_header``), before the request is
        logged: its record keeps what it learned (``header``)."""

    def reset(self) -> None:
        """Forget the per-message caches (not the decisions): the next request rebuilds them."""
        self._parts.history.reset()
        self._parts.copies.reset()
        self._parts.candidates.reset()
        self._parts.quotes.reset()
        self._parts.tally.forget_from(0)  # the whole history's read-back calls found again
        self._tail.clear()

    def run(
        self, messages: list[Any], usage: Any, now: float, started: float, fmt: Format
    ) -> Prepared:
        """One request: scan → passes → store → apply → report → log."""
        p, outcome = self._parts, self._outcome
        p.prices.use(fmt)
        before = p.tally.counters()
        retry = p.tally.is_retry(len(messages))
        outcome.roll_back(before, retry=retry)
        prev_len = len(p.history.inputs)
        scan = self.scan(messages, fmt)
        retry = retry and outcome.still_a_retry(len(messages), before)
        p.bodies.restore_missing(scan.results)
        fresh, wrapped = p.bodies.take_wrapped(scan.fresh)
        reported = self._passes.usage_for(usage, len(messages))
        learned = p.estimator.learn(reported, len(messages), diverged=scan.diverged)
        turn = Turn(messages, scan.k, fresh, reported, now, retry)
        made = self._passes.decide(turn, scan.results, wrapped)
        by_id = p.candidates.results_of(made, scan.results)
        made = p.bodies.digested(p.bodies.materialize(made, by_id), by_id)
        records, fingerprint = outcome.request_records(made, len(messages), now, learned=learned)
        with outcome.closing(records):  # logged once it learned what the next request reads
            overflowing = p.tally.overflows > 0
            reports = p.copies.apply(
                messages,
                scan.k,
                made,
                by_id,
                fmt,
                overflowing=overflowing,
                verdicts=p.tally.verdicts,
            )
            # Decided now, or looked at again: candidates if they are not ones yet.
            if scan.rescan == 0:
                p.candidates.add_scanned(by_id.values(), scan.fresh)
            else:
                p.candidates.add(r for r in by_id.values() if r.msg_index >= scan.rescan)
            p.copies.sync_markers(messages, scan.rescan, fmt)
            since = p.tally.last_n
            p.tally.last_at, p.tally.last_n, p.tally.last_f = now, len(messages), fingerprint
            first = outcome.first_decided(made, by_id, len(messages), scan.fresh)
            redone = (scan, prev_len, before, first)
            report = outcome.report(turn, made, reports, since, redone, fmt.name)
            copy = list(p.copies.outputs)
            self._learn_header(report["tokens_after"], copy)
        self._tail.keep(messages, p.copies.outputs, max(len(messages) - RESCAN, 0))
        p.history.seen = messages
        p.text_tokens.next_request()
        return outcome.timed(copy, report, started)

    def scan(self, messages: list[Any], fmt: Format) -> Scan:
        """Reuse what the last history left, scan the rest."""
        history, copies = self._parts.history, self._parts.copies
        k = rescan = history.reusable(messages)
        diverged = k < 0 or len(messages) < self._parts.tally.last_n
        # Until this request completes, the caches may not match the list passed last time.
        history.seen = None
        if k < 0:
            old_outputs = copies.outputs
            self.reset()
            k = rescan = 0
        else:
            if k == len(history) - RESCAN and self._tail.holds(messages, copies.outputs):
                k = len(history)  # the last messages and their copies are as they were left
            old_outputs = copies.outputs[k:]
            copies.truncate(k)
            history.truncate(k)
            self._parts.tally.forget_from(k)
        fresh, new_results = history.scan(messages, k, fmt)
        if history.stale and k > 0:
            # A result was edited after it was decided: it is a new result, and the caches of
            # earlier requests (its staleness candidate holds the old text) must not outlive
            # its old decision. Rebuilt from the frozen decisions, as a resumed session would.
            old_outputs = copies.outputs[:k] + old_outputs
            self.reset()
            k = rescan = 0
            fresh, new_results = history.scan(messages, k, fmt)
        elif rescan < k:
            new_results = self._reused(messages, rescan, k) + new_results
        return Scan(k, old_outputs, fresh, new_results, diverged, rescan)

    def _reused(self, messages: list[Any], start: int, end: int) -> list[ToolResult]:
        """Messages ``start`` to ``end`` kept as the last request left them: their results and
        the refs their calls name, and their copies' markers, as a scan of them would give."""
        history = self._parts.history
        mentions = [(c.call_id, ref, i) for i in range(start, end) for c in history.calls(i)
                    for ref in c.refs]  # fmt: skip
        history.mentions[:0] = mentions
        self._parts.copies.reuse(messages, start, end)
        return [r for i in range(start, end) for r in history.results(i)]

    def keep_estimates(self, known: EstimateCache) -> None:
        """Hand the saved estimates every message's tokens, as given and as its copy shows it,
        but the last ``RESCAN`` (callers edit those in place: their tokens may be stale): what
        a resume's bulk scan of the same history looks up. Done at close, in one pass (~15 ms
        for 5,201 messages), not per request."""
        history = self._parts.history
        if history.seen is None:
            return  # caches a failed request left half updated
        end = max(len(history) - RESCAN, 0)
        known.keep_messages(history.given(end))
        known.keep_messages(self._parts.copies.shown(end))
