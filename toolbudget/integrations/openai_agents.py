"""The OpenAI Agents SDK input filter and read-back tool: :mod:`budget.integrations.openai_agents`."""

from __future__ import annotations

from budget.integrations.openai_agents import (
    ToolBudgetInputFilter,
    session_read_tool,
    toolbudget_input_filter,
)

__all__ = ["ToolBudgetInputFilter", "session_read_tool", "toolbudget_input_filter"]
