"""toolbudget: keep an agent's tool results inside its context budget, losing nothing.

The import name of the ``toolbudget`` distribution: every public name of the library, from one
place. The code lives in the distribution's three packages, which keep their names (``budget``:
sessions, formats, passes; ``spill``: the session store; ``benchmarks``: ``toolbudget bench``);
this package only re-exports them::

    from toolbudget import Budget

    session = Budget.open("sessions/<id>", format="anthropic")
    req = session.prepare(messages, usage=last_usage, now=time.time())
    client.messages.create(messages=req.messages, tools=[*tools, session.read_tool()], ...)

The integrations are :mod:`toolbudget.integrations.langchain`, ``.pydantic_ai`` and
``.openai_agents``; the summarizers :mod:`toolbudget.summarizers`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolbudget._shadow import shadowed

_SHADOWED = shadowed(("budget", "spill"))
"""Why ``budget`` or ``spill`` is not this distribution's own (a folder of the same name earlier
on the import path), or None: importing a stranger's package would fail far from the cause."""

if TYPE_CHECKING or _SHADOWED is None:
    from budget import (
        Budget,
        BudgetConfig,
        BudgetError,
        ConfigError,
        ContextOverflow,
        Decision,
        DecisionReport,
        Format,
        FormatError,
        FormatUnknown,
        InputError,
        Prepared,
        QuotaExceeded,
        ReadToolResult,
        RefError,
        Report,
        SessionLocked,
        SessionReader,
        StoreError,
        TokenizerProfile,
        ToolPolicy,
        detect_format,
        estimate_tokens,
        get_format,
        tiktoken_estimator,
        tiktoken_text_tokens,
        tokenizer_profile,
        wrap_tool,
    )
    from budget import __version__ as __version__
    from spill import FsspecStore, LocalStore, MemoryStore, Store, gc_sessions, ref_for
    from toolbudget import summarizers
else:

    def __getattr__(name: str) -> object:
        # The package still imports (the command reports this in one line, then exits); using
        # any of its names says why nothing can be used.
        raise ImportError(_SHADOWED)


__all__ = [
    "Budget",
    "BudgetConfig",
    "BudgetError",
    "ConfigError",
    "ContextOverflow",
    "Decision",
    "DecisionReport",
    "Format",
    "FormatError",
    "FormatUnknown",
    "FsspecStore",
    "InputError",
    "LocalStore",
    "MemoryStore",
    "Prepared",
    "QuotaExceeded",
    "ReadToolResult",
    "RefError",
    "Report",
    "SessionLocked",
    "SessionReader",
    "Store",
    "StoreError",
    "TokenizerProfile",
    "ToolPolicy",
    "detect_format",
    "estimate_tokens",
    "gc_sessions",
    "get_format",
    "ref_for",
    "summarizers",
    "tiktoken_estimator",
    "tiktoken_text_tokens",
    "tokenizer_profile",
    "wrap_tool",
]
