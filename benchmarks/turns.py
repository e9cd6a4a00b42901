"""Where toolbudget may trim in a recorded trace: the rounds, and the user's turns.

The session's rule (``budget.session._candidates.Candidates.cutoff`` and
``budget.session._turns``) on a trace's messages in the bench's Anthropic shape, for what must
trim no less than it may (the hindsight oracle, :mod:`benchmarks.oracle`) or keep no more than
it keeps (the bound, :mod:`benchmarks.bound`): a result may be trimmed once it is outside the
last ``protect_rounds`` rounds, or from before the ``protect_turns``-th last turn the user
opened (a prompt after a message of the assistant's: the bench's messages hold no system one).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence

from benchmarks.strategies._common import is_prompt
from benchmarks.trace import Trace

__all__ = ["round_starts", "trimmable"]


def round_starts(trace: Trace) -> list[int]:
    """The message index of each round's assistant message (one making tool calls)."""
    starts = []
    for j, message in enumerate(trace.messages):
        content = message.get("content")
        if (
            message.get("role") == "assistant"
            and isinstance(content, list)
            and any(isinstance(b, dict) and b.get("type") == "tool_use" for b in content)
        ):
            starts.append(j)
    return starts


def trimmable(
    trace: Trace, ends: Sequence[int], protect_rounds: int, protect_turns: int | None
) -> list[int]:
    """Per request (the lengths ``ends``), the newest round whose results may be trimmed (-1:
    none)."""
    starts = round_starts(trace)
    messages = trace.messages
    # Each turn's first prompt and the round it follows (-1 before any round).
    turns = [
        (j, bisect_right(starts, j) - 1)
        for j, m in enumerate(messages)
        if is_prompt(m) and (j == 0 or messages[j - 1].get("role") == "assistant")
    ]
    out = []
    for n in ends:
        current = bisect_left(starts, n) - 1
        seen = bisect_left(turns, (n, -2))
        k = protect_turns
        settled = turns[seen - k][1] if k is not None and seen >= k else -1
        out.append(max(current - protect_rounds, settled))
    return out
