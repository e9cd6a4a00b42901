"""pydantic-ai: the capability and the history processor inside real agent runs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from budget import Budget, ConfigError, FormatError
from tests.integrations._agentkit import envelope_ref, write_big_file

pytestmark = pytest.mark.usefixtures("needs_pydantic_ai")


def test_capability_budgets_requests_and_keeps_history(
    big_file: tuple[Path, str], tmp_path: Path
) -> None:
    """With the capability the model gets an envelope and reads exact lines; history keeps all."""
    from pydantic_ai import Agent
    from pydantic_ai.models.function import FunctionModel

    from budget.integrations.pydantic_ai import ToolBudgetCapability
    from tests.integrations._pydantic_ai_kit import (
        Reader,
        all_returns,
        check_envelope_and_page,
        read_file,
    )

    path, text = big_file
    with Budget.open(tmp_path / "session") as session:
        reader = Reader([str(path)])
        capability = ToolBudgetCapability(session)
        agent = Agent(FunctionModel(reader), tools=[read_file], capabilities=[capability])
        result = asyncio.run(agent.run("What went wrong in the log?"))
        check_envelope_and_page(reader, session, path, text)
        assert result.output == "done"
        # The run's own history holds the full output.
        stored = [p for p in all_returns(result.all_messages()) if p.tool_name == "read_file"]
        assert [p.content for p in stored] == [text]
        assert capability.last_report is not None
        assert capability.last_report.spilled == 1


def test_history_processor_keeps_decisions_frozen(
    big_file: tuple[Path, str], tmp_path: Path
) -> None:
    """Under ProcessHistory (which writes back) the processor still shows frozen envelopes."""
    from pydantic_ai import Agent
    from pydantic_ai.capabilities import ProcessHistory
    from pydantic_ai.models.function import FunctionModel

    from budget.integrations.pydantic_ai import (
        PYDANTIC_AI,
        session_read_tool,
        toolbudget_history_processor,
    )
    from tests.integrations._pydantic_ai_kit import (
        Reader,
        all_returns,
        check_envelope_and_page,
        read_file,
    )

    path, text = big_file
    with Budget.open(tmp_path / "session", format=PYDANTIC_AI) as session:
        reader = Reader([str(path)])
        agent = Agent(
            FunctionModel(reader),
            tools=[read_file, session_read_tool(session)],
            capabilities=[ProcessHistory(toolbudget_history_processor(session))],
        )
        result = agent.run_sync("What went wrong in the log?")
        ref = check_envelope_and_page(reader, session, path, text)
        assert result.output == "done"
        # pydantic-ai stores what a history processor returns: the envelope, whose ref reads back.
        stored = [p for p in all_returns(result.all_messages()) if p.tool_name == "read_file"]
        assert [envelope_ref(str(p.content)) for p in stored] == [ref]


def test_overflow_is_retried_with_old_results_trimmed(tmp_path: Path) -> None:
    """A prompt-too-long refusal makes another attempt, with the older round's output trimmed."""
    from pydantic_ai import Agent
    from pydantic_ai.models.function import FunctionModel

    from budget.integrations.pydantic_ai import PYDANTIC_AI, ToolBudgetCapability
    from tests.integrations._pydantic_ai_kit import Reader, all_returns, read_file

    first, second = tmp_path / "a.log", tmp_path / "b.log"
    text_a = write_big_file(first)
    text_b = write_big_file(second, seed=7)
    # The tool's own cap: a hard limit, so the outputs stay whole until the refusal.
    config = {"tools": {"read_file": {"cap": 200_000}}}
    with Budget.open(tmp_path / "session", config, format=PYDANTIC_AI) as session:
        reader = Reader([str(first), str(second)], refuse_over=200_000)
        agent = Agent(
            FunctionModel(reader), tools=[read_file], capabilities=[ToolBudgetCapability(session)]
        )
        result = agent.run_sync("Compare the two logs.")
        trimmed = session.decision("read_1")

    assert len(reader.received) == 4
    refused, retried = reader.received[2], reader.received[3]
    assert [p.content for p in all_returns(refused)] == [text_a, text_b]
    stub, kept = all_returns(retried)
    assert str(stub.content).startswith("[toolbudget] Old output of read_file trimmed")
    assert kept.content == text_b
    assert trimmed is not None
    assert trimmed.kind == "trimmed"
    assert [p.content for p in all_returns(result.all_messages())] == [text_a, text_b]
    assert result.output == "done"


def test_structured_returns_are_measured_as_json(tmp_path: Path) -> None:
    """A dict return is measured and spilled in its JSON form; the part's other fields are kept."""
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    from budget.integrations.pydantic_ai import PYDANTIC_AI

    big = write_big_file(tmp_path / "x.log")
    content: dict[str, Any] = {"path": "x.log", "lines": big.splitlines()}
    part = ToolReturnPart("grep", content, "c1", metadata={"hits": 2000}, outcome="failed")
    messages: list[Any] = [
        ModelRequest(parts=[UserPromptPart("find it")]),
        ModelResponse(parts=[ToolCallPart("grep", {"q": "x"}, "c1")]),
        ModelRequest(parts=[part, UserPromptPart("and?")]),
    ]
    session = Budget.in_memory(format=PYDANTIC_AI)
    out = session.prepare(messages).messages
    assert out[:2] == messages[:2]
    assert out[0] is messages[0]
    shown = out[2].parts[0]
    assert out[2].parts[1] is messages[2].parts[1]
    assert (shown.tool_name, shown.tool_call_id, shown.metadata) == ("grep", "c1", {"hits": 2000})
    assert (shown.outcome, shown.timestamp) == ("failed", part.timestamp)
    assert shown.content.startswith("[toolbudget] Output of grep was too large")
    assert part.content is content
    ref = envelope_ref(shown.content)
    assert ref is not None
    assert json.loads(session.read(ref)) == content


def test_session_in_another_format_is_refused() -> None:
    """A session fixed to another format refuses the run's messages before the model sees them."""
    from pydantic_ai import Agent
    from pydantic_ai.models.function import FunctionModel

    from budget.integrations.pydantic_ai import ToolBudgetCapability
    from tests.integrations._pydantic_ai_kit import Reader

    with pytest.raises(ConfigError, match=r"needs a budget\.Budget session"):
        ToolBudgetCapability("sessions/x")  # type: ignore[arg-type]
    reader = Reader([])
    session = Budget.in_memory(format="openai_chat")
    agent = Agent(FunctionModel(reader), capabilities=[ToolBudgetCapability(session)])
    with pytest.raises(FormatError, match=r"'openai_chat'.*'pydantic-ai'"):
        agent.run_sync("hello")
    assert reader.received == []
