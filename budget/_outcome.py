"""What a request leaves behind: its records in the decision log, and its report.

A request's decisions are logged with the request record that closes them (and a calibration
record when a usage taught the estimate something); the report sums what the whole history
shows now, with the usage anchor the next request's response is measured against.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from budget._calibration import Anchor
from budget._compactor import Compactor
from budget._history import Scan
from budget._journal import Counters
from budget._ledger import Decision
from budget._passrun import PassRun, Turn
from budget._report import DecisionReport, Prepared, Report
from budget._resumed import anchor_field
from budget._view import ToolResult

__all__ = ["Outcome", "Redone"]

Redone = tuple[Scan, int, Counters, int]
"""What tells a stable prefix: the request's scan, the length of the copy the last request left
in memory, the counters before the request, the first message a decision of it is about."""


class Outcome(PassRun):
    """Logs a request and reports it; rolls the counters back for a retry."""

    _compactor: Compactor

    def _roll_back(self, before: Counters, *, retry: bool) -> None:
        """On a retry, the counters as they were before the request it repeats."""
        if retry:
            # The last request's history again (a retry after an error or a crash, in this
            # process or after a resume): counted as that request, and it makes no new batch
            # (unless an overflow forces one), so it shows what that request showed.
            self._requests, self._last_at, self._last_n, self._last_f = self._before_last
        else:
            self._before_last = before

    def _still_a_retry(self, length: int, before: Counters) -> bool:
        """Whether a request of the last one's length, now scanned, repeats that request; if
        not, the counters are put back as they were before it."""
        if self._same_history(length, before[3]):
            return True
        # As many messages as the last request but other ones (a history compacted to a
        # fixed size, first message plus the last N): a new request, not a retry of it.
        self._before_last = before
        self._requests, self._last_at, self._last_n, self._last_f = before
        return False

    def _request_records(
        self, made: Mapping[str, Decision], length: int, now: float, *, learned: bool
    ) -> tuple[list[Mapping[str, Any]], int]:
        """The decisions and the request record that closes them, appended by
        :meth:`_close_request` once the request is made; and the history's fingerprint (its
        tokens but the last messages)."""
        records: list[Mapping[str, Any]] = [d.to_record() for d in made.values()]
        self._requests += 1
        if learned:
            records.append(self._calib.to_record(self._requests))
        fingerprint = self._fingerprint(length)
        req: dict[str, Any] = {"t": "req", "n": self._requests, "at": now, "m": length}
        # What a resumed session needs to treat the next request as this one would: the
        # history it anchors a usage on, the overflow streak and the last usage seen.
        req.update(f=fingerprint, o=self._overflows)
        if self._last_usage is not None:
            req["u"] = list(self._last_usage)
        records.append(req)
        return records, fingerprint

    def _close_request(self, records: list[Mapping[str, Any]]) -> None:
        """Append a request's records, its request record (the last) with what the request
        learned that a later one reads (``budget._resumed``): the calibration anchor, the
        compaction header. Also when the request failed after freezing its decisions: they are
        logged, with the state as the failure left it (the anchor is then the one it had)."""
        header = self._compactor.header
        state = {**anchor_field(self._cal_anchor), **({"hdr": header} if header > 0 else {})}
        self._append_log([*records[:-1], {**records[-1], **state}])

    @contextmanager
    def _closing(self, records: list[Mapping[str, Any]]) -> Iterator[None]:
        """Append the request's records (:meth:`_close_request`) after the block: once the
        request has learned what the next one reads; also when the block fails, since the
        decisions are frozen by then."""
        try:
            yield
        finally:
            self._close_request(records)

    @staticmethod
    def _first_decided(
        made: Mapping[str, Decision], by_id: Mapping[str, ToolResult], length: int
    ) -> int:
        """The first message a decision of this request is about (``length`` when none)."""
        return min((by_id[c].msg_index for c in made), default=length)

    @staticmethod
    def _timed(copy: list[Any], report: Report, started: float) -> Prepared:
        """The request's result; its time spent includes the log append (its fsyncs)."""
        return Prepared(
            copy, report.model_copy(update={"elapsed_s": time.perf_counter() - started})
        )

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
            return self._outputs[k:prev_len] == old_outputs[: prev_len - k]
        if length < base_n or not self._same_history(base_n, base_f):
            return False
        return first_decided >= base_n

    def _report(
        self,
        turn: Turn,
        made: Mapping[str, Decision],
        reports: list[DecisionReport],
        since: int,
        redone: Redone,
        started: float,
    ) -> Report:
        """What this request did, in the totals of the whole history."""
        messages, reported = turn.messages, turn.reported
        trimmed_now = [d for d in made.values() if d.kind == "trimmed"]
        stable = not trimmed_now and self._prefix_stable(redone, len(messages))
        window = self.window()
        reclaimable = self._reclaimable()
        t = self._totals
        raw_after = max(self._cum_out[-1], self._anchor(reported, messages, since, out=True))
        if reported is not None and not trimmed_now:
            # What this request's growth is estimated at, for the usage its response reports.
            growth = raw_after - reported.prompt_tokens
            self._cal_anchor = Anchor(reported, growth, len(messages))
        return Report(
            request=self._requests,
            format=self._format.name,
            messages=len(messages),
            results=t.results,
            decisions=tuple(reports),
            kept=t.kept,
            spilled=t.spilled,
            trimmed=t.trimmed,
            unspillable=t.unspillable,
            chars_before=t.chars_before,
            chars_after=t.chars_after,
            tokens_before=self._cum_in[-1],
            tokens_after=self._calib.correct(raw_after, self._cum_out[-1], reported),
            tokens_after_raw=raw_after,
            window=window,
            prefix_stable=stable,
            staleness_ran=bool(trimmed_now),
            staleness_reason=trimmed_now[0].reason if trimmed_now else None,
            reclaimable_tokens=reclaimable,
            elapsed_s=time.perf_counter() - started,
        )
