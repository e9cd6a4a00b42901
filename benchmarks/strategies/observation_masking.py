"""Observation masking with a 10-turn window: the baseline of "The Complexity Trap".

Followed: Lindenbauer et al., "The Complexity Trap: Simple Observation Masking Is as Efficient as
LLM Summarization for Agent Context Management" (JetBrains Research, 2025), and its code
(``Recursive-Safeguarding/the-complexity-trap``: ``config/default_no_demo_N=1_M=10.yaml`` sets
``history_processors: [{type: last_n_observations, n: 10}]``, whose
``sweagent/agent/history_processors.py`` writes ``Old environment output: (<lines> lines
omitted)``). In SWE-agent each turn has exactly one observation, so the window is 10 turns.

Mapping: a turn is one assistant message with tool calls (a round); the results answering the
calls of every round but the last ``window`` ones are masked, whatever their number per round. It
is re-evaluated on every request (the window slides each turn). Nothing is recoverable.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from benchmarks.strategies._base import Declaration, Messages, Unrecoverable
from benchmarks.strategies._common import tool_calls, tool_results
from benchmarks.strategies.swe_agent import elide
from benchmarks.trace import Trace, Usage
from budget._errors import ConfigError

__all__ = ["STRATEGY", "ObservationMaskingConfig"]


@dataclass(frozen=True, slots=True)
class ObservationMaskingConfig:
    """The paper's window."""

    window: int = 10
    """Most recent turns whose observations stay visible."""

    def __post_init__(self) -> None:
        if self.window < 0:
            raise ConfigError(f"ObservationMaskingConfig.window must be >= 0, got {self.window}")


class _Session(Unrecoverable):
    """Mask the observations of turns older than the window, re-evaluated on every request."""

    def __init__(self, config: ObservationMaskingConfig, trace: Trace, workdir: Path) -> None:
        self.config = config

    def prepare(self, messages: Messages, *, usage: Usage | None, now: float | None) -> Messages:
        round_of: dict[str, int] = {}
        rounds = 0
        last_msg = -1
        for call in tool_calls(messages):
            if call.msg != last_msg:
                rounds += 1
                last_msg = call.msg
            round_of[call.call_id] = rounds - 1
        first_visible = rounds - self.config.window
        old = (
            ref
            for ref in tool_results(messages)
            if (turn := round_of.get(ref.call_id)) is not None and turn < first_visible
        )
        return elide(messages, old)


STRATEGY = Declaration("observation-masking", ObservationMaskingConfig, _Session)
