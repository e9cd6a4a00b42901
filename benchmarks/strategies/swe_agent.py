"""SWE-agent's ``LastNObservations`` history processor (keep the last 5 observations).

Followed: ``sweagent/agent/history_processors.py`` (SWE-agent 1.x, ``LastNObservations`` with
``n`` and ``polling``; the original paper's setting is ``n: 5``). Observations are the environment
outputs in order, the first one being the instance template (the task), which is never elided::

    last_removed = max(0, (len(observations) // polling) * polling - n)
    omitted = observations[1:last_removed]

and an omitted observation's text becomes ``Old environment output: (<lines> lines omitted)``
(``len(text.splitlines())``). It runs from scratch on every request, so the omitted set slides by
one observation each turn.

Mapping: each tool_result is one observation, preceded by one implicit observation for the task, so
with ``polling = 1`` every result but the last ``n`` is elided. The whole content of an elided
result (images included) becomes the placeholder string; SWE-agent's observations are single text
items. Nothing is recoverable.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.strategies._base import Messages, StrategySession
from benchmarks.strategies._common import (
    ResultRef,
    apply_edits,
    result_text,
    tool_results,
    with_content,
)
from benchmarks.trace import Trace, Usage
from budget._errors import ConfigError

__all__ = ["SweAgent", "SweAgentConfig", "make", "omitted_text"]


def omitted_text(content: Any) -> str:
    """SWE-agent's placeholder for an elided observation."""
    return f"Old environment output: ({len(result_text(content).splitlines())} lines omitted)"


def elide(messages: Messages, refs: Iterable[ResultRef]) -> Messages:
    """``messages`` with each of ``refs`` replaced by its placeholder (only those copied)."""
    edits: dict[int, dict[int, dict[str, Any]]] = {}
    for ref in refs:
        text = omitted_text(ref.data.get("content"))
        edits.setdefault(ref.msg, {})[ref.block] = with_content(ref.data, text)
    return apply_edits(messages, edits)


@dataclass(frozen=True, slots=True)
class SweAgentConfig:
    """``LastNObservations`` settings."""

    n: int = 5
    """Observations kept."""
    polling: int = 1
    """Steps between updates of the kept set (1: every step)."""

    def __post_init__(self) -> None:
        if self.n <= 0:
            raise ConfigError(f"SweAgentConfig.n must be a positive integer, got {self.n}")
        if self.polling <= 0:
            raise ConfigError(f"SweAgentConfig.polling must be positive, got {self.polling}")


class _Session:
    def __init__(self, config: SweAgentConfig) -> None:
        self.config = config

    def prepare(self, messages: Messages, *, usage: Usage | None, now: float | None) -> Messages:
        refs = list(tool_results(messages))
        observations = 1 + len(refs)  # the instance template counts as the first observation
        polling, n = self.config.polling, self.config.n
        last_removed = max(0, (observations // polling) * polling - n)
        return elide(messages, refs[: max(0, last_removed - 1)])

    def recover(self, call_id: str) -> str | None:
        return None


@dataclass(slots=True)
class SweAgent:
    """Keep the last ``n`` observations, elide the older ones."""

    config: SweAgentConfig = field(default_factory=SweAgentConfig)
    name: str = "swe-agent"

    def open(self, trace: Trace, workdir: Path) -> StrategySession:
        """A stateless session."""
        return _Session(self.config)


def make(**overrides: Any) -> SweAgent:
    """The ``swe-agent`` strategy, with config fields overridden by keyword."""
    return SweAgent(SweAgentConfig(**overrides))
