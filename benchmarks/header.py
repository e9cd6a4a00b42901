"""The part of each request a recording omits: the system prompt and tool definitions.

Claude Code transcripts hold no system prompt and no tool definitions, yet every request carried
them (15-28k tokens on the public traces); Codex, Gemini CLI and OpenHands recordings lack the
tool definitions (3-7k tokens). Replaying without them makes every request too small, so a
saving on the messages looks larger than it was.

:func:`header_tokens` sizes the missing part from the recording itself: the prompt tokens the
provider recorded for the trace's first request minus the replay's estimate of what that
request holds (the recorded system prompt and the messages, counted by the trace model's
estimator exactly as the replay counts them). A negative gap (the estimator counts more than the
provider did, as on mini-swe-agent, which records its whole prompt) means nothing is missing: 0.
The header is one number per trace, added to the first segment of every request of every
strategy, so it costs each strategy the same and never breaks a cache prefix.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from benchmarks._count import Counter, counter_for
from benchmarks.cache import Segmenter
from benchmarks.trace import Trace

__all__ = ["header_tokens", "with_header"]


def header_tokens(trace: Trace, count: Counter | None = None) -> int:
    """Tokens the first recorded request had beyond the replay's estimate of it (>= 0).

    0 when the first request has no recorded usage (nothing to size it from).
    """
    if not trace.requests or trace.requests[0].usage is None:
        return 0
    count = count if count is not None else counter_for(trace.model)
    segments = Segmenter(count).segments(trace.request_messages(0), system=trace.system)
    estimate = sum(s.tokens for s in segments)
    return max(0, trace.requests[0].usage.prompt_tokens - estimate)


def with_header(traces: Iterable[Trace]) -> list[Trace]:
    """The traces with :attr:`Trace.header_tokens` set from their recorded usage."""
    return [dataclasses.replace(t, header_tokens=header_tokens(t)) for t in traces]
