"""The pydantic-ai capability and history processor: :mod:`budget.integrations.pydantic_ai`."""

from __future__ import annotations

from budget.integrations.pydantic_ai import (
    PYDANTIC_AI,
    PydanticAIFormat,
    ToolBudgetCapability,
    session_read_tool,
    toolbudget_history_processor,
)

__all__ = [
    "PYDANTIC_AI",
    "PydanticAIFormat",
    "ToolBudgetCapability",
    "session_read_tool",
    "toolbudget_history_processor",
]
