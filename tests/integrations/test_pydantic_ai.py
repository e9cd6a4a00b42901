"""pydantic-ai: the capability and the history processor inside real agent runs."""

# ruff: noqa: E402 - the framework is imported after its CI guard (require_module below).
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests._ci import require_module

require_module("pydantic_ai", extra="pydantic-ai")

from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from budget import Budget, ConfigError, FormatError
from budget.integrations.pydantic_ai import (
    PYDANTIC_AI,
    ToolBudgetCapability,
    session_read_tool,
    toolbudget_history_processor,
)
from tests.integrations._agentkit import (
    PAGE_LIMIT,
    PAGE_OFFSET,
    envelope_ref,
    expected_rows,
    page_rows,
    write_big_file,
)


def read_file(path: str) -> str:
    """Read a text file and return its contents."""
    return Path(path).read_text(encoding="utf-8")


def _returns(message: ModelMessage) -> list[ToolReturnPart]:
    if not isinstance(message, ModelRequest):
        return []
    return [p for p in message.parts if isinstance(p, ToolReturnPart)]


def _all_returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages for p in _returns(m)]


@dataclass
class Reader:
    """A model function deciding its next response from the messages it receives.

    It reads each of ``paths`` in turn; when a result comes back as an envelope it reads a page of
    it back through the read-back tool; then it answers. With ``refuse_over`` set it raises a
    prompt-too-long error, like a provider, when the tool returns it receives exceed that size.
    """

    paths: list[str]
    refuse_over: int | None = None
    received: list[list[ModelMessage]] = field(default_factory=list)
    offered: list[list[str]] = field(default_factory=list)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.received.append(list(messages))
        self.offered.append([t.name for t in info.function_tools])
        shown = sum(len(str(p.content)) for p in _all_returns(messages))
        if self.refuse_over is not None and shown > self.refuse_over:
            raise ValueError(f"prompt is too long: {shown // 4} tokens > 50000 maximum")
        read = sum(1 for p in _all_returns(messages) if p.tool_name == "read_file")
        last = _returns(messages[-1])
        if last and last[-1].tool_name == "read_file":
            ref = envelope_ref(str(last[-1].content))
            if ref is not None:
                args = {"ref": ref, "offset": PAGE_OFFSET, "limit": PAGE_LIMIT}
                return ModelResponse(parts=[ToolCallPart("toolbudget_read", args, f"back_{read}")])
        if read < len(self.paths):
            args = {"path": self.paths[read]}
            return ModelResponse(parts=[ToolCallPart("read_file", args, f"read_{read + 1}")])
        return ModelResponse(parts=[TextPart("done")])


def _check_envelope_and_page(reader: Reader, session: Budget, path: Path, text: str) -> str:
    """The model saw an envelope, then the same envelope and the exact lines read back."""
    assert len(reader.received) == 3
    assert {"read_file", "toolbudget_read"} <= set(reader.offered[0])
    (shown,) = _returns(reader.received[1][-1])
    assert shown.tool_call_id == "read_1"
    assert isinstance(shown.content, str)
    assert shown.content.startswith("[toolbudget] Output of read_file was too large")
    assert len(shown.content) < 5_000 < len(text)
    ref = envelope_ref(shown.content)
    assert ref is not None
    first, page = _all_returns(reader.received[2])
    assert first.content == shown.content
    assert page.tool_name == "toolbudget_read"
    assert page_rows(str(page.content)) == expected_rows(text)
    assert session.read(ref).encode("utf-8") == path.read_bytes()
    decision = session.decision("read_1")
    assert decision is not None
    assert (decision.kind, decision.ref) == ("spilled", ref)
    return ref


def test_capability_budgets_requests_and_keeps_history(
    big_file: tuple[Path, str], tmp_path: Path
) -> None:
    """With the capability the model gets an envelope and reads exact lines; history keeps all."""
    path, text = big_file
    with Budget.open(tmp_path / "session") as session:
        reader = Reader([str(path)])
        capability = ToolBudgetCapability(session)
        agent = Agent(FunctionModel(reader), tools=[read_file], capabilities=[capability])
        result = asyncio.run(agent.run("What went wrong in the log?"))
        _check_envelope_and_page(reader, session, path, text)
        assert result.output == "done"
        # The run's own history holds the full output.
        stored = [p for p in _all_returns(result.all_messages()) if p.tool_name == "read_file"]
        assert [p.content for p in stored] == [text]
        assert capability.last_report is not None
        assert capability.last_report.spilled == 1


def test_history_processor_keeps_decisions_frozen(
    big_file: tuple[Path, str], tmp_path: Path
) -> None:
    """Under ProcessHistory (which writes back) the processor still shows frozen envelopes."""
    path, text = big_file
    with Budget.open(tmp_path / "session", format=PYDANTIC_AI) as session:
        reader = Reader([str(path)])
        agent = Agent(
            FunctionModel(reader),
            tools=[read_file, session_read_tool(session)],
            capabilities=[ProcessHistory(toolbudget_history_processor(session))],
        )
        result = agent.run_sync("What went wrong in the log?")
        ref = _check_envelope_and_page(reader, session, path, text)
        assert result.output == "done"
        # pydantic-ai stores what a history processor returns: the envelope, whose ref reads back.
        stored = [p for p in _all_returns(result.all_messages()) if p.tool_name == "read_file"]
        assert [envelope_ref(str(p.content)) for p in stored] == [ref]


def test_overflow_is_retried_with_old_results_trimmed(tmp_path: Path) -> None:
    """A prompt-too-long refusal makes another attempt, with the older round's output trimmed."""
    first, second = tmp_path / "a.log", tmp_path / "b.log"
    text_a = write_big_file(first)
    text_b = write_big_file(second, seed=7)
    with Budget.open(tmp_path / "session", {"result_cap": 200_000}, format=PYDANTIC_AI) as session:
        reader = Reader([str(first), str(second)], refuse_over=200_000)
        agent = Agent(
            FunctionModel(reader), tools=[read_file], capabilities=[ToolBudgetCapability(session)]
        )
        result = agent.run_sync("Compare the two logs.")
        trimmed = session.decision("read_1")

    assert len(reader.received) == 4
    refused, retried = reader.received[2], reader.received[3]
    assert [p.content for p in _all_returns(refused)] == [text_a, text_b]
    stub, kept = _all_returns(retried)
    assert str(stub.content).startswith("[toolbudget] Old output of read_file trimmed")
    assert kept.content == text_b
    assert trimmed is not None
    assert trimmed.kind == "trimmed"
    assert [p.content for p in _all_returns(result.all_messages())] == [text_a, text_b]
    assert result.output == "done"


def test_structured_returns_are_measured_as_json(tmp_path: Path) -> None:
    """A dict return is measured and spilled in its JSON form; the part's other fields are kept."""
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
    with pytest.raises(ConfigError, match=r"needs a budget\.Budget session"):
        ToolBudgetCapability("sessions/x")  # type: ignore[arg-type]
    reader = Reader([])
    session = Budget.in_memory(format="openai_chat")
    agent = Agent(FunctionModel(reader), capabilities=[ToolBudgetCapability(session)])
    with pytest.raises(FormatError, match=r"'openai_chat'.*'pydantic-ai'"):
        agent.run_sync("hello")
    assert reader.received == []
