"""The compaction set-up the session tests and the framework tests share.

One 4k-window configuration, one rules-first history, one build-log tool body and one counting
summarizer, so that the core tests and each framework's loop compact the same conversation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Final

from budget import BudgetConfig, summarizers
from budget._config import CompactionMode
from tests.strategies import big, conversation

__all__ = [
    "AUTO",
    "ROUNDS",
    "AsyncCounting",
    "Counting",
    "anthropic_reply",
    "build_log",
    "compaction_config",
    "history",
]

ROUNDS: Final = 24
"""How many tool rounds a framework loop runs: enough to pass the 4k window's threshold twice."""


def compaction_config(compaction: CompactionMode = "off") -> BudgetConfig:
    """A 4k window whose compaction knobs make a few dozen 40-line results compact."""
    return BudgetConfig(
        fsync=False,
        window=4_000,
        compaction=compaction,
        compact_reserve_tokens=500,
        compact_margin_tokens=500,
        compact_manual_margin_tokens=200,
        compact_tail_tokens=400,
        compact_tail_messages=2,
        compact_tail_max_tokens=1_500,
        compact_min_reclaim_tokens=300,
    )


AUTO: Final = compaction_config("auto")
"""A 4k window: automatic compaction above 3,000 tokens, after about a dozen rounds."""


def build_log(step: int) -> str:
    """The 40-line log of one build step, the tool result every framework loop returns."""
    return "".join(f"step {step} log line {i:03d}: compiling module_{i}.py\n" for i in range(40))


def history(rounds: int, lines: int = 40) -> list[dict[str, Any]]:
    """A task with its rules, then ``rounds`` rounds of one bash call with ``lines`` of output."""
    msgs = conversation([[big(lines, f"r{r}")] for r in range(rounds)])
    msgs[0] = {"role": "user", "content": "Fix the parser.\nNever edit tests/."}
    return msgs


class Counting:
    """The extractive summarizer, counting its calls (and failing when told to)."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[int] = []
        self.fail = fail

    def __call__(self, messages: Sequence[Any]) -> str:
        self.calls.append(len(messages))
        if self.fail:
            raise RuntimeError("the summary model is down")
        text = summarizers.extractive()(messages)
        assert isinstance(text, str)
        return text


class AsyncCounting(Counting):
    """The same summaries from a coroutine function, after yielding to the event loop."""

    async def __call__(self, messages: Sequence[Any]) -> str:  # type: ignore[override]
        await asyncio.sleep(0)
        return super().__call__(messages)


def anthropic_reply(summary: str) -> dict[str, Any]:
    """The Messages API's JSON answer whose one text block is ``summary``, as a summarizer gets it."""
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": summary}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 10},
    }
