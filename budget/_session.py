"""Budget: one session per conversation; ``prepare`` turns a history into its request copy.

The work per request is proportional to what is new: the session keeps, per message of the last
history it saw, the request-copy message, its token estimate and the results it holds, and reuses
them when the next history starts with the same message objects. Only the last few messages are
looked at again (callers move ``cache_control`` markers there in place). A history that diverges
earlier is rebuilt from the frozen decisions, which gives the same bytes.

What a request costs, and what it does not:

* Whether the previous history is a prefix of this one is checked in O(1) when the caller passes
  the same list object again (agents append to one list): same list, no shorter, and the same
  message objects at both ends of the previous history. Replacing or deleting an earlier message
  of that list in place is therefore not seen; code that edits its history must pass a new list
  (``list(messages)``), which is compared in full (by identity first, at C speed). The
  ``cache_control`` markers of earlier messages are compared where agents move them in place
  (every message that carried one, and the last few: ``_sync_markers``), not all of them.
* Token estimates of big texts are memoized by the identity of the text for two requests
  (:class:`budget._memo.TextTokens`), so re-scanned messages and staleness candidates are not
  estimated again; very large texts are estimated from samples.
* Staleness candidates are built only when a batch runs (:class:`_Eligible`).
* The request copy is a new list (the caller owns it; earlier copies never change), so one
  pointer per message is copied: the only step proportional to the history, done in C.
"""

from __future__ import annotations

import math
import os
import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType, TracebackType
from typing import Any, ParamSpec, Self, TypeGuard, TypeVar, overload

from budget._calibration import Anchor, Calibration, learn, restore
from budget._compactor import Compactor
from budget._config import BudgetConfig, build_config
from budget._envelope import EMPTY_TEXT, envelope_ref
from budget._errors import ContextOverflow, InputError, StoreError
from budget._estimates_cache import load as load_estimates
from budget._ledger import Decision, Ledger
from budget._log import get_logger
from budget._markers import Markers, markers
from budget._memo import TextTokens
from budget._overflow import is_context_overflow, overflow_limit
from budget._readback import ReadBack, ReadToolResult
from budget._report import DecisionReport, Prepared, Report
from budget._tokens import estimate_tokens, tokenizer_profile
from budget._usage import ProviderUsage, normalize_usage
from budget._view import Format, Scanned, ToolResult, scan_at
from budget._windows import resolve_window
from budget._wrap import wrap_tool, wrapped_decisions
from budget.formats import ANTHROPIC, FormatChoice, get_format
from budget.passes import PIPELINE, Candidate, PassContext, Staleness
from budget.passes._context import spill_envelope
from spill import LocalStore, MemoryStore, Store, ref_for

__all__ = ["Budget"]

_P = ParamSpec("_P")
_T = TypeVar("_T")


_RESCAN = 2
"""Trailing messages of the previous history looked at again: callers mutate those in place."""

_MARK_WINDOW = 8
"""Trailing messages whose ``cache_control`` markers are compared on every request, in the
caller's history and in the copies handed out: where agents add markers in place (the reference
loop marks the last three user turns and unmarks the fourth, at most 7 messages back)."""

_NO_MARKS: tuple[Markers, Markers] = ((), ())


@dataclass(slots=True)
class _Msg:
    """What the session remembers of one message of the last history it saw."""

    scanned: Scanned
    results: tuple[ToolResult, ...]
    round_after: int
    group_after: int
    tokens_in: int
    tokens_out: int


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


@dataclass(frozen=True, slots=True)
class _Cand:
    result: ToolResult
    reclaim_tokens: int


class _Eligible(Sequence[Candidate]):
    """This request's staleness candidates, made on access: most requests only ask how many."""

    __slots__ = ("_cands", "_decide", "_end", "_start")

    def __init__(
        self, cands: list[_Cand], start: int, end: int, decide: Callable[[ToolResult], Decision]
    ) -> None:
        self._cands, self._start, self._end, self._decide = cands, start, end, decide

    def __len__(self) -> int:
        return self._end - self._start

    @overload
    def __getitem__(self, i: int) -> Candidate: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[Candidate]: ...

    def __getitem__(self, i: int | slice) -> Candidate | Sequence[Candidate]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError("candidate index out of range")
        c = self._cands[self._start + i]
        return Candidate(c.result, self._decide(c.result), c.reclaim_tokens)


