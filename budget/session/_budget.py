"""Budget: one session per conversation; ``prepare`` turns a history into its request copy.

``Budget`` is the public facade and only delegates: its turns
(:class:`budget.session._requests.Requests`: the lock, the open state, the format, the request,
compaction's entry points, an overflow, the close) hold the session's parts
(:class:`budget.session._parts.Parts`: the journal, the ledger, the bodies, the counters, the
estimator, the history cache, the request copy, the staleness candidates) and compaction's turn
(:class:`budget.compaction._compacting.Compacting`); the read-back is
:class:`budget._readback.ReadBack`'s. A request is :class:`budget.session._pipeline.Pipeline`'s
``run``; what it costs, and what it does not, is told there."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from types import TracebackType
from typing import Any, ParamSpec, Self, TypeVar, overload

from budget._config import BudgetConfig, build_config
from budget._errors import InputError
from budget._ledger import Decision
from budget._log import get_logger
from budget._readback import ReadBack, ReadToolResult
from budget._report import Prepared
from budget._view import Format
from budget._wrap import wrap_tool
from budget.compaction._compactor import Compactor
from budget.formats import get_format
from budget.session._keys import as_called, result_key
from budget.session._requests import Requests, check_arguments, open_store
from budget.tokens._overflow import is_context_overflow
from spill import MemoryStore, Store

__all__ = ["Budget"]

_P = ParamSpec("_P")
_T = TypeVar("_T")


class Budget:
    """A conversation's budgeting session: frozen decisions, a store, the passes. ``with`` or
    ``async with`` closes it (:meth:`close`) when the block ends."""

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
        check_arguments(store, summarizer)
        self.config = build_config(config)
        self._store = store
        self._log = log = get_logger("toolbudget")
        self._reader = ReadBack(store, self.config)
        self._compactor = Compactor(self.config, summarizer, log)
        self._turns = Requests.build(
            self.config, store, log, self._compactor, format, discover_window, text_tokens
        )

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
        store = open_store(path, cfg, lock_timeout)
        try:
            return cls(store, cfg, format=format, discover_window=discover_window,
                       text_tokens=text_tokens, summarizer=summarizer)  # fmt: skip
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
        return cls(MemoryStore(), config, format=format, discover_window=discover_window,
                   text_tokens=text_tokens, summarizer=summarizer)  # fmt: skip

    def close(self) -> None:
        """Log what could not be logged yet, then release the session directory (its lock).

        The session is not usable afterwards.
        """
        self._turns.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self.close)  # it may flush the log: file I/O, off the loop

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
        return self._turns.request(messages, usage, now, format, None)

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
        return await self._turns.compacting.awaiting(
            partial(self._turns.request, messages, usage, when, format)
        )

    # -- compaction -----------------------------------------------------------------------------

    def compact(self, messages: list[Any], *, format: Format | str | None = None) -> bool:
        """Summarize the history's prefix now (the manual margin); False if too little to gain.

        The next ``prepare`` of the same history sends the summary and the retained tail. An
        async summarizer needs :meth:`acompact`.
        """
        return self._turns.compact_now(messages, format, None)

    async def acompact(self, messages: list[Any], *, format: Format | str | None = None) -> bool:
        """:meth:`compact` for an async summarizer (a sync one runs in a worker thread)."""
        return await self._turns.compacting.awaiting(
            partial(self._turns.compact_now, messages, format)
        )

    def uncompact(self) -> bool:
        """Clear the compaction checkpoint: requests show the full history again."""
        return self._turns.uncompact()

    # -- window and overflow --------------------------------------------------------------------

    def window(self) -> int:
        """The context window in tokens: setting, then discovery (kept in the session), then table."""
        return self._turns.parts.estimator.window()

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
        self._turns.overflow(error)
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
        fmt = self._turns.formats.known() if format is None else get_format(format)
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

    def note_readback(self, ref: str | None = None) -> None:
        """Count one read of hidden output the history will not show, of the hidden result
        ``ref`` names when given (InputError if none; a result read twice: one needed twice)."""
        self._turns.note_readback(ref)

    def decision(self, call_id: str) -> Decision | None:
        """The frozen decision for the first result answering ``call_id`` (a string), if decided."""
        if not isinstance(call_id, str):
            raise InputError(f"call_id must be a tool call's id (a string), not {call_id!r:.80}")
        return as_called(self._turns.parts.ledger.get(result_key(call_id, 1)), call_id)

    # -- spilling at execution time -------------------------------------------------------------

    def spill_output(self, text: str, *, tool: str = "") -> str:
        """``text`` as a tool result should hold it: itself, or (over ``tool``'s cap) its envelope.

        The output is stored first; the envelope is the one the cap pass would show (same ref,
        same bytes), and ``prepare`` keeps it as it is. A failed spill returns ``text`` itself,
        as does an output its envelope would not be shorter than (the cap pass keeps it whole).
        """
        if not isinstance(text, str):
            raise InputError(f"a tool output must be a string, not {type(text).__name__}")
        if not isinstance(tool, str):
            raise InputError(f"tool must be the tool's name (a string), not {tool!r:.80}")
        self._turns.check_open()
        return self._turns.parts.bodies.spill(text, tool, self._turns.lock)

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
