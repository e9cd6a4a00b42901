"""No budgeting: every request carries the full history unchanged (the baseline)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.strategies._base import Messages, StrategySession
from benchmarks.trace import Trace, Usage

__all__ = ["NoBudget", "NoBudgetConfig", "make"]


@dataclass(frozen=True, slots=True)
class NoBudgetConfig:
    """Nothing to configure."""


class _Session:
    def prepare(self, messages: Messages, *, usage: Usage | None, now: float | None) -> Messages:
        return list(messages)

    def recover(self, call_id: str) -> str | None:
        return None


@dataclass(slots=True)
class NoBudget:
    """Passthrough."""

    config: NoBudgetConfig = field(default_factory=NoBudgetConfig)
    name: str = "none"

    def open(self, trace: Trace, workdir: Path) -> StrategySession:
        """A session that returns each history as it is."""
        return _Session()


def make(**overrides: Any) -> NoBudget:
    """The ``none`` strategy."""
    return NoBudget(NoBudgetConfig(**overrides))
