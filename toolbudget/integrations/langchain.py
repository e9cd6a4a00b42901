"""The LangChain middleware and read-back tool: :mod:`budget.integrations.langchain`."""

from __future__ import annotations

from budget.integrations.langchain import (
    LANGCHAIN,
    LangChainFormat,
    ToolBudgetMiddleware,
    chat_model_summarizer,
    session_read_tool,
)

__all__ = [
    "LANGCHAIN",
    "LangChainFormat",
    "ToolBudgetMiddleware",
    "chat_model_summarizer",
    "session_read_tool",
]
