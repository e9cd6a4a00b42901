"""The one extension point of the replay: a strategy opens per-trace sessions preparing requests.

A strategy module declares itself in one :class:`Declaration` (its name, its config, its session)
and the package's registry lists the declarations; :meth:`Declaration.make` gives the configured
:class:`Strategy` the replay runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from benchmarks.trace import Trace, Usage

Messages = list[dict[str, Any]]

C = TypeVar("C")


class StrategySession(Protocol):
    """Turns each request's history into the request copy this strategy would send."""

    def prepare(self, messages: Messages, *, usage: Usage | None, now: float | None) -> Messages:
        """Return the request copy for ``messages``; never modify ``messages`` or its dicts."""
        ...

    def recover(self, call_id: str) -> str | None:
        """The full original text of a replaced tool result, if this strategy can give it back."""
        ...


@dataclass(frozen=True, slots=True)
class SideCall:
    """A model call a strategy made besides the request it prepared: a summary, for compaction.

    The replay prices it before the request (it ran first): ``messages`` under ``system`` go
    through the same prompt-cache simulation as requests (a summary request that starts with
    the conversation as last sent reads it from the cache), and ``output`` is billed at the
    model's output price (:func:`benchmarks.pricing.output_price`).
    """

    messages: list[Any]
    output: str
    system: Any = ""


class Strategy(Protocol):
    """A named, configured budgeting strategy."""

    @property
    def name(self) -> str:
        """The strategy's registered name."""
        ...

    def open(self, trace: Trace, workdir: Path) -> StrategySession:
        """Start a session for one trace; ``workdir`` is an empty directory it may use."""
        ...


def side_calls(session: object) -> list[SideCall]:
    """The side calls ``session`` made since it was last asked (none for most strategies).

    A session that makes some has a ``take_side_calls()`` method returning them and forgetting
    them; a session that has compaction figures has ``compactions`` and ``breaker_openings``.
    """
    take = getattr(session, "take_side_calls", None)
    return list(take()) if callable(take) else []


class Unrecoverable:
    """A session whose replaced results are gone: nothing can be read back."""

    def recover(self, call_id: str) -> str | None:
        """Nothing: this strategy keeps no originals."""
        return None


@dataclass(frozen=True, slots=True)
class Configured(Generic[C]):
    """A declared strategy with its config settled."""

    name: str
    config: C
    session: Callable[[C, Trace, Path], StrategySession]

    def open(self, trace: Trace, workdir: Path) -> StrategySession:
        """The declared session for ``trace`` on this config."""
        return self.session(self.config, trace, workdir)


@dataclass(frozen=True, slots=True)
class Declaration(Generic[C]):
    """A strategy as its module declares it, once: the registry's entries are these."""

    name: str
    """The name ``toolbudget bench --strategies`` and the report use."""
    config: Callable[..., C]
    """Builds the config from keyword overrides (a config class, or a function)."""
    session: Callable[[C, Trace, Path], StrategySession]
    """Opens one trace's session: ``session(config, trace, workdir)``."""

    def make(self, **overrides: Any) -> Configured[C]:
        """The strategy with its config fields overridden by keyword."""
        return Configured(self.name, self.config(**overrides), self.session)
