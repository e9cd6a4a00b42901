"""LangChain v1: the middleware compacts inside a real ``create_agent`` loop, summarizing with a chat model."""

# ruff: noqa: E402 - the framework is imported after its CI guard (require_module below).
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests._ci import require_module
from tests.compaction import AUTO, ROUNDS, build_log

require_module("langchain.agents", extra="langchain")

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import Field

from budget import Budget, ConfigError, summarizers
from budget.integrations.langchain import ToolBudgetMiddleware, chat_model_summarizer
from tests.integrations._langchain_fake import ToolNamingModel

CONFIG = AUTO
"""A 4k window: the agent's history passes the 3,000-token threshold after about a dozen rounds."""

SUMMARY = "## Goal\nFix the parser without editing tests/."


@tool
def run(step: int) -> str:
    """Run one step of the build and return its log."""
    return build_log(step)


class WorkingModel(ToolNamingModel):
    """A chat model that calls ``run`` ``rounds`` times, then answers; asked under the
    summarizer's prompt (no tools bound), it writes a fixed summary."""

    rounds: int = ROUNDS
    refuse_over: int | None = None
    """Refuse (a prompt-too-long error, as a provider words it) more messages than this."""
    refused: int = 0
    received: list[list[BaseMessage]] = Field(default_factory=list)
    summaries: list[list[BaseMessage]] = Field(default_factory=list)
    summary_tools: list[list[str]] = Field(default_factory=list)
    """The tools bound on each summary request (none: the summarizer binds no tools)."""

    def reply(self, messages: list[BaseMessage]) -> ChatResult:
        """A summary when asked to summarize; else the next step, or a refusal when told to."""
        if (
            messages
            and isinstance(messages[0], SystemMessage)
            and "summarizing" in messages[0].text
        ):
            self.summaries.append(list(messages))
            self.summary_tools.append(self.offered[-1])
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=SUMMARY))])
        self.received.append(list(messages))
        if self.refuse_over is not None and len(messages) > self.refuse_over:
            self.refused += 1
            raise ValueError(f"prompt is too long: {len(messages) * 1_000} tokens > 30000 maximum")
        done = sum(1 for m in _all_calls(messages))
        if done < self.rounds:
            call = {"name": "run", "args": {"step": done}, "id": f"call_{done}"}
            reply = AIMessage(content=f"Running step {done}.", tool_calls=[call])
        else:
            reply = AIMessage(content="done")
        # A usage per success: it ends an overflow streak.
        n = len(self.received)
        reply.usage_metadata = {"input_tokens": n, "output_tokens": 1, "total_tokens": n + 1}
        return ChatResult(generations=[ChatGeneration(message=reply)])


def _all_calls(messages: list[BaseMessage]) -> list[str]:
    """The step numbers run so far, read from the calls (or, once compacted, the tail's calls
    and the summary's count) so the model goes on where the history says it is."""
    steps = [
        str(tc["args"]["step"]) for m in messages if isinstance(m, AIMessage) for tc in m.tool_calls
    ]
    if steps:
        last = int(steps[-1])
        return [str(i) for i in range(last + 1)]
    return []


def _check(model: WorkingModel, state: dict[str, Any]) -> None:
    """The run compacted: a summary call without tools, then copies led by the summary; the
    agent's state kept every message."""
    assert model.summaries, "no summary was asked for"
    assert model.summary_tools and all(names == [] for names in model.summary_tools)
    transcript = model.summaries[0][1].text
    assert "[tool call call_0] run(" in transcript
    assert "Fix the parser" in transcript
    compacted = [m for m in model.received if "<summary>" in m[0].text]
    assert compacted
    first = compacted[-1][0]
    assert isinstance(first, HumanMessage)
    assert SUMMARY in first.text
    assert "Fix the parser." in first.text  # the user's words, carried verbatim
    assert len(compacted[-1]) < len(state["messages"])
    assert len(state["messages"]) == 1 + 2 * ROUNDS + 1
    assert state["messages"][-1].text == "done"


def test_agent_compacts_with_its_own_model(tmp_path: Path) -> None:
    """summarizer='agent': the agent's model writes the summary (no tools bound), the next calls start with it."""
    model = WorkingModel()
    with Budget.open(tmp_path / "s", CONFIG) as session:
        middleware = ToolBudgetMiddleware(session, summarizer="agent")
        agent = create_agent(model, tools=[run], middleware=[middleware])
        task = HumanMessage("Fix the parser.\nNever edit tests/.")
        state = agent.invoke({"messages": [task]}, {"recursion_limit": 200})
    _check(model, state)


def test_async_agent_compacts_with_a_named_model(tmp_path: Path) -> None:
    """A separate summary model given to the middleware (root= sessions, ainvoke) writes every summary; the agent's model writes none."""
    agent_model, summary_model = WorkingModel(), WorkingModel()
    middleware = ToolBudgetMiddleware(
        root=tmp_path / "root", config=CONFIG, summarizer=summary_model
    )
    agent = create_agent(agent_model, tools=[run], middleware=[middleware])
    task = HumanMessage("Fix the parser.\nNever edit tests/.")
    config: Any = {"configurable": {"thread_id": "t1"}, "recursion_limit": 200}
    try:
        state = asyncio.run(agent.ainvoke({"messages": [task]}, config))
    finally:
        middleware.close()
    assert agent_model.summaries == []
    summary_model.received = agent_model.received
    _check(summary_model, state)


def test_a_session_with_its_own_summarizer_refuses_a_second_one(tmp_path: Path) -> None:
    """Giving a summarizer to both Budget.open and the middleware is a ConfigError naming both places."""
    with (
        Budget.open(tmp_path / "s", CONFIG, summarizer=summarizers.extractive()) as session,
        pytest.raises(ConfigError, match=r"Budget\.open"),
    ):
        ToolBudgetMiddleware(session, summarizer="agent")


def test_chat_model_summarizer_sends_the_prompt_and_transcript() -> None:
    """chat_model_summarizer asks the chat model under the summary prompt with the transcript, and returns its text."""
    model = WorkingModel()
    summarize = chat_model_summarizer(model)
    history = [HumanMessage("Fix the parser."), AIMessage(content="Looking.")]
    assert summarize(history) == SUMMARY
    system, human = model.summaries[0]
    assert system.text == summarizers.PROMPT
    assert human.text == "[human] Fix the parser.\n[ai] Looking."


def test_third_refusal_compacts_and_the_run_goes_on(tmp_path: Path) -> None:
    """A provider refusing long prompts: two harder trims, then the third refusal compacts and the agent finishes instead of ContextOverflow."""
    model = WorkingModel(refuse_over=30)
    config = CONFIG.model_copy(update={"window": 200_000})  # never compacts by itself
    with Budget.open(tmp_path / "s", config) as session:
        middleware = ToolBudgetMiddleware(session, summarizer="agent")
        agent = create_agent(model, tools=[run], middleware=[middleware])
        task = HumanMessage("Fix the parser.\nNever edit tests/.")
        state = agent.invoke({"messages": [task]}, {"recursion_limit": 200})
    assert model.refused >= 3
    assert model.summaries
    assert state["messages"][-1].text == "done"
    assert len(state["messages"]) == 1 + 2 * ROUNDS + 1
