"""The last gate of every importer: a trace the replay could not score never leaves it.

A format's loader checks the recording's shape; this checks what the replay will do with the
values: price the recorded usage, place each request on its clock, and hash the messages (to see
that no strategy changed them). A value that passes the loader but would fail there (a negative
token count, an infinite timestamp, a tool input nested deeper than the JSON encoder goes) makes
the whole file a skip with this reason, instead of a traceback that stops every other trace.
"""

from __future__ import annotations

import math
from dataclasses import fields

from benchmarks.importers._common import TraceFileError
from benchmarks.trace import Trace, Usage, digest
from budget.tokens._usage import is_token_count

__all__ = ["checked"]


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
