"""The session's durable record: the decision log it appends to and restores from, its metadata.

A request's append ends with its request or overflow record, which closes the records before it;
what a crash cut off after the last closing record is left to the retry (``void`` withdraws what
the retry did not make again). A fact (a read-back the host noted) is appended on its own and
closed by the next request's record. Each record gets a sequence number once, when first queued.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from budget._errors import SessionLocked, StoreError
from budget._ledger import Ledger
from budget._log import Events
from budget.compaction._compactor import Compactor
from budget.compaction._resumed import FAILED
from budget.policy import Observed
from budget.session._records import (
    CLOSING,
    NOTE,
    KeptEvidence,
    Noted,
    finite,
    is_count,
    last_noted,
    last_request_refs,
    restore_policy,
    split_log,
    tokens_field,
    unnumbered,
    usage_key,
)
from budget.session._resumed import Reactive, header_of, reactive_of, read_anchor
from budget.tokens._calibration import RECORD, Anchor, Calibration, restore
from spill import Store

FACTS = (RECORD, FAILED, NOTE)
"""Record kinds that stand on their own, whatever follows them (see :meth:`Journal.restore`)."""

__all__ = ["Counters", "Journal", "Resumed"]

Counters = tuple[int, float | None, int, int | None]
"""Request count, time, length and history tokens (``last_f``) as a request record holds them."""


@dataclass(frozen=True, slots=True)
class Resumed:
    """What a session's decision log gives back on opening, besides the ledger and the
    compactor it restores: the request counters and what they leave to the next request."""

    counters: Counters | None
    """The last request record's counters (None before any request)."""
    before_last: Counters
    """The counters before the last request (what a retry of it rolls back to)."""
    overflows: int
    """The overflow streak the log ends in."""
    last_usage: tuple[int, ...] | None
    """The last usage a request saw (to tell a new response from the same one again)."""
    window_cap: int | None
    """The smallest window a prompt-too-long error stated."""
    calibration: Calibration
    anchor: Anchor | None = None
    """The calibration anchor the last request left (``budget.session._resumed``)."""
    reactive: Reactive = field(default_factory=Reactive)
    """The reactive compaction schedule the closed records leave."""
    observed: Observed = field(default_factory=Observed)
    """What the cost policy had learned by the last request (its record's ``p``)."""
    marks: list[tuple[int, float]] = field(default_factory=list)
    """(history length, time) of the requests whose cache entries still match (see
    :func:`budget.session._records.note_request`)."""
    evidence: KeptEvidence = field(default_factory=KeptEvidence)
    """What the kept results' read-back evidence had counted (``budget.session._quotes``)."""
    recent_refs: frozenset[str] = frozenset()
    """The refs the last logged request's decisions name (``Bodies.restore_missing``)."""
    noted: Noted = (0, 0, frozenset())
    """The read-backs the host had reported by the last request (the last record holding ``r``:
    it is logged when the host noted more)."""


