"""Budget: one session per conversation; ``prepare`` turns a history into its request copy.

``Budget`` holds the session's parts (:class:`budget.session._parts.Parts`: the journal, the
ledger, the bodies, the counters, the estimator, the history cache, the request copy, the
staleness candidates) and compaction's turn (:class:`budget.compaction._compacting.Compacting`),
and gives them one public interface. A request is :class:`budget.session._pipeline.Pipeline`'s
``run``; what it costs, and what it does not, is told there.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from types import TracebackType
from typing import Any, ParamSpec, Self, TypeVar, overload

from budget._config import BudgetConfig, build_config
from budget._errors import InputError, StoreError
from budget._ledger import Decision
from budget._log import get_logger
from budget._readback import ReadBack, ReadToolResult
from budget._report import Prepared
from budget._view import Format
from budget._wrap import wrap_tool
from budget.compaction._compacting import Awaited, Compacting, require_list
from budget.compaction._compactor import Compactor
from budget.formats import ANTHROPIC, FormatChoice, get_format
from budget.session._keys import result_key
from budget.session._parts import Parts
from budget.session._pipeline import Pipeline
from budget.session._records import timestamp
from budget.tokens._overflow import is_context_overflow, overflow_limit
from budget.tokens._tokens import estimate_tokens, tokenizer_profile
from spill import FsspecStore, LocalStore, MemoryStore, Store

__all__ = ["Budget"]

_P = ParamSpec("_P")
_T = TypeVar("_T")


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
        if summarizer is not None and not callable(summarizer):  # else a TypeError when compacting
            raise InputError(f"summarizer must be a callable, not {summarizer!r:.80}")
        self._store = store
        self._closed = False
        self._lock = threading.RLock()
        self._log = log = get_logger("toolbudget")
        self._reader = ReadBack(store, self.config)
        # The model's tokenizer family sets text density and framing for every estimate.
        self._profile = tokenizer_profile(self.config.model)
        self._compactor = Compactor(self.config, summarizer, log)
        self._parts = Parts.build(
            self.config, store, log, self._profile, self._compactor, discover_window, text_tokens
        )
        self._compacting = Compacting(
            self.config,
            self._compactor,
            log,
            message_tokens=self._message_tokens,
            window=self._parts.estimator.window,
            as_sent=self._parts.copies.as_sent,
            append_log=self._parts.journal.append,
            keep_text=self._parts.bodies.keep_text,
            reactive=(self._parts.reactive.at, self._parts.reactive.due),
        )
        self._pipeline = Pipeline(
            self._parts, self._compacting.learn_header, self._compacting.header
        )
        # The format: given, remembered by a resumed session, or detected on the first request.
        self._formats = FormatChoice.start(format, self._parts.journal.read_meta().get("format"))
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
                known = self._parts.text_tokens.known
                if known is not None:
                    self._pipeline.keep_estimates(known)
                    known.save()  # the estimates a resume reuses (budget/tokens/_estimates_cache.py)
                if self._parts.journal.queued:
                    self._parts.journal.append([])
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
        """``prepare``, with the summaries ``aprepare`` awaited (see ``budget.compaction._compacting``)."""
        started = time.perf_counter()
        self._check_open()
        messages = require_list(messages)
        when = time.time() if now is None else timestamp(now)
        with self._lock:
            try:
                fmt, to_fix = self._formats.for_request(messages, format)
                if fmt is not self._format:
                    self._pipeline.reset()  # caches hold another adapter's scans
                    self._format = fmt
                budget = partial(self._prepare, usage=usage, now=when, started=started)
                prepared = self._compacting.compacted(messages, fmt, budget, awaited, can_wait)
                # Fixed only now: a request refused as bad input does not settle the format.
                if to_fix and self._formats.hold(fmt):
                    self._parts.journal.write_meta(format=fmt.name)
                return prepared
            except BaseException as exc:
                # The per-message caches may be half updated: rebuild them from the frozen
                # decisions next time rather than trust them.
                self._pipeline.reset()
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

    def _prepare(self, messages: list[Any], usage: Any, now: float, started: float) -> Prepared:
        """One request, its format set (see ``budget.session._pipeline``)."""
        return self._pipeline.run(messages, usage, now, started, self._format)

    async def aprepare(
        self,
        messages: Sequence[Any],
        *,
        usage: Any = None,
        now: float | None = None,
        format: Format | str | None = None,
    ) -> Prepared:
        """:meth:`prepare` for an async summarizer: the same copy, byte for byte.

        The budgeting runs in a worker thread (it may write spilled bodies); a summary it
        needs is awaited on the event loop (a sync summarizer runs in a worker thread).
        """
        when = time.time() if now is None else now
        return await self._compacting.awaiting(
            partial(self._request, messages, usage, when, format)
        )

    # -- compaction -----------------------------------------------------------------------------

    def compact(self, messages: list[Any], *, format: Format | str | None = None) -> bool:
        """Summarize the history's prefix now (the manual margin); False if too little to gain.

        The next ``prepare`` of the same history sends the summary and the retained tail. An
        async summarizer needs :meth:`acompact`.
        """
        return self._compact_now(messages, format, None)

    async def acompact(self, messages: list[Any], *, format: Format | str | None = None) -> bool:
        """:meth:`compact` for an async summarizer (a sync one runs in a worker thread)."""
        return await self._compacting.awaiting(partial(self._compact_now, messages, format))

    def _compact_now(
        self,
        messages: list[Any],
        format: Format | str | None,
        awaited: Awaited | None,
        can_wait: bool = True,
    ) -> bool:
        self._check_open()
        messages = require_list(messages)
        with self._lock:
            fmt, _ = self._formats.for_request(messages, format)
            with self._compacting.summaries(awaited, can_wait):
                return self._compacting.compact(messages, fmt, manual=True)

    def uncompact(self) -> bool:
        """Clear the compaction checkpoint: requests show the full history again."""
        self._check_open()
        with self._lock:
            return self._compacting.clear()

    # -- window and overflow --------------------------------------------------------------------

    def window(self) -> int:
        """The context window in tokens: setting, then discovery (kept in the session), then table."""
        return self._parts.estimator.window()

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
            tally = self._parts.tally
            record: dict[str, Any] = {"t": "ovf", "count": tally.overflows + 1}
            if self._parts.estimator.stated(limit):
                # The provider told us the real window: believed from now on, also after a
                # resume (the record keeps it).
                record["w"] = limit
            tally.overflows += 1
            reactive = self._compacting.mark_reactive(record, tally.overflows)
            self._parts.journal.append([record])
            self._log.warning(
                "toolbudget.session.context_overflow", count=tally.overflows, error=str(error)
            )
            self._compacting.react(reactive, tally.overflows, error)
        return True

    # -- read-back ------------------------------------------------------------------------------

    def read(
        self, ref: str, *, offset: int = 0, limit: int | None = None, grep: str | None = None
    ) -> str:
        """The exact text of lines of a spilled output (the whole output when no argument)."""
        return self._reader.read(ref, offset=offset, limit=limit, grep=grep)

    def read_tool(self, format: Format | str | None = None) -> dict[str, Any]:
        """The read-back tool's definition in ``format``, by default the session's (named at open
        or detected for sure; never guessed: FormatUnknown before). The Anthropic shape (name,
        description, input_schema) unless the format's ``tool_definition`` says otherwise."""
        base = self._reader.tool_definition()
        fmt = self._formats.known() if format is None else get_format(format)
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
        return self._parts.ledger.get(result_key(call_id, 1))

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
        return self._parts.bodies.spill(text, tool, self._lock)

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
