"""OpenAI Agents SDK: a ``call_model_input_filter`` budgeting every model call, and the read tool.

    from agents import Agent, RunConfig, Runner
    from budget import Budget
    from budget.integrations.openai_agents import session_read_tool, toolbudget_input_filter

    session = Budget.open("sessions/<id>")
    agent = Agent(name="...", tools=[..., session_read_tool(session)])
    config = RunConfig(call_model_input_filter=toolbudget_input_filter(session))
    result = await Runner.run(agent, "...", run_config=config)

The filter hands the model a budgeted copy of the run's input items (OpenAI Responses input items);
the run keeps the full items (``result.to_input_list()``). Every call is prepared in the
``openai_responses`` format, which fixes the session's format. Requires the ``openai-agents`` extra
(``pip install 'toolbudget[openai-agents]'``).

The SDK gives the filter no usage and no hook on a failed call: the budget runs on its own token
estimate, and a run refused as too long is resumed by the caller (``session.on_overflow(error)``,
then run again from ``result.to_input_list()``). Server-side conversation state
(``previous_response_id``, ``conversation_id``) sends only new items, which a session cannot
budget as a whole history: use the filter with client-side history.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any

try:
    from agents import FunctionTool
    from agents.run_config import CallModelData, ModelInputData
    from agents.tool_context import ToolContext
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "budget.integrations.openai_agents needs the OpenAI Agents SDK: "
        "pip install 'toolbudget[openai-agents]'"
    ) from exc

from budget._report import Report
from budget.formats.openai_responses import OPENAI_RESPONSES
from budget.integrations._common import attach_summarizer, require_session
from budget.session._budget import Budget

__all__ = ["ToolBudgetInputFilter", "session_read_tool", "toolbudget_input_filter"]


class ToolBudgetInputFilter:
    """A ``RunConfig.call_model_input_filter``: the model gets the budgeted copy of the input.

    ``summarizer`` (sync or async, see :mod:`budget.summarizers`) makes compaction possible,
    with the session's ``compaction`` setting (``"auto"`` for it to run by itself); the summary
    is one ``user`` input item, valid as it is in the Responses API.
    """

    def __init__(
        self, session: Budget, *, summarizer: Callable[[Sequence[Any]], Any] | None = None
    ) -> None:
        self.session = require_session(session, "ToolBudgetInputFilter")
        attach_summarizer(self.session, summarizer, "ToolBudgetInputFilter")
        self.last_report: Report | None = None
        """The report of the last model call budgeted."""

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        """Budget the input items of one model call; the instructions go on unchanged."""
        # aprepare budgets in a worker thread (it may write spilled bodies) and awaits an
        # async summarizer on this loop.
        items = list(data.model_data.input)
        prepared = await self.session.aprepare(items, format=OPENAI_RESPONSES)
        self.last_report = prepared.report
        return ModelInputData(input=prepared.messages, instructions=data.model_data.instructions)


def toolbudget_input_filter(
    session: Budget, *, summarizer: Callable[[Sequence[Any]], Any] | None = None
) -> ToolBudgetInputFilter:
    """The filter for ``RunConfig(call_model_input_filter=...)``, budgeting with ``session``."""
    # Checked here too, so that a wrong argument is said under the name the caller used.
    name = "toolbudget_input_filter"
    attach_summarizer(require_session(session, name), summarizer, name)
    return ToolBudgetInputFilter(session, summarizer=summarizer)


def session_read_tool(session: Budget) -> FunctionTool:
    """The read-back tool as an Agents SDK function tool (its JSON schema is the session's own).

    Not strict: the tool's arguments but ``ref`` are optional, which strict mode does not allow.
    """
    session = require_session(session, "session_read_tool")
    spec = session.read_tool(format="anthropic")

    async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
        try:
            tool_input = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return f"Error: the arguments are not valid JSON ({exc.msg})"
        # Reading a body is file I/O: keep it off the event loop.
        return await asyncio.to_thread(session.handle_read_tool, tool_input)

    return FunctionTool(
        name=spec["name"],
        description=spec["description"],
        params_json_schema=spec["input_schema"],
        on_invoke_tool=invoke,
        strict_json_schema=False,
    )
