"""What a request leaves behind: its records in the decision log, and its report.

A request's decisions are logged with the request record that closes them (and a calibration
record when a usage taught the estimate something); the report sums what the whole history
shows now, with the usage anchor the next request's response is measured against.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from budget._ledger import Decision
from budget._report import DecisionReport, Prepared, Report
from budget._view import ToolResult
from budget.passes.duplicate import POINTERS
from budget.passes.staleness import BATCH
from budget.session._estimator import anchor
from budget.session._journal import Counters
from budget.session._parts import Parts
from budget.session._records import note_request
from budget.session._resumed import anchor_field
from budget.session._values import Scan, Turn

__all__ = ["Outcome", "Redone"]

Redone = tuple[Scan, int, Counters, int]
"""What tells a stable prefix: the request's scan, the length of the copy the last request left
in memory, the counters before the request, the first message a decision of it is about."""


class Outcome:
    """What a request leaves: its records logged, its report; the counters rolled back for a
    retry. No state of its own: it reads and advances the session's parts."""

    def __init__(self, parts: Parts, header: Callable[[], int] = lambda: 0) -> None:
        self._journal, self._tally, self._estimator = parts.journal, parts.tally, parts.estimator
        self._history, self._copies = parts.history, parts.copies
        self._candidates, self._ledger = parts.candidates, parts.ledger
        self._quotes = parts.quotes
        self._header = header
        """The compaction header learned so far (the compactor's), logged with each request."""

    def roll_back(self, before: Counters, *, retry: bool) -> None:
        """On a retry, the counters as they were before the request it repeats."""
        if retry:
            # The last request's history again (a retry after an error or a crash, in this
            # process or after a resume): counted as that request, and it makes no new batch
            # (unless an overflow forces one), so it shows what that request showed.
            self._tally.set(self._tally.before_last)
        else:
            self._tally.before_last = before

    def still_a_retry(self, length: int, before: Counters) -> bool:
        """Whether a request of the last one's length, now scanned, repeats that request; if
        not, the counters are put back as they were before it."""
        if self._history.same_history(length, before[3]):
            return True
        # As many messages as the last request but other ones (a history compacted to a
        # fixed size, first message plus the last N): a new request, not a retry of it.
        self._tally.before_last = before
        self._tally.set(before)
        return False

    def request_records(
        self, made: Mapping[str, Decision], length: int, now: float, *, learned: bool
    ) -> tuple[list[Mapping[str, Any]], int]:
        """The decisions and the request record that closes them, appended by :meth:`closing`
        once the request is made; and the history's fingerprint (its tokens but the last
        messages)."""
        records: list[Mapping[str, Any]] = [d.to_record() for d in made.values()]
        tally = self._tally
        gap = None if tally.last_at is None else max(now - tally.last_at, 0.0)
        # Results hidden for the first time (a retry's, or a spilled one trimmed, count once).
        # A pointer to an output still shown hides nothing (the read-back rate's evidence).
        hidden = sum(
            1
            for cid, d in made.items()
            if d.needs_body
            and d.reason not in POINTERS
            and ((prev := self._ledger.get(cid)) is None or not prev.needs_body)
        )
        tally.observed = tally.observed.after_request(gap_s=gap, hidden=hidden)
        # Dated by this request's length, as a resumed session dates them from its record.
        hiding = (d.ref for d in made.values() if d.needs_body and d.ref is not None)
        self._ledger.requested(length, hiding)
        note_request(tally.marks, length, now, tally.batch_from)
        self._tally.requests += 1
        if learned:
            records.append(self._estimator.to_record(self._tally.requests))
        fingerprint = self._history.fingerprint(length)
        req: dict[str, Any] = {"t": "req", "n": self._tally.requests, "at": now, "m": length}
        # What a resumed session needs to treat the next request as this one would: the
        # history it anchors a usage on, the overflow streak and the last usage seen.
        req.update(f=fingerprint, o=self._tally.overflows)
        if self._tally.last_usage is not None:
            req["u"] = list(self._tally.last_usage)
        req["p"] = tally.observed.to_record()
        if tally.batch_from is not None:
            req["x"] = tally.batch_from
        req.update(self._quotes.record())  # q, e and k: what the read-back evidence found
        records.append(req)
        return records, fingerprint

    @contextmanager
    def closing(self, records: list[Mapping[str, Any]]) -> Iterator[None]:
        """Append a request's records after the block, its request record (the last) with what
        the request learned that a later one reads (``budget.session._resumed``): the
        calibration anchor, the compaction header. Also when the block fails: the decisions
        are frozen by then (logged with the state as the failure left it)."""
        try:
            yield
        finally:
            header = self._header()
            state = {
                **anchor_field(self._estimator.pending),
                **({"hdr": header} if header > 0 else {}),
            }
            self._journal.append([*records[:-1], {**records[-1], **state}])

    @staticmethod
    def first_decided(
        made: Mapping[str, Decision],
        by_id: Mapping[str, ToolResult],
        length: int,
        fresh: list[ToolResult],
    ) -> int:
        """The first message a decision of this request shows changed (``length`` when none).

        A trim the store refused (``kept_unspillable`` for a result decided before, not a fresh
        one) shows the result whole, as the last copy did: it changes no message.
        """
        new = {r.call_id for r in fresh}
        return min(
            (
                by_id[c].msg_index
                for c, d in made.items()
                if d.kind != "kept_unspillable" or c in new
            ),
            default=length,
        )

    @staticmethod
    def timed(copy: list[Any], report: Mapping[str, Any], started: float) -> Prepared:
        """The request's result, its :class:`Report` made of ``report`` (:meth:`report`'s
        fields) once the time spent is known, the log append (its fsyncs) included."""
        return Prepared(copy, Report(**report, elapsed_s=time.perf_counter() - started))

    def _prefix_stable(self, redone: Redone, length: int) -> bool:
        """Whether the previous request's copy is a prefix of this one (a batch, which rewrites
        results the previous request showed, is told apart by the caller).

        The copies are compared message by message from the first one this request made
        again. With no copy in memory (the first request after a resume, or after the caches
        were rebuilt), the previous copy is what its history shows with the decisions frozen
        before this request: the same when this history extends that one (its length, and its
        tokens but the last messages, as the log holds them) and no decision of this request
        is about a result among those messages.
        """
        scan, prev_len, (_, _, base_n, base_f), first_decided = redone
        k, old_outputs = scan.k, scan.old_outputs
        if prev_len or not base_n:
            return self._copies.outputs[k:prev_len] == old_outputs[: prev_len - k]
        if length < base_n or not self._history.same_history(base_n, base_f):
            return False
        return first_decided >= base_n

    def report(
        self,
        turn: Turn,
        made: Mapping[str, Decision],
        reports: list[DecisionReport],
        since: int,
        redone: Redone,
        format_name: str,
    ) -> dict[str, Any]:
        """What this request did, in the totals of the whole history: its :class:`Report`'s
        fields but the time spent (:meth:`timed` makes the report)."""
        messages, reported = turn.messages, turn.reported
        trimmed_now = [d for d in made.values() if d.kind == "trimmed"]
        copies, history = self._copies, self._history
        stable = not trimmed_now and self._prefix_stable(redone, len(messages))
        window = self._estimator.window()
        reclaimable = self._candidates.reclaimable(history.current_round(), turns=history.turns)
        t = copies.totals
        raw_after = max(copies.cum_out[-1], anchor(reported, messages, since, copies.cum_out))
        if reported is not None and not trimmed_now:
            # What this request's growth is estimated at, for the usage its response reports.
            growth = raw_after - reported.prompt_tokens
            self._estimator.anchor(reported, growth, len(messages))
        return {
            "request": self._tally.requests,
            "format": format_name,
            "messages": len(messages),
            "results": t.results,
            "decisions": tuple(reports),
            "kept": t.kept,
            "spilled": t.spilled,
            "trimmed": t.trimmed,
            "unspillable": t.unspillable,
            "chars_before": t.chars_before,
            "chars_after": t.chars_after,
            "tokens_before": history.cum_in[-1],
            "tokens_after": self._estimator.correct(raw_after, copies.cum_out[-1], reported),
            "tokens_after_raw": raw_after,
            "window": window,
            "prefix_stable": stable,
            "staleness_ran": bool(trimmed_now),
            "staleness_reason": trimmed_now[0].reason if trimmed_now else None,
            "staleness_cost": self._tally.verdicts.get(BATCH),
            "reclaimable_tokens": reclaimable,
        }
