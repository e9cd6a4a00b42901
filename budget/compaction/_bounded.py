"""A summarizer's call bounded by ``compact_timeout_s`` in a daemon thread (the sync path of
:class:`budget.compaction._compactor.Compactor`)."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Sequence
from typing import Any

from budget._errors import SummaryTimeout

__all__ = ["within"]


def within(summarizer: Callable[[Sequence[Any]], Any], part: list[Any], timeout: float) -> Any:
    """``summarizer(part)`` in a daemon thread, given ``timeout`` seconds.

    A thread, not a signal: ``prepare`` may run in any thread, and a hung summarizer must not
    keep the process from exiting (daemon). One past its time is abandoned, not stopped (Python
    cannot stop a thread); whatever it returns later is dropped.
    """
    box: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            box.append(summarizer(part))
        except BaseException as exc:  # handed to the caller's thread
            errors.append(exc)

    # The caller's context variables go with it (a framework's current model, a trace).
    context = contextvars.copy_context()
    thread = threading.Thread(
        target=context.run, args=(run,), name="toolbudget-summarizer", daemon=True
    )
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise SummaryTimeout(f"the summarizer did not return within {timeout:g} s")
    if errors:
        raise errors[0]
    return box[0]
