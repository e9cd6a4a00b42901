"""The last gate of every importer: a trace the replay could not score never leaves it.

A format's loader checks the recording's shape; this checks what the replay will do with the
values: price the recorded usage, place each request on its clock, and hash the messages (to see
that no strategy changed them). A value that passes the loader but would fail there (a negative
token count, an infinite timestamp, a tool input nested deeper than the replay's recursion goes)
makes the whole file a skip with this reason, instead of a traceback that stops every other trace.
"""

from __future__ import annotations

import math
import sys
from dataclasses import fields
from typing import Any, Final

from benchmarks.importers._common import TraceFileError
from benchmarks.trace import Trace, Usage, digest
from budget.tokens._usage import is_token_count

__all__ = ["checked"]

STACK_HEADROOM: Final = 100
"""Frames of the recursion limit left to the replay's own calls: a value may nest as deep as
``sys.getrecursionlimit()`` less these (900 levels under the default limit of 1,000)."""


def checked(trace: Trace) -> Trace:
    """``trace`` itself when the replay can score it; else a :class:`TraceFileError` naming the
    trace, the request and the value."""
    for i, request in enumerate(trace.requests):
        if request.usage is not None:
            why = _bad_usage(request.usage)
            if why is not None:
                raise TraceFileError(f"{trace.name}: request {i + 1}'s recorded usage {why}")
        stamp = request.timestamp
        if stamp is not None and (
            isinstance(stamp, bool)
            or not isinstance(stamp, float | int)
            or not math.isfinite(stamp)
        ):
            raise TraceFileError(
                f"{trace.name}: request {i + 1}'s timestamp {stamp!r:.80} is not a finite time"
            )
    # Measured, not left to the JSON encoder's RecursionError: the replay walks messages with
    # Python recursion (its read-back scan, the peers), and from Python 3.12 the standard library's
    # C encoder no longer counts against the recursion limit, so a 1,000-deep tool input that 3.11
    # refused here encoded there, then crashed the whole bench in the replay.
    limit = sys.getrecursionlimit() - STACK_HEADROOM
    depth = _nesting(trace.messages)
    if depth > limit:
        raise TraceFileError(
            f"{trace.name}: its messages cannot be encoded for the replay: they nest {depth} "
            f"levels deep, past the {limit} its recursion goes (the interpreter's recursion limit "
            f"less {STACK_HEADROOM})"
        )
    try:
        digest(trace.messages)
    except (TypeError, ValueError, RecursionError) as exc:
        raise TraceFileError(
            f"{trace.name}: its messages cannot be encoded for the replay ({type(exc).__name__}: "
            f"{exc}); the nesting is deeper than a JSON encoder goes"
        ) from exc
    return trace


def _bad_usage(usage: Usage) -> str | None:
    """Why ``usage`` is no usage a provider could report (the library's own check,
    :func:`budget.tokens._usage.normalize_usage`), or None."""
    for f in fields(usage):
        value = getattr(usage, f.name)
        if not is_token_count(value):
            return f"{f.name} is {value!r:.80}, not a whole number of tokens from 0 to 2**53"
    if usage.cache_write_1h_tokens > usage.cache_write_tokens:
        return (
            f"cache_write_1h_tokens ({usage.cache_write_1h_tokens}) is more than all its cache "
            f"writes ({usage.cache_write_tokens})"
        )
    return None


def _nesting(value: Any) -> int:
    """How many levels of lists and dicts ``value`` holds (0 for a scalar), walked without
    recursion, so that any depth is measured."""
    deepest = 0
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        pending.extend((child, depth + 1) for child in children)
    return deepest
