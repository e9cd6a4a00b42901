"""toolbudget itself: the real :class:`budget.Budget` on a real session directory.

Each trace gets its own session directory under the replay's ``workdir`` (a real
:class:`spill.LocalStore`: bodies and the decision log on disk, with the default ``fsync``), so the
time per request includes what an agent would pay. The replay passes the recorded usage of the
previous request as the usage anchor and the request's time as ``now``.

``recover(call_id)`` reads back through the decision's ref with :meth:`Budget.read`, the same path
the read-back tool uses. The read-back tool's definition is sent with every request (``tools``),
as an agent using toolbudget would, so its tokens count in the request header.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.strategies._base import Messages, StrategySession
from benchmarks.trace import Trace, Usage
from budget import Budget, BudgetConfig, Report

__all__ = ["Toolbudget", "ToolbudgetSession", "make", "usage_dict"]


def usage_dict(usage: Usage) -> dict[str, int]:
    """A recorded usage in the Anthropic shape ``Budget.prepare`` reads (input excludes cache)."""
    return {
        "input_tokens": usage.input_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "output_tokens": usage.output_tokens,
    }


class ToolbudgetSession:
    """One trace's Budget session; keeps the last report so callers can see what each request did."""

    def __init__(self, config: BudgetConfig, path: Path) -> None:
        self.budget = Budget.open(path, config)
        self.tools: list[dict[str, Any]] = [self.budget.read_tool()]
        """Tool definitions this strategy adds to every request (the read-back tool)."""
        self.report: Report | None = None
        """The report of the last request prepared."""

    def prepare(self, messages: Messages, *, usage: Usage | None, now: float | None) -> Messages:
        """The Budget's request copy for ``messages``."""
        prepared = self.budget.prepare(
            messages, usage=None if usage is None else usage_dict(usage), now=now
        )
        self.report = prepared.report
        return prepared.messages

    def recover(self, call_id: str) -> str | None:
        """The stored original of a spilled or trimmed result, read back by its ref."""
        decision = self.budget.decision(call_id)
        if decision is None or decision.ref is None:
            return None
        return self.budget.read(decision.ref)

    def close(self) -> None:
        """Release the session directory."""
        self.budget.close()


@dataclass(slots=True)
class Toolbudget:
    """toolbudget with a given configuration (the library's defaults unless overridden)."""

    config: BudgetConfig = field(default_factory=BudgetConfig)
    name: str = "toolbudget"

    def open(self, trace: Trace, workdir: Path) -> StrategySession:
        """A Budget session in ``workdir/session``."""
        return ToolbudgetSession(self.config, workdir / "session")


def make(**overrides: Any) -> Toolbudget:
    """The ``toolbudget`` strategy; keyword overrides are :class:`BudgetConfig` settings."""
    return Toolbudget(BudgetConfig(**overrides))
