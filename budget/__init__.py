"""toolbudget: keep an agent's tool results inside its context budget, losing nothing.

session = Budget.open("sessions/<id>")
req = session.prepare(messages, usage=last_usage, now=time.time())
client.messages.create(messages=req.messages, tools=[*tools, session.read_tool()], ...)
"""

from __future__ import annotations

from budget._config import BudgetConfig, ToolPolicy
from budget._errors import (
    BudgetError,
    ConfigError,
    ContextOverflow,
    FormatError,
    FormatUnknown,
    InputError,
    QuotaExceeded,
    RefError,
    SessionLocked,
    StoreError,
)
from budget._ledger import Decision
from budget._readback import ReadToolResult
from budget._reader import SessionReader
from budget._report import DecisionReport, Prepared, Report
from budget._view import Format
from budget._wrap import wrap_tool
from budget.formats import detect_format, get_format
from budget.session._budget import Budget
from budget.tokens._tokens import (
    TokenizerProfile,
    estimate_tokens,
    tiktoken_estimator,
    tiktoken_text_tokens,
    tokenizer_profile,
)

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
    "InputError",
    "Prepared",
    "QuotaExceeded",
    "ReadToolResult",
    "RefError",
    "Report",
    "SessionLocked",
    "SessionReader",
    "StoreError",
    "TokenizerProfile",
    "ToolPolicy",
    "detect_format",
    "estimate_tokens",
    "get_format",
    "tiktoken_estimator",
    "tiktoken_text_tokens",
    "tokenizer_profile",
    "wrap_tool",
]

__version__ = "0.1.0"
