"""Findings of a hostile review of the three framework integrations: each a test."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from budget import Budget, ConfigError


@pytest.mark.usefixtures("needs_pydantic_ai")
@pytest.mark.parametrize("summarizer", [42, "agent"])
def test_pydantic_ai_capability_refuses_a_summarizer_that_is_not_callable(
    tmp_path: Path, summarizer: Any
) -> None:
    """ToolBudgetCapability(summarizer=42) is a ConfigError when built, as Budget.open's is,
    where it was taken and failed at the first compaction."""
    from budget.integrations.pydantic_ai import ToolBudgetCapability

    with (
        Budget.open(tmp_path / "s") as session,
        pytest.raises(ConfigError, match="summarizer"),
    ):
        ToolBudgetCapability(session, summarizer=summarizer)


@pytest.mark.usefixtures("needs_openai_agents")
def test_openai_agents_filter_refuses_a_summarizer_that_is_not_callable(tmp_path: Path) -> None:
    """toolbudget_input_filter(summarizer=42) is a ConfigError when built, where it was taken
    and failed at the first compaction."""
    from budget.integrations.openai_agents import toolbudget_input_filter

    with (
        Budget.open(tmp_path / "s") as session,
        pytest.raises(ConfigError, match="summarizer"),
    ):
        toolbudget_input_filter(session, summarizer=42)  # type: ignore[arg-type]


@pytest.mark.usefixtures("needs_langchain", "needs_pydantic_ai")
@pytest.mark.parametrize("flag", ["read_tool", "retry_on_overflow"])
def test_integrations_refuse_a_flag_that_is_not_a_bool(tmp_path: Path, flag: str) -> None:
    """read_tool="no" (or retry_on_overflow="no") is a ConfigError when the middleware or the
    capability is built, where the string was taken as true and the tool added."""
    from budget.integrations.langchain import ToolBudgetMiddleware
    from budget.integrations.pydantic_ai import ToolBudgetCapability

    bad: dict[str, Any] = {flag: "no"}
    with Budget.open(tmp_path / "s") as session:
        with pytest.raises(ConfigError, match=flag):
            ToolBudgetMiddleware(session, **bad)
        with pytest.raises(ConfigError, match=flag):
            ToolBudgetCapability(session, **bad)


@pytest.mark.usefixtures("needs_langchain")
@pytest.mark.parametrize("run_async", [False, True])
def test_langchain_agent_tool_named_like_the_read_tool_is_refused(
    tmp_path: Path, run_async: bool
) -> None:
    """An agent tool named toolbudget_read is a ConfigError at the first model call, where
    create_agent kept it in place of the middleware's and every read-back went to it."""
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool

    from budget.integrations.langchain import ToolBudgetMiddleware

    @tool
    def toolbudget_read(ref: str) -> str:
        """The agent's own tool that happens to share the read-back tool's name."""
        return "not the spilled output"

    class Scripted(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    model = Scripted(messages=iter([AIMessage("done")]))
    with Budget.open(tmp_path / "s") as session:
        agent = create_agent(
            model, tools=[toolbudget_read], middleware=[ToolBudgetMiddleware(session)]
        )
        question: Any = {"messages": [{"role": "user", "content": "hi"}]}
        run = (lambda: asyncio.run(agent.ainvoke(question))) if run_async else None
        with pytest.raises(ConfigError, match=r"toolbudget_read.*read_tool_name"):
            run() if run is not None else agent.invoke(question)


@pytest.mark.usefixtures("needs_langchain")
def test_langchain_agent_given_the_read_tool_as_well_still_reads_back(tmp_path: Path) -> None:
    """session_read_tool(session) in the agent's tools as well as the middleware's is not a
    name collision: the run reads back through it."""
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, ToolMessage

    from budget.integrations.langchain import ToolBudgetMiddleware, session_read_tool

    class Scripted(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    with Budget.open(tmp_path / "s") as session:
        call = {"name": "toolbudget_read", "args": {"ref": "0" * 32}, "id": "r1"}
        model = Scripted(messages=iter([AIMessage("", tool_calls=[call]), AIMessage("done")]))
        agent = create_agent(
            model, tools=[session_read_tool(session)], middleware=[ToolBudgetMiddleware(session)]
        )
        question: Any = {"messages": [{"role": "user", "content": "hi"}]}
        (answer,) = [m for m in agent.invoke(question)["messages"] if isinstance(m, ToolMessage)]
    assert "no output is stored under ref" in answer.text


@pytest.mark.usefixtures("needs_pydantic_ai", "structlog_defaults")
def test_pydantic_ai_history_processor_keeps_decisions_across_a_restart(
    big_file: tuple[Path, str], tmp_path: Path
) -> None:
    """A new processor on the same session directory, given the run's history (which
    ProcessHistory filled with envelopes), keeps each spilled decision and its ref, with no
    ``decision_stale``, where it took the envelopes for edited outputs and re-decided them."""
    from pydantic_ai import Agent
    from pydantic_ai.capabilities import ProcessHistory
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from structlog.testing import capture_logs

    from budget.integrations.pydantic_ai import session_read_tool, toolbudget_history_processor
    from tests.integrations._pydantic_ai_kit import Reader, read_file

    path, text = big_file
    with Budget.open(tmp_path / "s") as session:
        reader = Reader([str(path), str(path)])
        processor = ProcessHistory(toolbudget_history_processor(session))
        tools: list[Any] = [read_file, session_read_tool(session)]
        agent = Agent(FunctionModel(reader), tools=tools, capabilities=[processor])
        history = agent.run_sync("Read the log twice.").all_messages()
        before = [session.decision(f"read_{n}") for n in (1, 2)]
    assert before[0] is not None
    assert [d.kind for d in before if d is not None] == ["spilled", "spilled"]
    sent: list[list[ModelMessage]] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent.append(messages)
        return ModelResponse(parts=[TextPart("ok")])

    with Budget.open(tmp_path / "s") as session, capture_logs() as events:
        processor = ProcessHistory(toolbudget_history_processor(session))
        again = Agent(FunctionModel(answer), capabilities=[processor])
        again.run_sync("And now?", message_history=history)
        after = [session.decision(f"read_{n}") for n in (1, 2)]
        assert session.read(before[0].ref or "") == text  # the body the envelopes name
    assert "toolbudget.session.decision_stale" not in [e["event"] for e in events]
    assert after == before
    assert sent[0][: len(reader.received[-1])] == reader.received[-1]


@pytest.mark.usefixtures("needs_langchain")
@pytest.mark.parametrize("root", ["", 42])
def test_langchain_root_must_name_a_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, root: Any
) -> None:
    """root="" (an unset variable) or root=42 is a ConfigError when the middleware is built, as
    Budget.open("") is, where "" put each thread's session in the working directory and 42 was
    a bare TypeError."""
    from budget.integrations.langchain import ToolBudgetMiddleware

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="root"):
        ToolBudgetMiddleware(root=root)
