"""What a request leaves behind: its records in the decision log, and its report.

A request's decisions are logged with the request record that closes them (and a calibration
record when a usage taught the estimate something); the report sums what the whole history
shows now, with the usage anchor the next request's response is measured against.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from budget._ledger import Decision
from budget._report import DecisionReport, Report
from budget.session._estimator import anchor
from budget.session._journal import Counters
from budget.session._parts import Parts
from budget.session._values import Scan, Turn

__all__ = ["Outcome"]


class Outcome:
    """What a request leaves: its records logged, its report; the counters rolled back for a
    retry. No state of its own: it reads and advances the session's parts."""

    def __init__(self, parts: Parts) -> None:
        self._journal, self._tally, self._estimator = parts.journal, parts.tally, parts.estimator
        self._history, self._copies = parts.history, parts.copies
        self._candidates = parts.candidates

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

    def log_request(
        self, made: Mapping[str, Decision], length: int, now: float, *, learned: bool
    ) -> int:
        """Log the decisions and the request record that closes them; return the history's
        fingerprint (its tokens but the last messages)."""
        records: list[Mapping[str, Any]] = [d.to_record() for d in made.values()]
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
        records.append(req)
        self._journal.append(records)
        return fingerprint

    def report(
        self,
        turn: Turn,
        made: Mapping[str, Decision],
        reports: list[DecisionReport],
        since: int,
        redone: tuple[Scan, int],
        started: float,
        format_name: str,
    ) -> Report:
        """What this request did, in the totals of the whole history."""
        messages, reported = turn.messages, turn.reported
        trimmed_now = [d for d in made.values() if d.kind == "trimmed"]
        # A batch rewrites results the previous request showed; otherwise compare what was redone.
        scan, prev_len = redone
        k, old_outputs = scan.k, scan.old_outputs
        copies, history = self._copies, self._history
        stable = not trimmed_now and copies.outputs[k:prev_len] == old_outputs[: prev_len - k]
        window = self._estimator.window()
        reclaimable = self._candidates.reclaimable(history.current_round())
        t = copies.totals
        raw_after = max(copies.cum_out[-1], anchor(reported, messages, since, copies.cum_out))
        if reported is not None and not trimmed_now:
            # What this request's growth is estimated at, for the usage its response reports.
            growth = raw_after - reported.prompt_tokens
            self._estimator.anchor(reported, growth, len(messages))
        return Report(
            request=self._tally.requests,
            format=format_name,
            messages=len(messages),
            results=t.results,
            decisions=tuple(reports),
            kept=t.kept,
            spilled=t.spilled,
            trimmed=t.trimmed,
            unspillable=t.unspillable,
            chars_before=t.chars_before,
            chars_after=t.chars_after,
            tokens_before=history.cum_in[-1],
            tokens_after=self._estimator.correct(raw_after, copies.cum_out[-1], reported),
            tokens_after_raw=raw_after,
            window=window,
            prefix_stable=stable,
            staleness_ran=bool(trimmed_now),
            staleness_reason=trimmed_now[0].reason if trimmed_now else None,
            reclaimable_tokens=reclaimable,
            elapsed_s=time.perf_counter() - started,
        )
