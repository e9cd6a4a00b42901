"""OpenAI Agents SDK: the input filter inside a real ``Runner`` loop, with a model that reads."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from budget import Budget
from tests.integrations._agentkit import (
    PAGE_LIMIT,
    PAGE_OFFSET,
    envelope_ref,
    expected_rows,
    page_rows,
)

pytestmark = pytest.mark.usefixtures("needs_openai_agents")


def test_runner_sees_envelope_and_reads_back(big_file: tuple[Path, str], tmp_path: Path) -> None:
    """In a Runner loop the model gets an envelope and reads exact lines back; the run keeps all."""
    from agents import Agent, RunConfig, Runner

    from budget.integrations.openai_agents import (
        ToolBudgetInputFilter,
        session_read_tool,
        toolbudget_input_filter,
    )
    from tests.integrations._openai_agents_kit import ReadingModel, read_file, tool_outputs

    path, text = big_file
    with Budget.open(tmp_path / "session") as session:
        model = ReadingModel(str(path))
        budgeting = toolbudget_input_filter(session)
        agent = Agent(name="reader", model=model, tools=[read_file, session_read_tool(session)])
        config = RunConfig(call_model_input_filter=budgeting, tracing_disabled=True)
        result = asyncio.run(Runner.run(agent, "What went wrong in the log?", run_config=config))

        assert result.final_output == "done"
        assert len(model.received) == 3
        assert {"read_file", "toolbudget_read"} <= set(model.offered[0])
        (shown,) = tool_outputs(model.received[1])
        assert shown["call_id"] == "call_read_1"
        assert isinstance(shown["output"], str)
        assert shown["output"].startswith("[toolbudget] Output of read_file was too large")
        assert len(shown["output"]) < 5_000 < len(text)
        ref = envelope_ref(shown["output"])
        assert ref is not None
        first, page = tool_outputs(model.received[2])
        assert first["output"] == shown["output"]
        assert page_rows(str(page["output"])) == expected_rows(text)
        assert session.read(ref).encode("utf-8") == path.read_bytes()
        decision = session.decision("call_read_1")
        assert decision is not None
        assert (decision.kind, decision.ref) == ("spilled", ref)
        # The run's own items hold the full output.
        stored = tool_outputs(result.to_input_list())
        assert stored[0]["output"] == text
        assert isinstance(budgeting, ToolBudgetInputFilter)
        assert budgeting.last_report is not None
        assert budgeting.last_report.spilled == 1


def test_a_shell_tool_output_is_budgeted_in_a_runner_loop(tmp_path: Path) -> None:
    """The SDK's ShellTool runs a command whose output is big: the model's next input holds its
    shell_call_output with the envelope in its first chunk and the outcome kept, and the run's
    own items hold the full output, which the session reads back exactly."""
    from agents import Agent, RunConfig, Runner, ShellTool

    from budget.integrations.openai_agents import toolbudget_input_filter
    from tests.integrations._openai_agents_kit import ShellModel

    log = "".join(f"tests/test_{i}.py::test_case PASSED\n" for i in range(3_000))
    with Budget.open(tmp_path / "session") as session:
        model = ShellModel()
        shell = ShellTool(executor=lambda request: log)
        agent = Agent(name="runner", model=model, tools=[shell])
        config = RunConfig(
            call_model_input_filter=toolbudget_input_filter(session), tracing_disabled=True
        )
        result = asyncio.run(Runner.run(agent, "Run the tests.", run_config=config))

        assert result.final_output == "done"
        (sent,) = [i for i in model.received[1] if i.get("type") == "shell_call_output"]
        (chunk,) = sent["output"]
        assert chunk["stdout"].startswith("[toolbudget] Output of shell was too large")
        assert chunk["stderr"] == ""
        assert "outcome" in chunk
        decision = session.decision("call_shell_1")
        assert decision is not None and decision.kind == "spilled" and decision.ref is not None
        assert session.read(decision.ref) == log
        items: list[Any] = result.to_input_list()  # TypedDicts: read as plain dicts
        (stored,) = [i for i in items if i.get("type") == "shell_call_output"]
        assert stored["output"][0]["stdout"] == log


def test_read_tool_rejects_bad_arguments(big_file: tuple[Path, str]) -> None:
    """The function tool pages exact lines, and answers bad JSON or a bad ref with an error text."""
    from budget.integrations.openai_agents import session_read_tool

    _, text = big_file
    session = Budget.in_memory()
    ref = session.store.put(text)
    tool = session_read_tool(session)
    args = json.dumps({"ref": ref, "offset": PAGE_OFFSET, "limit": PAGE_LIMIT})
    ctx: Any = None  # the tool does not use its context

    def invoke(arguments: str) -> str:
        async def call() -> Any:
            return await tool.on_invoke_tool(ctx, arguments)

        out: str = asyncio.run(call())
        return out

    assert page_rows(invoke(args)) == expected_rows(text)
    assert invoke("{not json").startswith("Error:")
    assert invoke('{"ref": "x"}').startswith("Error:")


def test_the_input_filter_function_names_itself_when_given_a_path(tmp_path: Path) -> None:
    """``toolbudget_input_filter(path)`` is refused under its own name, not its class's."""
    from budget._errors import ConfigError
    from budget.integrations.openai_agents import toolbudget_input_filter

    with pytest.raises(ConfigError) as info:
        toolbudget_input_filter(str(tmp_path / "s"))  # type: ignore[arg-type]
    assert str(info.value).startswith("toolbudget_input_filter needs a budget.Budget session")
