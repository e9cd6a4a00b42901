"""Compaction on the request path: when ``prepare`` compacts, and the async ``aprepare``.

``Budget`` gets from :class:`Compacting` the compaction half of its public methods. The state
(checkpoint, breaker) is the :class:`budget._compactor.Compactor`'s; this layer decides when it
runs:

* **Proactively** (``compaction="auto"``), after the request is budgeted: when the report's
  ``tokens_after`` — the anchored estimate (the usage reported with this request plus the
  calibrated estimate of what was added since, ``budget._calibration``) of the copy as it will be
  sent — or the copy's messages plus the header the compactor learned from earlier reports
  (system prompt, tool definitions), whichever is more, exceeds ``window -
  compact_reserve_tokens - compact_margin_tokens``, those scaled to half of a small window
  (:meth:`budget._compactor.Compactor.due`). A compaction that runs makes the copy again from
  the compacted view. Measuring the budgeted copy, not the raw history, matters: a history
  whose large results were spilled is many times its copy, and a usage also counts what the
  messages do not show.
* **Reactively**: after the last trim level of :meth:`Budget.on_overflow` (the third
  prompt-too-long error in a row), the next request compacts first, once per overflow streak,
  when a summarizer is set and compaction is not ``"off"``. ContextOverflow comes only when that
  is not possible or was already done in the streak.

An async summarizer (a coroutine function, or one returning an awaitable) is awaited by
:meth:`Compacting.aprepare` / :meth:`Compacting.acompact`: the request runs as ``prepare`` does
(in a worker thread: it may write files), and when it reaches the summarizer it stops, the
summary is awaited on the event loop, and the request runs again with the summary known, so
both paths give the same bytes. What the sync path does with a summary holds here too: the
retry without the oldest rounds when it is refused as too long (each retry another awaited
summary), ``compact_timeout_s`` (a SummaryTimeout), the failures counted towards the breaker.
The sync ``prepare`` / ``compact`` refuse an async summarizer
with an InputError naming ``aprepare`` rather than counting it as a failed summary.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from budget._compactor import Append, Compactor
from budget._config import BudgetConfig
from budget._errors import ContextOverflow, InputError, SummaryTimeout
from budget._report import Prepared, Report
from budget._view import Format
from budget.formats import FormatChoice

__all__ = ["Awaited", "Compacting"]

Key = tuple[int, ...]
Awaited = dict[Key, tuple[list[Any], "str | Exception"]]

MAX_AWAITS = 8
"""Summaries one ``aprepare`` awaits at most: a compaction and its retries without the oldest
rounds need a handful; past this the request goes on without compaction (a failed one)."""


class _Pending(BaseException):
    """A summary ``aprepare`` must await before the request can go on (control flow, not an
    error: a BaseException, so the compactor's failure counting does not take it)."""

    def __init__(self, part: list[Any], summarizer: Callable[[Sequence[Any]], Any]) -> None:
        super().__init__("a summary to await")
        self.part = part
        self.summarizer = summarizer
        """The caller's own: the compactor's may be another request's stand-in meanwhile."""


class _AsyncInSync(BaseException):
    """The summarizer gave an awaitable inside the sync ``prepare`` or ``compact``."""


def _key(part: Sequence[Any]) -> Key:
    # By identity: the part is a slice of the view, whose messages are the caller's objects
    # and the checkpoint's summary message, alive for the whole aprepare (kept in Awaited).
    return tuple(id(m) for m in part)


def _discard(awaitable: object) -> None:
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()  # a coroutine never awaited would warn at garbage collection


class _Summaries:
    """The summarizer the compactor calls during one request.

    In ``prepare``: the caller's own, refusing an awaitable. In ``aprepare``: the summaries
    awaited so far, by the messages they summarize; another part stops the request
    (:class:`_Pending`) so that it can be awaited, unless ``can_wait`` is spent.
    """

    def __init__(
        self, fn: Callable[[Sequence[Any]], Any], awaited: Awaited | None, can_wait: bool
    ) -> None:
        self.fn = fn
        self.awaited = awaited
        self.can_wait = can_wait
        # Each run of one aprepare replays the summaries awaited so far, in order: all but the
        # last were delivered in an earlier run, where their retry was already reported.
        self._replayed = set(list(awaited or {})[:-1])

    def replays(self, part: Sequence[Any]) -> bool:
        """Whether ``part``'s summary was delivered in an earlier run of this request (the
        compactor reports a retry once, not once per run)."""
        return _key(part) in self._replayed

    def __call__(self, part: Sequence[Any]) -> Any:
        if self.awaited is None:
            out = self.fn(part)
            if inspect.isawaitable(out):
                _discard(out)
                raise _AsyncInSync
            return out
        got = self.awaited.get(_key(part))
        if got is None:
            if not self.can_wait:
                raise InputError(f"aprepare awaited {MAX_AWAITS} summaries for one request")
            raise _Pending(list(part), self.fn)
        if isinstance(got[1], Exception):
            raise got[1]
        return got[1]


def require_list(messages: object) -> list[Any]:
    """``messages``, refused unless it is a list (``prepare``, ``compact``): a generator would be
    spent by the first pass over it, a tuple could not be told from a message."""
    if not isinstance(messages, list):
        raise InputError(f"messages must be a list of messages, not {type(messages).__name__}")
    return messages


class Compacting:
    """Compaction's turn in a request, ``compact`` / ``uncompact`` and their async forms."""

    config: BudgetConfig
    window: Callable[[], int]
    _compactor: Compactor
    _formats: FormatChoice
    _log: Any
    _overflows: int
    _reactive_at: int | None = None
    """The overflow count a reactive compaction was scheduled at (one per overflow streak)."""
    _reactive_due: bool = False
    """A reactive compaction is scheduled for the next request."""
    _append_log: Append
    _check_open: Callable[[], None]
    _message_tokens: Callable[[Any], int]
    _as_sent: Callable[[list[Any]], list[Any]]
    _keep_text: Callable[[str], str | None]
    _prepare: Callable[[list[Any], Any, float, float], Prepared]
    _request: Callable[..., Prepared]
    _lock: Any

    # -- in a request -----------------------------------------------------------------------------

    def _compacted(
        self,
        messages: list[Any],
        fmt: Format,
        budget: Callable[[list[Any]], Prepared],
        awaited: Awaited | None,
        can_wait: bool = True,
    ) -> Prepared:
        """The request copy of ``messages`` (``budget`` makes one from a view), compacted when
        it is due: reactively before budgeting, proactively after (see the module doc)."""
        comp = self._compactor
        with self._summaries(awaited, can_wait):
            compacted = False
            if self._reactive_due:
                compacted = self._compact(messages, fmt, manual=False)
                self._reactive_due = False  # after: a pending summary keeps it due for the rerun
            prepared = budget(comp.view(messages, fmt))
            due = not compacted and comp.due(prepared, self._message_tokens)
            if due and self._compact(messages, fmt, manual=False):
                prepared = budget(comp.view(messages, fmt))
        return comp.reported(prepared)

    def _learn_header(self, report: Report, copy: list[Any]) -> None:
        """Learn the compaction header from a request as it is made (before it is logged)."""
        self._compactor.learn_header(report, copy, self._message_tokens)

    def _compact(self, messages: list[Any], fmt: Format, *, manual: bool) -> bool:
        return self._compactor.compact(
            messages,
            fmt,
            self._message_tokens,
            self._append_log,
            self.window,
            self._as_sent,
            manual=manual,
            keep=self._keep_text,
        )

    @contextmanager
    def _summaries(self, awaited: Awaited | None, can_wait: bool = True) -> Iterator[None]:
        """The compactor's summarizer as this request calls it (see :class:`_Summaries`)."""
        comp = self._compactor
        fn = comp.summarizer
        if fn is None:
            yield
            return
        # Under the session's lock (held by the caller): no other request sees the swap.
        comp.summarizer = _Summaries(fn, awaited, can_wait)
        try:
            yield
        except _AsyncInSync:
            raise InputError(
                "the summarizer is async (it returned an awaitable): call aprepare() / "
                "acompact(), which await it, in place of prepare() / compact()"
            ) from None
        finally:
            comp.summarizer = fn

    def _can_compact_reactively(self) -> bool:
        """After the last trim level: whether a compaction can be scheduled for the next
        request; False when there is nothing left to do (no summarizer, compaction off, the
        breaker open, or one already done in this overflow streak)."""
        comp = self._compactor
        if comp.summarizer is None or self.config.compaction == "off" or comp.breaker_open:
            return False
        # The streak went on after its compaction: nothing left to do.
        return self._reactive_at is None or self._overflows <= self._reactive_at

    def _mark_reactive(self, record: dict[str, Any]) -> bool:
        """Whether the overflow ``record`` (not logged yet) schedules a compaction for the next
        request: at the third overflow in a row when one can run. It then says so (``"rc"``):
        a resumed session runs it too (``budget._resumed``)."""
        reactive = self._overflows >= 3 and self._can_compact_reactively()
        if reactive:
            record["rc"] = True
        return reactive

    def _react(self, reactive: bool, error: object) -> None:
        """After the overflow record is logged: schedule the compaction it marked, or raise
        ContextOverflow when trimming is exhausted and no compaction can run."""
        if reactive:
            self._reactive_at, self._reactive_due = self._overflows, True
            self._log.warning("toolbudget.session.compaction_reactive", overflows=self._overflows)
        elif self._overflows >= 3:
            raise ContextOverflow(
                f"the provider refused the prompt as too long {self._overflows} times in a "
                f"row, even with staleness forced, caps halved and compaction where a "
                f"summarizer allows it: {error}"
            )

    # -- the public methods -----------------------------------------------------------------------

    def compact(self, messages: list[Any], *, format: Format | str | None = None) -> bool:
        """Summarize the history's prefix now (the manual margin); False if too little to gain.

        The next ``prepare`` of the same history sends the summary and the retained tail. An
        async summarizer needs :meth:`acompact`.
        """
        return self._compact_now(messages, format, None)

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
            with self._summaries(awaited, can_wait):
                return self._compact(messages, fmt, manual=True)

    def uncompact(self) -> bool:
        """Clear the compaction checkpoint: requests show the full history again."""
        self._check_open()
        with self._lock:
            return self._compactor.clear(self._append_log)

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
        awaited: Awaited = {}
        while True:
            can_wait = len(awaited) < MAX_AWAITS
            try:
                return await asyncio.to_thread(
                    self._request, messages, usage, when, format, awaited, can_wait
                )
            except _Pending as pending:
                await _await_summary(pending, awaited, self.config)

    async def acompact(self, messages: list[Any], *, format: Format | str | None = None) -> bool:
        """:meth:`compact` for an async summarizer (a sync one runs in a worker thread)."""
        awaited: Awaited = {}
        while True:
            can_wait = len(awaited) < MAX_AWAITS
            try:
                return await asyncio.to_thread(
                    self._compact_now, messages, format, awaited, can_wait
                )
            except _Pending as pending:
                await _await_summary(pending, awaited, self.config)


async def _await_summary(pending: _Pending, awaited: Awaited, config: BudgetConfig) -> None:
    """The summary of ``pending.part`` (or the error the summarizer raised), into ``awaited``.

    Bounded by ``compact_timeout_s`` as the sync path is: past it the summary is a
    SummaryTimeout (the compaction fails and counts towards the breaker). A coroutine is
    cancelled; a sync summarizer runs in a daemon thread of its own, abandoned when it hangs
    (not ``asyncio.to_thread``: the loop's executor would keep ``asyncio.run`` waiting for it).
    """
    fn, part = pending.summarizer, pending.part
    timeout = config.compact_timeout_s
    result: str | Exception
    try:
        async with asyncio.timeout(timeout):
            if inspect.iscoroutinefunction(inspect.unwrap(fn)):
                out = fn(part)
            else:
                out = await _in_thread(fn, part)
            if inspect.isawaitable(out):
                out = await out
        result = out
    except TimeoutError:
        result = SummaryTimeout(f"the summarizer did not return within {timeout:g} s")
    except Exception as exc:  # counted by the compactor when the request runs again
        result = exc
    awaited[_key(part)] = (part, result)


async def _in_thread(fn: Callable[[Sequence[Any]], Any], part: list[Any]) -> Any:
    """``fn(part)`` in a daemon thread, awaited without blocking the event loop."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()

    def settle(out: Any, exc: BaseException | None) -> None:
        if done.done():  # cancelled by the timeout: the late result is dropped
            return
        if exc is None:
            done.set_result(out)
        else:
            done.set_exception(exc)

    def run() -> None:
        try:
            out, exc = fn(part), None
        except BaseException as error:  # handed to the awaiting task
            out, exc = None, error
        with suppress(RuntimeError):  # the loop closed while the summarizer ran
            loop.call_soon_threadsafe(settle, out, exc)

    context = contextvars.copy_context()  # as asyncio.to_thread does
    threading.Thread(
        target=context.run, args=(run,), name="toolbudget-summarizer", daemon=True
    ).start()
    return await done
