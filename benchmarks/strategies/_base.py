"""The one extension point of the replay: a strategy opens per-trace sessions preparing requests."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from benchmarks.trace import Trace, Usage

Messages = list[dict[str, Any]]


class StrategySession(Protocol):
    """Turns each request's history into the request copy this strategy would send."""

    def prepare(self, messages: Messages, *, usage: Usage | None, now: float | None) -> Messages:
        """Return the request copy for ``messages``; never modify ``messages`` or its dicts."""
        ...

    def recover(self, call_id: str) -> str | None:
        """The full original text of a replaced tool result, if this strategy can give it back."""
        ...


class Strategy(Protocol):
    """A named, configured budgeting strategy."""

    name: str

    def open(self, trace: Trace, workdir: Path) -> StrategySession:
        """Start a session for one trace; ``workdir`` is an empty directory it may use."""
        ...
