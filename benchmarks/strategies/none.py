"""No budgeting: every request carries the full history unchanged (the baseline)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from benchmarks.strategies._base import Declaration, Messages, Unrecoverable
from benchmarks.trace import Trace, Usage

__all__ = ["STRATEGY", "NoBudgetConfig", "Passthrough"]


@dataclass(frozen=True, slots=True)
class NoBudgetConfig:
    """Nothing to configure."""


class Passthrough(Unrecoverable):
    """A session that returns each history as it is."""

    def __init__(self, config: object, trace: Trace, workdir: Path) -> None:
        """Takes a declared session's arguments; sending the history whole needs none of them."""

    def prepare(self, messages: Messages, *, usage: Usage | None, now: float | None) -> Messages:
        """A shallow copy of ``messages``."""
        return list(messages)


STRATEGY = Declaration("none", NoBudgetConfig, Passthrough)
