"""Budget: one session per conversation; ``prepare`` turns a history into its request copy.

A request is a pipeline (:meth:`Budget._prepare`, read top to bottom): the format, the history
scanned from what the last request left (``budget._history``), the passes over the fresh results
with the staleness candidates (``budget._passrun``, ``budget._candidates``), the bodies stored
(``budget._bodies``), the decisions logged (``budget._journal``), the request copy made
(``budget._copies``), then the report. Each of those modules is one layer of the session's
state; this one holds the public methods.

What a request costs, and what it does not:

* Whether the previous history is a prefix of this one is checked in O(1) when the caller passes
  the same list object again (agents append to one list): same list, no shorter, and the same
  message objects at both ends of the previous history. Replacing or deleting an earlier message
  of that list in place is therefore not seen; code that edits its history must pass a new list
  (``list(messages)``), which is compared in full (by identity first, at C speed). The
  ``cache_control`` markers of earlier messages are compared where agents move them in place
  (every message that carried one, and the last few: ``RequestCopy._sync_markers``), not all of
  them.
* Token estimates of big texts are memoized by the identity of the text for two requests
  (:class:`budget._memo.TextTokens`), so re-scanned messages and staleness candidates are not
  estimated again; very large texts are estimated from samples.
* Staleness candidates are built only when a batch runs (``budget._candidates._Eligible``).
* The request copy is a new list (the caller owns it; earlier copies never change), so one
  pointer per message is copied: the only step proportional to the history, done in C.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from types import TracebackType
from typing import Any, ParamSpec, Self, TypeVar, overload

from budget._bodies import Bodies
from budget._calibration import Anchor, Calibration
from budget._compacting import Awaited, Compacting, require_list
from budget._compactor import Compactor
from budget._config import BudgetConfig, build_config
from budget._errors import ContextOverflow, InputError, StoreError
from budget._estimates_cache import load as load_estimates
from budget._history import result_key
from budget._journal import Counters, timestamp
from budget._ledger import Decision, Ledger
from budget._log import get_logger
from budget._memo import TextTokens
from budget._outcome import Outcome
from budget._overflow import is_context_overflow, overflow_limit
from budget._passrun import Turn
from budget._readback import ReadBack, ReadToolResult
from budget._report import Prepared
from budget._tokens import estimate_tokens, tokenizer_profile
from budget._view import Format
from budget._windows import resolve_window
from budget._wrap import wrap_tool
from budget.formats import ANTHROPIC, FormatChoice, get_format
from spill import FsspecStore, LocalStore, MemoryStore, Store, ref_for

__all__ = ["Budget"]

_P = ParamSpec("_P")
_T = TypeVar("_T")


class Budget(Compacting, Outcome, Bodies):
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
        if summarizer is not None and not callable(summarizer):  # else a TypeError when compacting
            raise InputError(f"summarizer must be a callable, not {summarizer!r:.80}")
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
        """Tokens of the last request's history but its last ``RESCAN`` messages, as given: what
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
        self._before_last: Counters = (0, None, 0, None)
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

        A URL (``s3://bucket/sessions/abc``, any fsspec scheme) opens a :class:`spill.FsspecStore`
        there (extra ``toolbudget[s3]``; credentials and endpoint from the environment).

        ``discover_window`` asks the provider for the model's context window (asked once; the
        answer is kept in the session). ``text_tokens`` counts texts exactly (e.g.
        :func:`budget.tiktoken_text_tokens`), in place of the model family's character weights;
        message framing is kept. A second opener of a locked session waits up to
        ``lock_timeout`` seconds, then gets SessionLocked. ``summarizer`` (see
        :mod:`budget.summarizers`) makes compaction possible (the ``compaction`` setting).
        """
        cfg = build_config(config)
        store: Store
        if isinstance(path, str) and "://" in path:  # a URL (s3://bucket/sessions/abc): fsspec
            store = FsspecStore(path, quota_bytes=cfg.quota_bytes)
        else:
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
                    self._keep_estimates()
                    self._tt.known.save()  # the estimates a resume reuses (budget/_estimates_cache)
                if self._unlogged:
                    self._append_log([])
            finally:
                self._store.close()

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
        An async summarizer needs :meth:`aprepare` (the same copy, awaited).
        """
        return self._request(messages, usage, now, format, None)

    def _request(
        self,
        messages: Sequence[Any],
        usage: Any,
        now: float | None,
        format: Format | str | None,
        awaited: Awaited | None,
        can_wait: bool = True,
    ) -> Prepared:
        """``prepare``, with the summaries ``aprepare`` awaited (see ``budget._compacting``)."""
        started = time.perf_counter()
        self._check_open()
        messages = require_list(messages)
        when = time.time() if now is None else timestamp(now)
        with self._lock:
            try:
                fmt, to_fix = self._formats.for_request(messages, format)
                if fmt is not self._format:
                    self._reset()  # caches hold another adapter's scans
                    self._format = fmt
                budget = partial(self._prepare, usage=usage, now=when, started=started)
                prepared = self._compacted(messages, fmt, budget, awaited, can_wait)
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

    def _message_tokens(self, message: Any) -> int:
        return estimate_tokens(message, model=self._profile)

    def _check_open(self) -> None:
        if self._closed:
            # Not a copy with every result inline as kept_unspillable: the caller has a bug.
            raise StoreError("the session is closed; open it again with Budget.open to go on")

    def _is_retry(self, length: int) -> bool:
        return self._requests > 0 and length == self._last_n

    def _prepare(self, messages: list[Any], usage: Any, now: float, started: float) -> Prepared:
        """One request, its format set: scan → passes → store → log → apply → report."""
        before = (self._requests, self._last_at, self._last_n, self._last_f)
        retry = self._is_retry(len(messages))
        self._roll_back(before, retry=retry)
        prev_len = len(self._inputs)
        scan = self._scan_history(messages)
        retry = retry and self._still_a_retry(len(messages), before)
        fresh, wrapped = self._take_wrapped(scan.fresh)
        reported = self._usage_for(usage, len(messages))
        learned = self._learn(reported, len(messages), diverged=scan.diverged)
        turn = Turn(messages, scan.k, fresh, reported, now, retry)
        made = self._decide(turn, scan.results, wrapped)
        by_id = self._results_of(made, scan.results)
        made = self._digested(self._materialize(made, by_id), by_id)
        fingerprint = self._log_request(made, len(messages), now, learned=learned)
        reports = self._apply(messages, scan.k, made, by_id)
        self._sync_markers(messages, scan.k)
        since = self._last_n
        self._last_at, self._last_n, self._last_f = now, len(messages), fingerprint
        report = self._report(turn, made, reports, since, (scan, prev_len), started)
        self._seen = messages
        self._tt.next_request()
        return Prepared(list(self._outputs), report)

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

    def on_overflow(self, error: object = None) -> bool:
        """The provider refused the last request as too long: budget the next one harder.

        The next ``prepare`` trims everything but the last round and halves the caps; at the
        third overflow in a row (no successful response between them) trimming is exhausted:
        with a summarizer (and compaction not ``"off"``) the next ``prepare`` compacts first,
        once per streak; ContextOverflow is raised when nothing is left to do.
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
            if self._overflows >= 3 and not self._schedule_reactive():
                raise ContextOverflow(
                    f"the provider refused the prompt as too long {self._overflows} times in a "
                    f"row, even with staleness forced, caps halved and compaction where a "
                    f"summarizer allows it: {error}"
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
        Anthropic until one is known); :meth:`Format.tool_definition` gives the Anthropic shape
        (name, description, input_schema) unless the format says otherwise."""
        base = self._reader.tool_definition()
        fmt = self._format if format is None else get_format(format)
        return fmt.tool_definition(base["name"], base["description"], base["input_schema"])

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
        """The frozen decision for the first result answering ``call_id`` (a string), if decided."""
        if not isinstance(call_id, str):
            raise InputError(f"call_id must be a tool call's id (a string), not {call_id!r:.80}")
        return self._ledger.get(result_key(call_id, 1))

    # -- spilling at execution time -------------------------------------------------------------

    def spill_output(self, text: str, *, tool: str = "") -> str:
        """``text`` as a tool result should hold it: itself, or (over ``tool``'s cap) its envelope.

        The output is stored first; the envelope is the one the cap pass would show (same ref,
        same bytes), and ``prepare`` keeps it as it is. A failed spill returns ``text`` itself.
        """
        if not isinstance(text, str):
            raise InputError(f"a tool output must be a string, not {type(text).__name__}")
        if not isinstance(tool, str):
            raise InputError(f"tool must be the tool's name (a string), not {tool!r:.80}")
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
