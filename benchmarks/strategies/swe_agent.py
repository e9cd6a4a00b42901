"""SWE-agent, two rows: ``swe-agent-0.7`` (keep the last 5 observations, the paper's setting) and
``swe-agent`` (the 1.x default: the history is sent whole, only cache breakpoints are set).

``swe-agent-0.7`` follows github.com/SWE-agent/SWE-agent at tag v0.7.0 (commit
dc18a740faabd2fc625a9b018184dfc4a81cbc78): ``config/default.yaml`` sets ``history_processor:
Last5Observations``, and ``sweagent/agent/history_processors.py`` (``last_n_history``) keeps the
first user message (the task) and the last ``n`` user messages (observations) whole, and turns
each other one into ``Old output omitted (<lines> lines)`` (``len(content.splitlines())``). It
runs from scratch on every request, so the omitted set slides by one observation each turn.
``polling`` (from 1.x's ``LastNObservations``; 1 in 0.7) moves the kept set only every
``polling`` observations::

    last_removed = max(0, (len(observations) // polling) * polling - n)
    omitted = observations[1:last_removed]

``swe-agent`` follows the same repository at commit 3ea751c087f32b16e039a2233dd6eefecef325d5
(version 1.1.0): ``config/default.yaml`` sets ``history_processors: [{type: cache_control,
last_n_messages: 2}]``, which only marks the last two user messages as cache breakpoints; nothing
is elided (``LastNObservations`` is opt-in). The replay's Anthropic cache already places a
breakpoint at the end of every request, so the copy sent is the history itself.

Mapping: each tool_result is one observation, preceded by one implicit observation for the task, so
with ``polling = 1`` every result but the last ``n`` is elided. The whole content of an elided
result (images included) becomes the placeholder string; SWE-agent's observations are single text
items. Nothing is recoverable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.strategies._base import Declaration, Messages, Unrecoverable
from benchmarks.strategies._common import (
    ResultRef,
    apply_edits,
    result_text,
    tool_results,
    with_content,
)
from benchmarks.strategies.none import NoBudgetConfig, Passthrough
from benchmarks.trace import Trace, Usage
from budget._errors import ConfigError

__all__ = [
    "STRATEGY",
    "STRATEGY_07",
    "SweAgentConfig",
    "omitted_text",
    "omitted_text_07",
]


def omitted_text(content: Any) -> str:
    """SWE-agent 1.x's placeholder for an elided observation (``LastNObservations``)."""
    return f"Old environment output: ({len(result_text(content).splitlines())} lines omitted)"


def omitted_text_07(content: Any) -> str:
    """SWE-agent 0.7's placeholder for an elided observation (``last_n_history``)."""
    return f"Old output omitted ({len(result_text(content).splitlines())} lines)"


def elide(
    messages: Messages, refs: Iterable[ResultRef], text: Callable[[Any], str] = omitted_text
) -> Messages:
    """``messages`` with each of ``refs`` replaced by its placeholder (only those copied)."""
    edits: dict[int, dict[int, dict[str, Any]]] = {}
    for ref in refs:
        edits.setdefault(ref.msg, {})[ref.block] = with_content(
            ref.data, text(ref.data.get("content"))
        )
    return apply_edits(messages, edits)


@dataclass(frozen=True, slots=True)
class SweAgentConfig:
    """``Last5Observations`` settings (SWE-agent 0.7)."""

    n: int = 5
    """Observations kept."""
    polling: int = 1
    """Steps between updates of the kept set (1: every step, as in 0.7)."""

    def __post_init__(self) -> None:
        if self.n <= 0:
            raise ConfigError(f"SweAgentConfig.n must be a positive integer, got {self.n}")
        if self.polling <= 0:
            raise ConfigError(f"SweAgentConfig.polling must be positive, got {self.polling}")


class _Session(Unrecoverable):
    """SWE-agent 0.7: keep the last ``n`` observations, elide the older ones (stateless)."""

    def __init__(self, config: SweAgentConfig, trace: Trace, workdir: Path) -> None:
        self.config = config

    def prepare(self, messages: Messages, *, usage: Usage | None, now: float | None) -> Messages:
        refs = list(tool_results(messages))
        observations = 1 + len(refs)  # the instance template counts as the first observation
        polling, n = self.config.polling, self.config.n
        last_removed = max(0, (observations // polling) * polling - n)
        return elide(messages, refs[: max(0, last_removed - 1)], omitted_text_07)


STRATEGY = Declaration("swe-agent", NoBudgetConfig, Passthrough)
"""SWE-agent 1.x as shipped: the ``cache_control`` processor only, nothing elided (no settings)."""
STRATEGY_07 = Declaration("swe-agent-0.7", SweAgentConfig, _Session)
"""SWE-agent 0.7's ``Last5Observations`` (the paper's setting)."""