class Budget:
    """A conversation's budgeting session: frozen decisions, a store, the passes."""

    def __init__(
        self,
        store: Store,
        config: BudgetConfig | dict[str, Any] | None = None,
        *,
        format: Format | str | None = None,
        discover_window: Callable[[], int | None] | None = None,
        text_tokens: Callable[[str], int] | None = None,
        summarizer: Callable[[Sequence[Any]], Any] | None = None,
    ) -> None:
        self.config = build_config(config)
        self._discover = discover_window
        self._window: int | None = None
        self._window_cap: int | None = None
        """The smallest window a prompt-too-long error stated (logged, so a resume keeps it)."""
        self._store = store
        self._closed = False
        self._lock = threading.RLock()
        self._log = get_logger("toolbudget")
        self._reader = ReadBack(store, self.config)
        self._ledger = Ledger(on_invalid=self._invalid_record)
        self._stored: set[str] = set()
        self._requests = 0
        self._last_at: float | None = None
        self._last_n = 0
        self._overflows = 0
        self._last_usage: tuple[int, ...] | None = None
        self._last_f: int | None = None
        """Tokens of the last request's history but its last _RESCAN messages, as given: what
        tells whether a usage measured on that history is still an anchor for the next one."""
        self._seq = 0
        """Sequence number of the last log record: records that may repeat stay distinct lines."""
        # The model's tokenizer family sets text density and framing for every estimate.
        self._profile = tokenizer_profile(self.config.model)
        known = (
            None
            if text_tokens is not None
            else load_estimates(store, self._profile, self._profile.text_tokens)
        )
        self._tt = TextTokens(self._profile, exact=text_tokens, known=known)
        self._unlogged: list[Mapping[str, Any]] = []
        self._tail: list[dict[str, Any]] = []
        """Records of a request a crash cut off, still in the log: its retry does not repeat them."""
        self._before_last: tuple[int, float | None, int, int | None] = (0, None, 0, None)
        """Request count, time, length and history tokens (see ``_last_f``) before the last
        request: what a retry rolls back to."""
        self._calib = Calibration(self.config.model)
        self._cal_anchor: Anchor | None = None
        """The last request's anchored estimate, for the usage the next request reports."""
        self._compactor = Compactor(self.config, summarizer, self._log)
        self._reset()
        self._restore()
        # The format: given, remembered by a resumed session, or detected on the first request.
        self._formats = FormatChoice.start(format, self._read_meta().get("format"))
        self._format: Format = self._formats.fixed or ANTHROPIC

    # -- construction ---------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        config: BudgetConfig | dict[str, Any] | None = None,
        *,
        format: Format | str | None = None,
        discover_window: Callable[[], int | None] | None = None,
        text_tokens: Callable[[str], int] | None = None,
        lock_timeout: float = 0.0,
        summarizer: Callable[[Sequence[Any]], Any] | None = None,
    ) -> Budget:
        """Open or create the session directory at ``path``, resuming from its decision log.

        ``discover_window`` asks the provider for the model's context window (asked once; the
        answer is kept in the session). ``text_tokens`` counts texts exactly (e.g.
        :func:`budget.tiktoken_text_tokens`), in place of the model family's character weights;
        message framing is kept. A second opener of a locked session waits up to
        ``lock_timeout`` seconds, then gets SessionLocked. ``summarizer`` (see
        :mod:`budget.summarizers`) makes compaction possible (the ``compaction`` setting).
        """
        cfg = build_config(config)
        # ``path`` as given: Path("") would be the current directory (LocalStore refuses "").
        store = LocalStore(
            path, quota_bytes=cfg.quota_bytes, fsync=cfg.fsync, lock_timeout=lock_timeout
        )
        try:
            return cls(
                store,
                cfg,
                format=format,
                discover_window=discover_window,
                text_tokens=text_tokens,
                summarizer=summarizer,
            )
        except BaseException:
            store.close()
            raise

    @classmethod
    def in_memory(
        cls,
        config: BudgetConfig | dict[str, Any] | None = None,
        *,
        format: Format | str | None = None,
        discover_window: Callable[[], int | None] | None = None,
        text_tokens: Callable[[str], int] | None = None,
        summarizer: Callable[[Sequence[Any]], Any] | None = None,
    ) -> Budget:
        """A session kept in memory only: nothing survives the process."""
        return cls(
            MemoryStore(),
            config,
            format=format,
            discover_window=discover_window,
            text_tokens=text_tokens,
            summarizer=summarizer,
        )

    def close(self) -> None:
        """Log what could not be logged yet, then release the session directory (its lock).

        The session is not usable afterwards.
        """
        with self._lock:
            self._closed = True
            try:
                if self._tt.known is not None:
                    self._tt.known.save()  # the estimates a resume reuses (budget/_estimates_cache)
                if self._unlogged:
                    self._append_log([])
            finally:
                self._store.close()

    def _append_log(self, records: list[Mapping[str, Any]]) -> None:
        """Append records after any a failed append left behind; never raises for the store.

        Records a failed append could not write are kept and written, in order, before the next
        ones: after a passing failure (a full disk, an I/O error) the log is whole again, so a
        resumed session shows what this one showed. Until then the decisions live in memory.
        """
        pending = [*self._unlogged, *records]
        if self._tail:
            # The first append after a request a crash cut off: the decisions made again are in
            # the log already (this append's record closes them); the others are withdrawn.
            # Compared without their sequence numbers, which only keep equal records apart.
            tail, self._tail = [_unnumbered(r) for r in self._tail], []
            bare = [_unnumbered(r) for r in pending]
            again = [r for r, b in zip(pending, bare, strict=True) if b not in tail]
            void = [
                r["id"]
                for r in tail
                if r.get("t") == "d" and isinstance(r.get("id"), str) and r not in bare
            ]
            pending = [{"t": "void", "ids": void}, *again] if void else again
        # Every record gets its sequence number once, when first queued: a record that may
        # legitimately repeat (a second overflow streak, a retry's request record) stays a
        # line of its own, while the same record written again after a failed append is still
        # a duplicate line the reader skips.
        numbered: list[Mapping[str, Any]] = []
        for r in pending:
            if "s" not in r:
                self._seq += 1
                numbered.append({**r, "s": self._seq})
            else:
                numbered.append(r)
        pending = numbered
        try:
            self._store.append_log(pending)
        except (StoreError, OSError) as exc:
            self._unlogged = pending
            self._log.error("toolbudget.log.append_failed", error=str(exc), records=len(pending))
            return
        self._unlogged = []

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def store(self) -> Store:
        """The session's store (spilled bodies, decision log)."""
        return self._store

    def _restore(self) -> None:
        # A request's records count once its own record closes them (every append ends with a
        # request or overflow record). Those after the last one are from a request a crash cut
        # off: left to its retry, which makes them again; a "void" record it writes withdraws
        # those it did not make again, so they are never closed by a later record.
        log = self._store.read_log()
        self._compactor.restore(log)
        for rec in reversed(log):
            seq = rec.get("s")
            if _count(seq):
                self._seq = seq
                break
        kinds = [rec.get("t") for rec in log]
        # Decisions are queued, not built: each is validated when its call id is first asked
        # for, so resuming costs a dict insert per record (SPEC §10: 10,000 in under 100 ms).
        if "void" in kinds:  # ``in`` compares: any value works, even an unhashable one
            records, unclosed = _closed_records(log)
            decisions = [rec for rec in records if rec.get("t") == "d"]
        else:
            # Nothing withdrawn (nearly every log): the records up to the last closing one.
            end = len(log)
            while end and kinds[end - 1] not in ("req", "ovf"):
                end -= 1
            records, unclosed = log[:end], log[end:]
            decisions = [rec for rec, kind in zip(records, kinds, strict=False) if kind == "d"]
        if unclosed:
            self._log.warning("toolbudget.log.tail_dropped", records=len(unclosed))
            self._tail = unclosed
        # The whole log, tail included: a calibration record is a fact about a response that
        # came, never withdrawn, and closed by whatever request follows (as in the live session).
        self._calib, bad = restore(log, self.config.model)
        if bad:
            self._log.warning(
                "toolbudget.log.record_skipped", reason="malformed calibration", records=bad
            )
        skipped = self._ledger.restore(decisions)
        if skipped:
            self._log.warning(
                "toolbudget.log.record_skipped",
                reason="decision record without a call id",
                records=skipped,
            )
        # The request counters come from the last request record, the overflow streak from the
        # overflow records after it (a request record ends a streak). A retry repeats its
        # request's length: the state before it is that of the last record with another length.
        overflows: int | None = None
        last: tuple[int, float | None, int, int | None] | None = None
        stated = [rec["w"] for rec in records if rec.get("t") == "ovf" and _count(rec.get("w"))]
        self._window_cap = min((w for w in stated if w > 0), default=None)
        for rec in reversed(records):
            kind = rec.get("t")
            if kind == "ovf" and overflows is None and last is None:
                count = rec.get("count")
                if _count(count):
                    overflows = count
                else:
                    self._log.warning(
                        "toolbudget.log.record_skipped", reason="overflow record without a count"
                    )
            elif kind == "req":
                n, m = rec.get("n"), rec.get("m", 0)
                if not (_count(n) and _count(m)):
                    # Checksummed yet malformed (another writer): skipped, like a damaged line.
                    self._log.warning(
                        "toolbudget.log.record_skipped", reason="request record without counts"
                    )
                elif last is None:
                    last = (n, _finite(rec.get("at")), m, _tokens_field(rec.get("f")))
                    # The streak and the last usage as that request left them (logs written
                    # before they were recorded: a request record ended the streak).
                    if overflows is None and _count(rec.get("o")):
                        overflows = rec["o"]
                    self._last_usage = _usage_key(rec.get("u"))
                elif m != last[2]:
                    self._before_last = (n, _finite(rec.get("at")), m, _tokens_field(rec.get("f")))
                    break
        if last is not None:
            self._requests, self._last_at, self._last_n, self._last_f = last
        self._overflows = overflows or 0
        restored = len(decisions) - skipped
        if restored:
            self._log.info(
                "toolbudget.session.resumed", decisions=restored, requests=self._requests
            )

    def _invalid_record(self, call_id: str, reason: str) -> None:
        self._log.warning("toolbudget.log.record_skipped", call_id=call_id, reason=reason)

    def _reset(self) -> None:
        """Forget the per-message caches (not the decisions): the next request rebuilds them."""
        self._inputs: list[Any] = []
        self._outputs: list[Any] = []
        self._msgs: list[_Msg] = []
        self._cum_out: list[int] = [0]
        self._cum_in: list[int] = [0]
        # Tokens of each message as shown with the decisions frozen before the request that
        # scanned it: what the request is estimated at before its passes run.
        self._cum_pre: list[int] = [0]
        self._calls: dict[str, list[tuple[str, int, int]]] = {}
        """Per call id, the calls made with it (tool, group, round), the latest last."""
        self._occ: dict[str, int] = {}
        """Per call id, how many results answer it in the history scanned so far."""
        self._stale = False
        self._members: dict[int, dict[str, ToolResult]] = {}
        self._totals = _Totals()
        self._cands: list[_Cand] = []
        self._cand_rounds: list[int] = []
        self._cand_cum: list[int] = [0]
        self._cand_results: dict[str, ToolResult] = {}
        self._cand_start = 0
        self._seen: list[Any] | None = None
        self._marks: dict[int, tuple[Markers, Markers]] = {}
        """Per rewritten message that carried ``cache_control`` markers when its copy was made
        (in the caller's message or in the copy): both, as :func:`budget._markers.markers` lists
        them. Checked on every request, so a marker removed or changed anywhere is seen."""
        self._shown_now: dict[int, tuple[Any, int]] = {}
        """Per message scanned by this request and shown rewritten by earlier decisions: that
        copy and its tokens. _apply takes them for messages this request decides nothing in
        (rebuilding a long history after a resume is mostly such messages)."""

    # -- the request path -----------------------------------------------------------------------

    def prepare(
        self,
        messages: Sequence[Any],
        *,
        usage: Any = None,
        now: float | None = None,
        format: Format | str | None = None,
    ) -> Prepared:
        """The request copy of ``messages`` and its report; ``messages`` is never modified.

        ``format`` names the message format (``anthropic``, ``openai_chat``, ``openai_responses``
        or a Format); by default the session's, detected from the messages until it is certain.
        Once named or detected for sure it is fixed for the session: another one is a FormatError.
        """
        started = time.perf_counter()
        self._check_open()
        if not isinstance(messages, list):
            raise InputError(f"messages must be a list of messages, not {type(messages).__name__}")
        when = time.time() if now is None else _timestamp(now)
        with self._lock:
            try:
                fmt, to_fix = self._formats.for_request(messages, format)
                if fmt is not self._format:
                    self._reset()  # caches hold another adapter's scans
                    self._format = fmt
                messages = self._compactor.request_view(
                    messages, fmt, self._message_tokens, self._append_log, self.window
                )
                prepared = self._compactor.reported(self._prepare(messages, usage, when, started))
                # Fixed only now: a request refused as bad input does not settle the format.
                if to_fix and self._formats.hold(fmt):
                    self._write_meta(format=fmt.name)
                return prepared
            except BaseException as exc:
                # The per-message caches may be half updated: rebuild them from the frozen
                # decisions next time rather than trust them.
                self._reset()
                if isinstance(exc, RecursionError):
                    raise InputError(
                        "messages nest too deeply to be budgeted (Python's recursion limit)"
                    ) from None
                raise

    def compact(self, messages: list[Any], *, format: Format | str | None = None) -> bool:
        """Summarize the history's prefix now (the manual margin); False if too little to gain.

        The next ``prepare`` of the same history sends the summary and the retained tail.
        """
        self._check_open()
        with self._lock:
            fmt, _ = self._formats.for_request(messages, format)
            return self._compactor.compact(
                messages, fmt, self._message_tokens, self._append_log, self.window, manual=True
            )

    def uncompact(self) -> bool:
        """Clear the compaction checkpoint: requests show the full history again."""
        self._check_open()
        with self._lock:
            return self._compactor.clear(self._append_log)

    def _message_tokens(self, message: Any) -> int:
        return estimate_tokens(message, model=self._profile)

    def _check_open(self) -> None:
        if self._closed:
            # Not a copy with every result inline as kept_unspillable: the caller has a bug.
            raise StoreError("the session is closed; open it again with Budget.open to go on")

    def _is_retry(self, length: int) -> bool:
        return self._requests > 0 and length == self._last_n

    def _prepare(self, messages: list[Any], usage: Any, now: float, started: float) -> Prepared:
        before = (self._requests, self._last_at, self._last_n, self._last_f)
        retry = self._is_retry(len(messages))
        if retry:
            # The last request's history again (a retry after an error or a crash, in this
            # process or after a resume): counted as that request, and it makes no new batch
            # (unless an overflow forces one), so it shows what that request showed.
            self._requests, self._last_at, self._last_n, self._last_f = self._before_last
        else:
            self._before_last = (self._requests, self._last_at, self._last_n, self._last_f)
        prev_len = len(self._inputs)
        k = self._reusable(messages)
        diverged = k < 0 or len(messages) < self._last_n
        # Until this request completes, the caches may not match the list passed last time.
        self._seen = None
        if k < 0:
            old_outputs = self._outputs
            self._reset()
            k = 0
        else:
            old_outputs = self._outputs[k:]
            self._truncate(k)
        fresh, new_results = self._scan(messages, k)
        if self._stale and k > 0:
            # A result was edited after it was decided: it is a new result, and the caches of
            # earlier requests (its staleness candidate holds the old text) must not outlive
            # its old decision. Rebuilt from the frozen decisions, as a resumed session would.
            old_outputs = self._outputs[:k] + old_outputs
            self._reset()
            k = 0
            fresh, new_results = self._scan(messages, k)
        if retry and not self._same_history(len(messages), before[3]):
            # As many messages as the last request but other ones (a history compacted to a
            # fixed size, first message plus the last N): a new request, not a retry of it.
            retry = False
            self._before_last = before
            self._requests, self._last_at, self._last_n, self._last_f = before
        wrapped = wrapped_decisions(fresh, self._envelope_ref)
        if wrapped:  # envelopes made by wrap_tool: small results already, frozen as they are
            for d in wrapped.values():
                self._ledger.record(d)
            fresh = [r for r in fresh if r.call_id not in wrapped]
        # A usage still ends an overflow streak, but anchors the estimate only if it was
        # measured on this history: not after the caller shortened or rewrote it (compaction).
        reported = self._reported_usage(usage)
        if reported is not None and not self._anchor_holds(len(messages)):
            self._log.info(
                "toolbudget.session.usage_anchor_dropped", messages=len(messages), last=self._last_n
            )
            reported = None

        self._calib, learned = learn(
            self._calib, self._cal_anchor, reported, len(messages), diverged=diverged
        )
        self._cal_anchor = None
        overflowing = self._overflows > 0
        # Results decided before (an earlier process, a rebuilt history) are staleness candidates
        # now, as they would be in a session that had gone on (no-op for known candidates).
        fresh_ids = {r.call_id for r in fresh}
        self._add_candidates(r for r in new_results if r.call_id not in fresh_ids)
        made: dict[str, Decision] = dict(wrapped)
        # ``decided`` is a live view: each pass sees the decisions of the passes before it.
        ctx = self._context(messages, k, fresh, reported, now, overflowing, made, retry=retry)
        for _name, run in PIPELINE:
            for d in run(ctx):
                made[d.call_id] = d
        for r in fresh:
            if r.call_id not in made:
                made[r.call_id] = self._default(r)
        by_id = {r.call_id: r for r in new_results}
        for call_id in made:
            if call_id not in by_id:  # a staleness candidate from an earlier request
                by_id[call_id] = self._cand_results[call_id]
        made = self._materialize(made, by_id)
        # Each decision names the text it was made for: an edit of that text is seen later
        # (and after a resume) even when it keeps the length, as a redaction does.
        # A spilled decision's ref is that hash already (the store checked it): not hashed again.
        made = {
            cid: replace(
                d, digest=d.ref if d.kind == "spilled" and d.ref else ref_for(by_id[cid].text)
            )
            for cid, d in made.items()
        }

        records: list[Mapping[str, Any]] = [d.to_record() for d in made.values()]
        self._requests += 1
        if learned:
            records.append(self._calib.to_record(self._requests))
        fingerprint = self._cum_in[max(len(messages) - _RESCAN, 0)]
        req: dict[str, Any] = {"t": "req", "n": self._requests, "at": now, "m": len(messages)}
        # What a resumed session needs to treat the next request as this one would: the
        # history it anchors a usage on, the overflow streak and the last usage seen.
        req.update(f=fingerprint, o=self._overflows)
        if self._last_usage is not None:
            req["u"] = list(self._last_usage)
        records.append(req)
        self._append_log(records)
        reports = self._apply(messages, k, made, by_id)
        self._sync_markers(messages, k)
        since = self._last_n
        self._last_at, self._last_n, self._last_f = now, len(messages), fingerprint

        trimmed_now = [d for d in made.values() if d.kind == "trimmed"]
        # A batch rewrites results the previous request showed; otherwise compare what was redone.
        stable = not trimmed_now and self._outputs[k:prev_len] == old_outputs[: prev_len - k]
        window = self.window()
        end = bisect_right(self._cand_rounds, self._cutoff(overflowing=False))
        end = max(end, self._cand_start)
        t = self._totals
        raw_after = max(self._cum_out[-1], self._anchor(reported, messages, since, out=True))
        if reported is not None and not trimmed_now:
            # What this request's growth is estimated at, for the usage its response reports.
            growth = raw_after - reported.prompt_tokens
            self._cal_anchor = Anchor(reported, growth, len(messages))
        report = Report(
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
            reclaimable_tokens=self._cand_cum[end] - self._cand_cum[self._cand_start],
            elapsed_s=time.perf_counter() - started,
        )
        self._seen = messages
        self._tt.next_request()
        return Prepared(list(self._outputs), report)

    def _reusable(self, messages: list[Any]) -> int:
        """How many leading messages keep their cached state; -1 when the history diverged."""
        n = len(self._inputs)
        if n == 0:
            return 0
        if len(messages) < n:
            return -1
        inputs = self._inputs
        if messages is self._seen and messages[n - 1] is inputs[n - 1] and messages[0] is inputs[0]:
            # The list passed last time, grown: taken as extended (see the module docstring).
            return max(n - _RESCAN, 0)
        if messages[:n] == inputs:
            # Equal by identity (or by value): the previous history is a prefix of this one.
            return max(n - _RESCAN, 0)
        return -1

    def _same_history(self, length: int, last_f: int | None) -> bool:
        """Whether this history of the last request's length is that history: its tokens but
        the last messages (which callers edit in place) are the ones the last request logged."""
        if last_f is None:
            return True  # a log written before the tokens were recorded: the length only
        return self._cum_in[max(length - _RESCAN, 0)] == last_f

    def _anchor_holds(self, length: int) -> bool:
        """Whether a usage reported now was measured on a prefix of this history: the last
        request's history (its length, and its tokens but the last messages, which callers edit
        in place) must lead this one. The same answer live and after a resume."""
        if length < self._last_n:
            return False
        if self._last_f is None:
            return True  # a log written before the tokens were recorded: the length only
        return self._cum_in[max(self._last_n - _RESCAN, 0)] == self._last_f

    def _truncate(self, k: int) -> None:
        for i in range(len(self._msgs) - 1, k - 1, -1):
            m = self._msgs[i]
            for call in m.scanned.calls:
                made = self._calls.get(call.call_id)
                if made:
                    made.pop()
                    if not made:
                        del self._calls[call.call_id]
            for r in m.results:
                raw = _call_of(r.call_id)
                left = self._occ.get(raw, 0) - 1
                if left > 0:
                    self._occ[raw] = left
                else:
                    self._occ.pop(raw, None)
                d = self._ledger.get(r.call_id)
                if d is not None:
                    self._totals.add(d, len(r.text), -1)
        del self._inputs[k:], self._outputs[k:], self._msgs[k:]
        del self._cum_out[k + 1 :], self._cum_in[k + 1 :], self._cum_pre[k + 1 :]
        if self._marks:
            for i in [i for i in self._marks if i >= k]:
                del self._marks[i]

    def _scan(self, messages: list[Any], k: int) -> tuple[list[ToolResult], list[ToolResult]]:
        """Scan messages from ``k``: register calls, place results; return (fresh, all new)."""
        fmt, cfg = self._format, self.config
        rnd = self._msgs[k - 1].round_after if k else -1
        group = self._msgs[k - 1].group_after if k else -1
        fresh: list[ToolResult] = []
        placed: list[ToolResult] = []
        self._shown_now = {}
        self._stale = False
        for i in range(k, len(messages)):
            scanned = scan_at(fmt, messages, i)
            if scanned.opens_round:
                rnd += 1
                group = i
            for call in scanned.calls:
                self._calls.setdefault(call.call_id, []).append((call.tool, group, rnd))
            results = []
            shown: dict[int, str] = {}
            for raw in scanned.results:
                placed_call = self._calls.get(raw.call_id)
                if not placed_call:
                    raise InputError(
                        f"messages[{i}] has a tool result for call id {raw.call_id!r}, "
                        "but no earlier message makes that call"
                    )
                tool, g, r_round = placed_call[-1]
                # Servers that number calls per turn repeat ids: each result answering an id is
                # its own result, keyed by how many answered that id before it.
                occ = self._occ.get(raw.call_id, 0) + 1
                self._occ[raw.call_id] = occ
                result = ToolResult(
                    call_id=_result_key(raw.call_id, occ),
                    tool=tool,
                    msg_index=i,
                    slot=raw.slot,
                    group=g,
                    round=r_round,
                    text=raw.text,
                    is_error=raw.is_error,
                    extra_chars=raw.other_blocks * cfg.image_chars,
                    order=(i << 16) + raw.slot,
                )
                results.append(result)
                self._members.setdefault(g, {})[result.call_id] = result
                prior = self._ledger.get(result.call_id)
                if prior is not None and not prior.same_text(
                    len(result.text), None if prior.digest is None else ref_for(result.text)
                ):
                    # Edited after it was decided (a redaction): a new result, decided anew.
                    self._log.warning(
                        "toolbudget.session.decision_stale",
                        call_id=result.call_id,
                        logged_chars=prior.chars,
                        chars=len(result.text),
                    )
                    prior = None
                    self._stale = True
                if prior is None:
                    fresh.append(result)
                elif prior.text is not None:
                    shown[raw.slot] = prior.text
            placed.extend(results)
            tokens = estimate_tokens(messages[i], model=self._profile, text=self._tt)
            pre = tokens
            if shown:
                # Decided in an earlier request or process: counted as it is shown.
                out = fmt.rewrite(messages[i], shown)
                pre = estimate_tokens(out, model=self._profile, text=self._tt)
                self._shown_now[i] = (out, pre)
            self._msgs.append(_Msg(scanned, tuple(results), rnd, group, tokens, 0))
            self._inputs.append(messages[i])
            self._cum_in.append(self._cum_in[-1] + tokens)
            self._cum_pre.append(self._cum_pre[-1] + pre)
        return fresh, placed

    def _reported_usage(self, usage: Any) -> ProviderUsage | None:
        if usage is None:
            return None
        u = normalize_usage(usage)
        if u is None:
            return None
        key = (u.input_tokens, u.cache_read_tokens, u.cache_write_tokens, u.output_tokens)
        if key != self._last_usage:
            # A usage we have not seen is a new successful response: the overflow streak ends.
            self._last_usage = key
            self._overflows = 0
        return u

    def _anchor(
        self, usage: ProviderUsage | None, messages: list[Any], since: int, *, out: bool
    ) -> int:
        """Last reported usage plus what was added after the first ``since`` messages (0 when
        no usage was given)."""
        if usage is None:
            return 0
        cum = self._cum_out if out else self._cum_in
        total = usage.total
        start = min(since, len(messages))
        if start < len(messages) and _role(messages[start]) == "assistant":
            # The reply is in the usage already, as its output; but it counts at no less than
            # its own estimate, since a streamed response's first event reports an output of a
            # token or so, and callers (and some recorders) keep that usage.
            if len(cum) > start + 1:
                total = usage.prompt_tokens + max(usage.output_tokens, cum[start + 1] - cum[start])
            start += 1
        if start >= len(messages):
            return total
        if len(cum) > len(messages):
            return total + cum[len(messages)] - cum[start]
        return total

    def _cutoff(self, *, overflowing: bool) -> int:
        """The newest round whose results may be trimmed."""
        current = self._msgs[-1].round_after if self._msgs else -1
        protect = 1 if overflowing else self.config.protect_rounds
        return current - protect

    def _context(
        self,
        messages: list[Any],
        k: int,
        fresh: list[ToolResult],
        reported: ProviderUsage | None,
        now: float,
        overflowing: bool,
        made: dict[str, Decision],
        *,
        retry: bool = False,
    ) -> PassContext:
        fresh_ids = {r.call_id for r in fresh}
        frozen: dict[int, int] = {}
        for g in {r.group for r in fresh}:
            frozen[g] = sum(
                d.shown_chars() + r.extra_chars
                for cid, r in self._members.get(g, {}).items()
                if cid not in fresh_ids and (d := self._ledger.get(cid)) is not None
            )
        end = bisect_right(self._cand_rounds, self._cutoff(overflowing=overflowing))
        end = max(end, self._cand_start)
        if retry and not overflowing:
            end = self._cand_start  # nothing is trimmed anew on a retry
        eligible = _Eligible(self._cands, self._cand_start, end, self._current)
        reclaim = self._cand_cum[end] - self._cand_cum[self._cand_start]
        # Messages before ``k`` as the previous request showed them, the rest as their frozen
        # decisions show them: the same figure whether the session went on or was resumed.
        full_out = self._cum_out[k] + (self._cum_pre[-1] - self._cum_pre[k])
        raw = max(full_out, self._anchor(reported, messages, self._last_n, out=False))
        estimate = self._calib.correct(raw, full_out, reported)
        first = eligible[0].result.msg_index if eligible else len(messages)
        if first < k:
            before_first = self._cum_out[first]
        else:
            before_first = self._cum_out[k] + self._cum_pre[first] - self._cum_pre[k]
        rewrite = full_out - before_first
        return PassContext(
            config=self.config,
            fresh=tuple(fresh),
            decided=MappingProxyType(made),
            group_frozen_chars=frozen,
            staleness=Staleness(
                eligible=eligible,
                reclaim_tokens=reclaim,
                rewrite_tokens=rewrite,
                estimate_tokens=estimate,
                window=self.window(),
                now=now,
                last_request_at=self._last_at,
                requests_so_far=self._requests,
                forced=overflowing,
            ),
            ref_for=ref_for,
            path_of=self._store.path_of,
            cap_scale=0.5 ** min(self._overflows, 3),
            text_tokens=self._tt,
        )

    def _current(self, r: ToolResult) -> Decision:
        """The decision ``r`` stands under: frozen, else the one no pass touched."""
        return self._ledger.get(r.call_id) or self._default(r)

    def _default(self, r: ToolResult) -> Decision:
        """The decision for a result no pass touched."""
        if not r.text and r.extra_chars == 0:
            return Decision(r.call_id, "kept", "empty", 0, text=EMPTY_TEXT, tool=r.tool)
        reason = "exempt" if self.config.cap_for(r.tool) is None else "fits"
        return Decision(r.call_id, "kept", reason, len(r.text), tool=r.tool)

    def _add_candidates(self, results: Any) -> None:
        cfg = self.config
        stub_tokens = (cfg.stub_chars + 150) // 4
        for r in results:
            if r.call_id in self._cand_results or cfg.cap_for(r.tool) is None:
                continue
            d = self._current(r)
            if d.kind not in ("kept", "spilled") or d.shown_chars() <= cfg.stale_floor:
                continue
            reclaim = self._tt(d.shown(r.text)) - stub_tokens
            if reclaim <= 0:
                continue
            if self._cand_rounds and r.round < self._cand_rounds[-1]:
                continue  # out of order (a late result for an old call): stays as it is
            self._cand_results[r.call_id] = r
            self._cands.append(_Cand(r, reclaim))
            self._cand_rounds.append(r.round)
            self._cand_cum.append(self._cand_cum[-1] + reclaim)

    def _materialize(
        self, made: dict[str, Decision], by_id: Mapping[str, ToolResult]
    ) -> dict[str, Decision]:
        """Store the bodies the decisions need, durably and as one group, before they are logged."""
        out = dict(made)
        todo: dict[str, Decision] = {}
        for call_id, d in made.items():
            if not d.needs_body or d.ref is None or d.ref in self._stored:
                continue
            prev = self._ledger.get(call_id)
            if prev is not None and prev.ref == d.ref:
                # Logged after its body was stored (or, made by wrap_tool, found stored): the
                # body is there already. A trimmed envelope's ref is its body's, not the hash
                # of the envelope, so it must not be stored again from the result's text.
                self._stored.add(d.ref)
                continue
            todo[call_id] = d
        if not todo:
            return out
        # One group commit for the request: a batch that spills hundreds of bodies pays a few
        # fsyncs, not two per body.
        got: list[str | BaseException]
        try:
            got = list(self._store.put_many([by_id[call_id].text for call_id in todo]))
        except (StoreError, OSError) as exc:
            got = [exc] * len(todo)
        if len(got) != len(todo):
            got = [StoreError(f"put_many returned {len(got)} results for {len(todo)} bodies")]
            got *= len(todo)
        for (call_id, d), ref in zip(todo.items(), got, strict=True):
            if isinstance(ref, BaseException):
                error = str(ref)
            elif ref != d.ref:
                # A store that hashes differently, or a ref that is not this text's: prepare
                # never raises for the store, so the text stays inline, whole.
                error = f"store returned ref {ref} for a body hashed {d.ref}"
            else:
                self._stored.add(ref)
                continue
            self._log.error(
                "toolbudget.spill.failed", call_id=call_id, kind=d.kind, chars=d.chars, error=error
            )
            out[call_id] = Decision(
                call_id, "kept_unspillable", "spill_failed", d.chars, tool=d.tool
            )
        return out

    def _apply(
        self,
        messages: list[Any],
        k: int,
        made: dict[str, Decision],
        by_id: Mapping[str, ToolResult],
    ) -> list[DecisionReport]:
        """Freeze the decisions and build the request-copy messages they change."""
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
                    call_id=_call_of(call_id),
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
        if any(d.kind == "trimmed" for d in made.values()):
            end = bisect_right(self._cand_rounds, self._cutoff(overflowing=self._overflows > 0))
            self._cand_start = max(self._cand_start, end)
        for i in sorted(touched_old):
            self._outputs[i] = self._render(messages[i], self._msgs[i].results)
            self._note_markers(i, messages[i])
        shown, self._shown_now = self._shown_now, {}
        counted: dict[int, int] = {}
        for i in range(k, len(messages)):
            m = self._msgs[i]
            ready = shown.get(i)
            if ready is not None and not any(r.call_id in made for r in m.results):
                # Shown as the scan rewrote it: no decision of this request touches it.
                self._outputs.append(ready[0])
                counted[i] = ready[1]
            else:
                self._outputs.append(self._render(messages[i], m.results))
            if self._outputs[i] is not messages[i] and i < len(messages) - _RESCAN:
                self._note_markers(i, messages[i])  # the last ones are scanned again next time
            for r in m.results:
                frozen = self._ledger.get(r.call_id)
                if frozen is not None:
                    self._totals.add(frozen, len(r.text), +1)
        first = min(touched_old) if touched_old else k
        del self._cum_out[first + 1 :]
        for i in range(first, len(messages)):
            m = self._msgs[i]
            out = self._outputs[i]
            if out is messages[i]:
                m.tokens_out = m.tokens_in
            else:
                tokens = counted.get(i)
                if tokens is None:
                    tokens = estimate_tokens(out, model=self._profile, text=self._tt)
                m.tokens_out = tokens
            self._cum_out.append(self._cum_out[-1] + m.tokens_out)
        self._add_candidates(r for r in by_id.values() if r.msg_index >= k)
        return reports

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
        outgoing = getattr(self._format, "outgoing", None)
        return message if outgoing is None else outgoing(message)

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

    # -- window and overflow --------------------------------------------------------------------

    def window(self) -> int:
        """The context window in tokens: setting, then discovery (kept in the session), then table."""
        if self._window is None:
            try:
                known = self._store.read_meta().get("windows")
            except (StoreError, OSError) as exc:
                # Only a cache of discovered windows: work without it rather than fail.
                self._log.error("toolbudget.session.meta_failed", error=str(exc))
                known = None
            known = known if isinstance(known, dict) else {}
            cache = {k: v for k, v in known.items() if isinstance(v, int)}
            before = dict(cache)
            self._window = resolve_window(
                self.config.model, explicit=self.config.window, discover=self._discover, cache=cache
            )
            if cache != before:
                self._write_meta(windows=cache)
            if self._window_cap is not None:
                self._window = min(self._window, self._window_cap)
        return self._window

    def _read_meta(self) -> dict[str, Any]:
        """The session metadata, or ``{}`` with an event when it cannot be read (empty, not
        JSON): it only caches what the log and the next requests give again."""
        try:
            return self._store.read_meta()
        except (StoreError, OSError) as exc:
            self._log.error("toolbudget.session.meta_failed", error=str(exc))
            return {}

    def _write_meta(self, **fields: Any) -> None:
        try:
            # _read_meta: a damaged file is replaced by a whole one rather than kept forever.
            self._store.write_meta({**self._read_meta(), **fields})
        except (StoreError, OSError) as exc:
            self._log.error("toolbudget.session.meta_failed", error=str(exc))

    def on_overflow(self, error: object = None) -> bool:
        """The provider refused the last request as too long: budget the next one harder.

        The next ``prepare`` trims everything but the last round and halves the caps; after three
        overflows in a row with no successful response between them, ContextOverflow is raised.
        ``error`` is the provider's error (an SDK exception, its JSON body, or its message); one
        that is not a prompt-too-long error is ignored and False returned.
        """
        if error is not None and not is_context_overflow(error):
            self._log.warning("toolbudget.session.overflow_ignored", error=str(error)[:200])
            return False
        with self._lock:
            self._check_open()
            limit = overflow_limit(error) if error is not None else None
            record: dict[str, Any] = {"t": "ovf", "count": self._overflows + 1}
            if limit is not None and 0 < limit < self.window():
                # The provider told us the real window: believe it from now on, also after a
                # resume (the record keeps it).
                self._window = self._window_cap = limit
                record["w"] = limit
            self._overflows += 1
            self._append_log([record])
            self._log.warning(
                "toolbudget.session.context_overflow", count=self._overflows, error=str(error)
            )
            if self._overflows >= 3:
                raise ContextOverflow(
                    f"the provider refused the prompt as too long {self._overflows} times in a "
                    f"row, even with staleness forced and caps halved: {error}"
                )
        return True

    # -- read-back ------------------------------------------------------------------------------

    def read(
        self, ref: str, *, offset: int = 0, limit: int | None = None, grep: str | None = None
    ) -> str:
        """The exact text of lines of a spilled output (the whole output when no argument)."""
        return self._reader.read(ref, offset=offset, limit=limit, grep=grep)

    def read_tool(self, format: Format | str | None = None) -> dict[str, Any]:
        """The read-back tool's definition in ``format`` (by default the session's format:
        Anthropic until one is known). A Format without ``tool_definition`` gets the Anthropic
        shape (name, description, input_schema)."""
        base = self._reader.tool_definition()
        fmt = self._format if format is None else get_format(format)
        make = getattr(fmt, "tool_definition", None)
        if make is None:
            return base
        out: dict[str, Any] = make(base["name"], base["description"], base["input_schema"])
        return out

    def handle_read_tool(self, tool_input: Mapping[str, Any] | str) -> str:
        """Run the read-back tool: a page of numbered lines with a hint to read on, or an error.

        ``tool_input`` is the call's input: a mapping (Anthropic ``input``) or the JSON string
        OpenAI formats carry in ``arguments``. :meth:`read_tool_result` also says whether the
        text is an error.
        """
        return self._reader.handle(tool_input)

    def read_tool_result(self, tool_input: Mapping[str, Any] | str) -> ReadToolResult:
        """:meth:`handle_read_tool`'s text and whether it is an error (``is_error``), to set the
        provider's error flag on the tool result (Anthropic ``is_error``, a LangChain
        ``status="error"``) without matching the ``Error:`` prefix."""
        return self._reader.result(tool_input)

    def decision(self, call_id: str) -> Decision | None:
        """The frozen decision for the first result answering a call id, if it was decided."""
        return self._ledger.get(_result_key(call_id, 1))

    # -- spilling at execution time -------------------------------------------------------------

    def spill_output(self, text: str, *, tool: str = "") -> str:
        """``text`` as a tool result should hold it: itself, or (over ``tool``'s cap) its envelope.

        The output is stored first; the envelope is the one the cap pass would show (same ref,
        same bytes), and ``prepare`` keeps it as it is. A failed spill returns ``text`` itself.
        """
        if not isinstance(text, str):
            raise InputError(f"a tool output must be a string, not {type(text).__name__}")
        self._check_open()
        limit = self.config.cap_for(tool)
        if limit is None or len(text) <= limit or self._envelope_ref(text) is not None:
            return text
        ref = ref_for(text)
        with self._lock:
            if ref not in self._stored:
                try:
                    self._store.put(text)
                except (StoreError, OSError) as exc:
                    self._log.error(
                        "toolbudget.spill.failed", tool=tool, chars=len(text), error=str(exc)
                    )
                    return text
                self._stored.add(ref)
        return self._envelope(text, ref, tool, is_error=False)

    def _envelope(self, text: str, ref: str, tool: str, *, is_error: bool) -> str:
        path = self._store.path_of(ref) if self.config.include_path else None
        return spill_envelope(self.config, text, ref=ref, tool=tool, is_error=is_error, path=path)

    @overload
    def wrap_tool(self, fn: Callable[_P, _T], *, name: str | None = None) -> Callable[_P, _T]: ...

    @overload
    def wrap_tool(
        self, fn: None = None, *, name: str | None = None
    ) -> Callable[[Callable[_P, _T]], Callable[_P, _T]]: ...

    def wrap_tool(self, fn: Any = None, *, name: str | None = None) -> Any:
        """A tool function (sync or async) whose string outputs go through :meth:`spill_output`.

        Use as ``session.wrap_tool(fn)``, ``@session.wrap_tool`` or
        ``@session.wrap_tool(name="bash")``; ``name`` is the tool's name as the model calls it
        (default: the function's name).
        """
        if fn is None:
            return lambda f: wrap_tool(f, spill=self.spill_output, name=name)
        return wrap_tool(fn, spill=self.spill_output, name=name)

    def _envelope_ref(self, text: str) -> str | None:
        """The ref of ``text`` if it is exactly an envelope of a body of this session."""
        head = envelope_ref(text)
        if head is None:
            return None
        ref, tool = head
        try:
            body = self._store.get(ref)
        except (StoreError, OSError):
            return None  # not one of ours (or unreadable): an ordinary result
        self._stored.add(ref)
        if any(text == self._envelope(body, ref, tool, is_error=e) for e in (False, True)):
            return ref
        return None


