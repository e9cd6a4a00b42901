"""The budgeting strategies ``toolbudget bench`` replays side by side, by name.

Each strategy module declares itself once (``STRATEGY = Declaration(name, config, session)``) and
:data:`STRATEGIES` lists the declarations; :func:`get` builds a :class:`Strategy` from keyword
overrides of its config (``get("opencode", protect=10_000)``). Every module's docstring names the
source it follows. ``toolbudget`` is this project's library, its overrides are ``BudgetConfig``
settings.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from benchmarks.strategies import (
    anthropic_context_editing,
    cc_reducer_proxy,
    claude_code,
    claude_code_compact,
    codex,
    gemini_cli,
    langchain_editing,
    langchain_summary,
    none,
    observation_masking,
    openai_agents,
    opencode,
    squeezr,
    swe_agent,
    toolbudget,
)
from benchmarks.strategies._base import Declaration, Messages, Strategy, StrategySession
from budget._errors import ConfigError

__all__ = [
    "COMPACTING",
    "REQUIRES",
    "STRATEGIES",
    "Declaration",
    "Messages",
    "Strategy",
    "StrategySession",
    "compacting_names",
    "get",
    "missing",
    "names",
]


def _by_name(*declared: Declaration[Any]) -> Mapping[str, Declaration[Any]]:
    """A read-only name -> declaration table, in the order given."""
    return MappingProxyType({d.name: d for d in declared})


STRATEGIES: Mapping[str, Declaration[Any]] = _by_name(
    none.STRATEGY,
    toolbudget.STRATEGY,
    claude_code.STRATEGY,
    anthropic_context_editing.STRATEGY,
    langchain_editing.STRATEGY,
    swe_agent.STRATEGY,
    swe_agent.STRATEGY_07,
    observation_masking.STRATEGY,
    opencode.STRATEGY,
    gemini_cli.STRATEGY,
    codex.STRATEGY,
    openai_agents.STRATEGY,
    cc_reducer_proxy.STRATEGY,
    squeezr.STRATEGY,
)
"""Strategy name -> its module's declaration, in the order of the report."""

COMPACTING: Mapping[str, Declaration[Any]] = _by_name(
    toolbudget.STRATEGY_COMPACT,
    langchain_summary.STRATEGY,
    claude_code_compact.STRATEGY,
)
"""The strategies that summarize the conversation (docs/concepts/compaction.md), by name: not in the default
run (at the default 128k window the public traces need no compaction); ``toolbudget bench
--window N`` with a smaller window adds them, ``--strategies`` names them."""


REQUIRES: Mapping[str, tuple[tuple[str, ...], str]] = MappingProxyType(
    {
        "langchain": (("langchain", "langchain_core"), "langchain"),
        "langchain-summary": (("langchain", "langchain_core"), "langchain"),
        "openai-agents": (("agents",), "openai-agents"),
    }
)
"""Strategy name -> (the modules it runs, the extra that installs them): the peers that run the
real package rather than a re-implementation. ``[bench]`` installs every one of them."""


def missing(name: str) -> str | None:
    """Why the strategy ``name`` cannot run here (a module it needs is not installed), or None.

    Looked up, not imported: importing openai-agents and langchain costs ~4 s, which a bench
    that fails on its next check (a missing ``--traces``) or skips the peer would pay for nothing.
    A package that is installed but broken fails when its strategy first runs, naming it."""
    modules, extra = REQUIRES.get(name, ((), ""))
    for module in modules:
        if importlib.util.find_spec(module) is None:
            return (
                f"needs the {module!r} package: pip install 'toolbudget[{extra}]' "
                "(or 'toolbudget[bench]' for every peer)"
            )
    return None


def names() -> list[str]:
    """The registered strategy names, in the order of the report."""
    return list(STRATEGIES)


def compacting_names() -> list[str]:
    """The compacting strategies' names (:data:`COMPACTING`), in the order of the report."""
    return list(COMPACTING)


def get(name: str, **overrides: Any) -> Strategy:
    """The strategy registered as ``name``, its config fields overridden by ``overrides``."""
    declared = STRATEGIES.get(name) or COMPACTING.get(name)
    if declared is None:
        known = ", ".join([*STRATEGIES, *COMPACTING])
        raise ConfigError(f"unknown strategy {name!r}; known strategies: {known}")
    try:
        return declared.make(**overrides)
    except TypeError as exc:
        raise ConfigError(f"strategy {name!r}: invalid setting ({exc})") from exc