class Journal:
    """The decision log and metadata of a session: append, restore, read and write metadata.

    Its state is what the log's writer needs: the last sequence number, the records a failed
    append left queued, and the records a crash cut off (left to the retry).
    """

    def __init__(self, store: Store, log: Events) -> None:
        self._store, self._log = store, log
        self._seq = 0
        """Sequence number of the last log record: records that may repeat stay distinct lines."""
        self._unlogged: list[Mapping[str, Any]] = []
        self._tail: list[dict[str, Any]] = []
        """Records of a request a crash cut off, still in the log: its retry does not repeat them."""

    @property
    def queued(self) -> bool:
        """Whether records a failed append could not write are waiting for the next one."""
        return bool(self._unlogged)

    def append(self, records: list[Mapping[str, Any]], *, last: bool = False) -> None:
        """Append records after any a failed append left behind; never raises for the store,
        but at ``last`` (close): no later append would write them, so their loss is raised.

        Records a failed append could not write are kept and written, in order, before the next
        ones: after a passing failure (a full disk, an I/O error) the log is whole again, so a
        resumed session shows what this one showed. Until then the decisions live in memory.
        """
        pending = [*self._unlogged, *records]
        # The retry of the request a crash cut off settles its tail: not a fact appended before
        # it (a note), which would withdraw decisions the retry then writes again.
        if self._tail and any(r.get("t") in CLOSING for r in pending):
            pending = self._settle_tail(pending)
        # Every record gets its sequence number once, when first queued: a record that may
        # legitimately repeat (a second overflow streak, a retry's request record) stays a
        # line of its own, while the same record written again after a failed append is still
        # a duplicate line the reader skips.
        for i, r in enumerate(pending):  # a list of its own: numbered in place
            if "s" not in r:
                self._seq += 1
                pending[i] = {**r, "s": self._seq}
        try:
            self._store.append_log(pending)
        except SessionLocked:
            # Another writer took the session (an object store's conditional append): going on
            # would fork the log, and a resume would show neither session's view. Refuse, as a
            # second process is refused locally; the records stay queued, nothing is lost.
            self._unlogged = pending
            raise
        except (StoreError, OSError) as exc:
            self._unlogged = pending
            self._log.error("toolbudget.log.append_failed", error=str(exc), records=len(pending))
            if last:
                raise
            return
        self._unlogged = []

    def append_fact(self, record: Mapping[str, Any]) -> None:
        """:meth:`append` one fact a host reported (a note): refused by another writer's lock
        (SessionLocked), it leaves the queue, since the host told so may report it again."""
        try:
            self.append([record])
        except SessionLocked:
            self._unlogged = self._unlogged[:-1]
            raise

    def _settle_tail(self, pending: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """The first append after a request a crash cut off: the decisions made again are in
        the log already (this append's record closes them); the others are withdrawn."""
        # Compared without their sequence numbers, which only keep equal records apart.
        tail, self._tail = [unnumbered(r) for r in self._tail], []
        bare = [unnumbered(r) for r in pending]
        # A note the host made again is a read-back more, never the tail's one made again.
        again = [
            r for r, b in zip(pending, bare, strict=True) if b not in tail or r.get("t") == NOTE
        ]
        void = [
            r["id"]
            for r in tail
            if r.get("t") == "d" and isinstance(r.get("id"), str) and r not in bare
        ]
        return [{"t": "void", "ids": void}, *again] if void else again

    def _hold_tail(self, unclosed: list[dict[str, Any]]) -> None:
        """Keep the records after the last closing one for the next append to settle."""
        # A failed proactive compaction logs its count after its request's record, and a
        # calibration record is a fact about a response: neither is a request a crash cut off
        # (both restored from the whole log), so neither is a dropped tail.
        dropped = [r for r in unclosed if not any(r.get("t") == kind for kind in FACTS)]
        if dropped:
            self._log.warning("toolbudget.log.tail_dropped", records=len(dropped))
        if unclosed:
            self._tail = unclosed

    def restore(self, ledger: Ledger, compactor: Compactor, model: str | None) -> Resumed:
        """Read the log once: restore ``ledger`` and ``compactor`` from it, and return the rest."""
        # A request's records count once its own record closes them (every append ends with a
        # request or overflow record). Those after the last one are from a request a crash cut
        # off: left to its retry, which makes them again; a "void" record it writes withdraws
        # those it did not make again, so they are never closed by a later record.
        log = self._store.read_log()
        compactor.restore(log)
        for rec in reversed(log):
            seq = rec.get("s")
            if is_count(seq):
                self._seq = seq
                break
        records, decisions, unclosed = split_log(log)
        self._hold_tail(unclosed)
        # The whole log, tail included: a calibration record is a fact about a response that
        # came, never withdrawn, and closed by whatever request follows (as in the live session).
        calibration, bad = restore(log, model)
        if bad:
            self._log.warning(
                "toolbudget.log.record_skipped", reason="malformed calibration", records=bad
            )
        skipped = ledger.restore(decisions)
        ledger.requested_in(records)
        if skipped:
            self._log.warning(
                "toolbudget.log.record_skipped",
                reason="decision record without a call id",
                records=skipped,
            )
        stated = [rec["w"] for rec in records if rec.get("t") == "ovf" and is_count(rec.get("w"))]
        window_cap = min((w for w in stated if w > 0), default=None)
        counters, before_last, overflows, last_usage, last = self._restore_counters(records)
        # What the next request's decisions read that the last one learned (logs written
        # before these fields: no anchor, no header, nothing scheduled, as they resumed).
        compactor.header = header_of(last) if last else 0
        anchor = read_anchor(last) if last else None
        restored = len(decisions) - skipped
        if restored:
            self._log.info(
                "toolbudget.session.resumed",
                decisions=restored,
                requests=counters[0] if counters else 0,
            )
        observed, marks, evidence = restore_policy(records)
        return Resumed(
            counters,
            before_last,
            overflows,
            last_usage,
            window_cap,
            calibration,
            anchor,
            reactive_of(records),
            observed,
            marks,
            evidence,
            last_request_refs(records),
            last_noted(log),
        )

    def _restore_counters(
        self, records: list[dict[str, Any]]
    ) -> tuple[Counters | None, Counters, int, tuple[int, ...] | None, dict[str, Any] | None]:
        """(the last request's counters, those before it, the overflow streak, the last usage,
        the last request record), from the closed records."""
        # The request counters come from the last request record, the overflow streak from the
        # overflow records after it (a request record ends a streak). A retry repeats its
        # request's length: the state before it is that of the last record with another length.
        overflows: int | None = None
        last: Counters | None = None
        before_last: Counters = (0, None, 0, None)
        last_usage: tuple[int, ...] | None = None
        last_rec: dict[str, Any] | None = None
        for rec in reversed(records):
            kind = rec.get("t")
            if kind == "ovf" and overflows is None and last is None:
                count = rec.get("count")
                if is_count(count):
                    overflows = count
                else:
                    self._log.warning(
                        "toolbudget.log.record_skipped", reason="overflow record without a count"
                    )
            elif kind == "req":
                n, m = rec.get("n"), rec.get("m", 0)
                if not (is_count(n) and is_count(m)):
                    # Checksummed yet malformed (another writer): skipped, like a damaged line.
                    self._log.warning(
                        "toolbudget.log.record_skipped", reason="request record without counts"
                    )
                elif last is None:
                    last = (n, finite(rec.get("at")), m, tokens_field(rec.get("f")))
                    # The streak and the last usage as that request left them (logs written
                    # before they were recorded: a request record ended the streak).
                    if overflows is None and is_count(rec.get("o")):
                        overflows = rec["o"]
                    last_usage = usage_key(rec.get("u"))
                    last_rec = rec
                elif m != last[2]:
                    before_last = (n, finite(rec.get("at")), m, tokens_field(rec.get("f")))
                    break
        return last, before_last, overflows or 0, last_usage, last_rec

    def invalid_record(self, call_id: str, reason: str) -> None:
        """Note a decision record the ledger could not take (its ``on_invalid``)."""
        self._log.warning("toolbudget.log.record_skipped", call_id=call_id, reason=reason)

    def read_meta(self) -> dict[str, Any]:
        """The session metadata, or ``{}`` with an event when it cannot be read (empty, not
        JSON): it only caches what the log and the next requests give again."""
        try:
            return self._store.read_meta()
        except (StoreError, OSError) as exc:
            self._log.error("toolbudget.session.meta_failed", error=str(exc))
            return {}

    def write_meta(self, **fields: Any) -> None:
        try:
            # read_meta: a damaged file is replaced by a whole one rather than kept forever.
            self._store.write_meta({**self.read_meta(), **fields})
        except (StoreError, OSError) as exc:
            self._log.error("toolbudget.session.meta_failed", error=str(exc))