def _closed_records(
    log: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(records closed by a request or overflow record, those after the last one), ``void``
    records applied: each withdraws the unclosed decision records it names."""
    records: list[dict[str, Any]] = []
    unclosed: list[dict[str, Any]] = []
    for rec in log:
        kind = rec.get("t")
        if kind == "void":
            ids = rec.get("ids")
            if isinstance(ids, list):
                unclosed = [r for r in unclosed if r.get("t") != "d" or r.get("id") not in ids]
            continue
        unclosed.append(rec)
        if kind in ("req", "ovf"):  # a tuple: any value compares, even an unhashable one
            records += unclosed
            unclosed = []
    return records, unclosed


_REPEAT = "\x00"
"""Separates a call id from the number of a repeated result answering it in result keys."""


def _result_key(call_id: str, occurrence: int) -> str:
    """The key of the ``occurrence``-th result (from 1) answering ``call_id``: the call id
    itself for the first (what logs have always used), else ``call id + NUL + n``. A call id
    holding NUL always gets the suffix, so two keys never collide."""
    if occurrence == 1 and _REPEAT not in call_id:
        return call_id
    return f"{call_id}{_REPEAT}{occurrence}"


def _call_of(key: str) -> str:
    """The call id a result key names."""
    return key.rpartition(_REPEAT)[0] if _REPEAT in key else key


def _unnumbered(record: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k != "s"}


def _tokens_field(value: object) -> int | None:
    return value if _count(value) else None


def _usage_key(value: object) -> tuple[int, ...] | None:
    if isinstance(value, list) and len(value) == 4 and all(_count(v) for v in value):
        return tuple(value)
    return None


def _count(value: object) -> TypeGuard[int]:
    return type(value) is int and value >= 0


def _finite(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _timestamp(now: object) -> float:
    when = _finite(now)
    if when is None:
        raise InputError(f"now must be a finite number of seconds (a Unix time), not {now!r:.80}")
    return when


def _role(message: Any) -> str | None:
    return message.get("role") if isinstance(message, dict) else None
