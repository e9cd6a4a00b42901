"""Compaction on the request path: when ``prepare`` compacts, and the async ``aprepare``.

``Budget`` holds a :class:`Compacting` for the compaction half of its public methods. The state
(checkpoint, breaker) is the :class:`budget.compaction._compactor.Compactor`'s; this part decides
when it runs:

* **Proactively** (``compaction="auto"``), after the request is budgeted: when the report's
  ``tokens_after`` — the anchored estimate (the usage reported with this request plus the
  calibrated estimate of what was added since, ``budget.tokens._calibration``) of the copy as it will be
  sent — or the copy's messages plus the header the compactor learned from earlier reports
  (system prompt, tool definitions), whichever is more, exceeds ``window -
  compact_reserve_tokens - compact_margin_tokens``, those scaled to half of a small window
  (:meth:`budget.compaction._compactor.Compactor.due`). A compaction that runs makes the copy again from
  the compacted view. Measuring the budgeted copy, not the raw history, matters: a history
  whose large results were spilled is many times its copy, and a usage also counts what the
  messages do not show.
* **Reactively**: after the last trim level of :meth:`Budget.on_overflow` (the third
  prompt-too-long error in a row), the next request compacts first, once per overflow streak,
  when a summarizer is set and compaction is not ``"off"``. ContextOverflow comes only when that
  is not possible or was already done in the streak.

An async summarizer (a coroutine function, or one returning an awaitable) is awaited by
:meth:`budget.Budget.aprepare` / :meth:`budget.Budget.acompact` (:meth:`Compacting.awaiting`): the request runs as ``prepare`` does
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
import copy
import inspect
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

from budget._config import BudgetConfig
from budget._errors import ContextOverflow, InputError, SummaryTimeout
from budget._report import Prepared
from budget._view import Format
from budget.compaction._compactor import Append, Compactor, Keep

__all__ = ["Awaited", "Compacting"]

Key = tuple[int, ...]
Awaited = dict[Key, tuple[list[Any], "str | Exception"]]
_T = TypeVar("_T")

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


def _given(part: Sequence[Any]) -> list[Any]:
    """What a summarizer is handed: a deep copy of each message of ``part``, which are the
    caller's own objects (a summarizer that trims what it reads must not edit the caller's
    history); a message that cannot be copied (a field holding a lock, a client) as it is, as
    before: a summary is worth more than that guard."""
    out = []
    for message in part:
        try:
            out.append(copy.deepcopy(message))
        except Exception:  # deepcopy raises whatever a field's __reduce__ raises
            out.append(message)
    return out


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
            out = self.fn(_given(part))
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
    """Compaction's turn in a request: whether it compacts now (reactively, proactively), the
    summarizer a request calls, and the async loop ``aprepare`` / ``acompact`` run in.

    Its state is the reactive schedule (one compaction per overflow streak); the checkpoint
    and breaker are the :class:`Compactor`'s. It works through the callables it is built with:
    a message's tokens, the window, the copy as sent and the log's append.
    """

    def __init__(
        self,
        config: BudgetConfig,
        compactor: Compactor,
        log: Any,
        *,
        message_tokens: Callable[[Any], int],
        window: Callable[[], int],
        as_sent: Callable[[list[Any]], list[Any]],
        append_log: Append,
        keep_text: Keep = lambda text: None,
        reactive: tuple[int | None, bool] = (None, False),
    ) -> None:
        self._config, self._compactor, self._log = config, compactor, log
        self._message_tokens, self._window = message_tokens, window
        self._as_sent, self._append_log, self._keep_text = as_sent, append_log, keep_text
        self._reactive_at, self._reactive_due = reactive
        """The overflow count a reactive compaction was scheduled at (one per overflow streak),
        and whether one is scheduled for the next request: as the log left them (an overflow
        record marks the one that scheduled it, ``"rc"``)."""

    def compacted(
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
        with self.summaries(awaited, can_wait):
            compacted = False
            if self._reactive_due:
                compacted = self.compact(messages, fmt, manual=False)
                self._reactive_due = False  # after: a pending summary keeps it due for the rerun
            prepared = budget(comp.view(messages, fmt))
            due = not compacted and comp.due(prepared, self._message_tokens)
            if due and self.compact(messages, fmt, manual=False):
                prepared = budget(comp.view(messages, fmt))
        return comp.reported(prepared)

    def compact(self, messages: list[Any], fmt: Format, *, manual: bool) -> bool:
        """Compact ``messages`` now (``manual``: the caller's ``compact``, its own margin)."""
        return self._compactor.compact(
            messages,
            fmt,
            self._message_tokens,
            self._append_log,
            self._window,
            self._as_sent,
            manual=manual,
            keep=self._keep_text,
        )

    def clear(self) -> bool:
        """Clear the compaction checkpoint (``uncompact``)."""
        return self._compactor.clear(self._append_log)

    @contextmanager
    def summaries(self, awaited: Awaited | None, can_wait: bool = True) -> Iterator[None]:
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

    def mark_reactive(self, record: dict[str, Any], overflows: int) -> bool:
        """Whether the overflow ``record`` (not logged yet; the ``overflows``-th in a row)
        schedules a compaction for the next request: at the third when one can run (a
        summarizer, compaction not off, the breaker closed, none done yet in this streak). It
        then says so (``"rc"``), so a resumed session runs it too."""
        comp = self._compactor
        if overflows < 3 or comp.summarizer is None or self._config.compaction == "off":
            return False
        if comp.breaker_open or (self._reactive_at is not None and overflows > self._reactive_at):
            return False  # the streak went on after its compaction: nothing left to do
        record["rc"] = True
        return True

    def react(self, reactive: bool, overflows: int, error: object) -> None:
        """After the overflow record is logged: schedule the compaction it marked, or raise
        ContextOverflow when trimming is exhausted and no compaction can run."""
        if reactive:
            self._reactive_at, self._reactive_due = overflows, True
            self._log.warning("toolbudget.session.compaction_reactive", overflows=overflows)
        elif overflows >= 3:
            raise ContextOverflow(
                f"the provider refused the prompt as too long {overflows} times in a row, even "
                f"with staleness forced, caps halved and compaction where a summarizer allows "
                f"it: {error}"
            )

    def header(self) -> int:
        """The compaction header learned so far (logged with each request record)."""
        return self._compactor.header

    def learn_header(self, tokens_after: int, copy: list[Any]) -> None:
        """Learn the compaction header from a request as it is made (before it is logged):
        its report's ``tokens_after`` and its ``copy``."""
        self._compactor.learn_header(tokens_after, copy, self._message_tokens)

    async def awaiting(self, run: Callable[[Awaited, bool], _T]) -> _T:
        """``run(awaited, can_wait)`` in a worker thread (it may write files), again after each
        summary it stopped for is awaited on the event loop (``aprepare``, ``acompact``)."""
        awaited: Awaited = {}
        while True:
            can_wait = len(awaited) < MAX_AWAITS
            try:
                return await asyncio.to_thread(run, awaited, can_wait)
            except _Pending as pending:
                await _await_summary(pending, awaited, self._config)


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
                out = fn(_given(part))
            else:
                out = await _in_thread(fn, _given(part))
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
