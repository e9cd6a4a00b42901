"""LangChain v1: the middleware compacts inside a real ``create_agent`` loop, summarizing with a chat model."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from budget import Budget, ConfigError, summarizers
from tests.compaction import ROUNDS, AsyncCounting

pytestmark = pytest.mark.usefixtures("needs_langchain")


def test_agent_compacts_with_its_own_model(tmp_path: Path) -> None:
    """summarizer='agent': the agent's model writes the summary (no tools bound), the next calls start with it."""
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from budget.integrations.langchain import ToolBudgetMiddleware
    from tests.integrations._langchain_compaction_kit import CONFIG, WorkingModel, check, run

    model = WorkingModel()
    with Budget.open(tmp_path / "s", CONFIG) as session:
        middleware = ToolBudgetMiddleware(session, summarizer="agent")
        agent = create_agent(model, tools=[run], middleware=[middleware])
        task = HumanMessage("Fix the parser.\nNever edit tests/.")
        state = agent.invoke({"messages": [task]}, {"recursion_limit": 200})
    check(model, state)


def test_async_agent_compacts_with_a_named_model(tmp_path: Path) -> None:
    """A separate summary model given to the middleware (root= sessions, ainvoke) writes every summary; the agent's model writes none."""
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from budget.integrations.langchain import ToolBudgetMiddleware
    from tests.integrations._langchain_compaction_kit import CONFIG, WorkingModel, check, run

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
    check(summary_model, state)


def test_a_session_with_its_own_summarizer_refuses_a_second_one(tmp_path: Path) -> None:
    """Giving a summarizer to both Budget.open and the middleware is a ConfigError naming both places."""
    from budget.integrations.langchain import ToolBudgetMiddleware
    from tests.integrations._langchain_compaction_kit import CONFIG

    with (
        Budget.open(tmp_path / "s", CONFIG, summarizer=summarizers.extractive()) as session,
        pytest.raises(ConfigError, match=r"Budget\.open"),
    ):
        ToolBudgetMiddleware(session, summarizer="agent")


def test_chat_model_summarizer_sends_the_prompt_and_transcript() -> None:
    """chat_model_summarizer asks the chat model under the summary prompt with the transcript, and returns its text."""
    from langchain_core.messages import AIMessage, HumanMessage

    from budget.integrations.langchain import chat_model_summarizer
    from tests.integrations._langchain_compaction_kit import SUMMARY, WorkingModel

    model = WorkingModel()
    summarize = chat_model_summarizer(model)
    history = [HumanMessage("Fix the parser."), AIMessage(content="Looking.")]
    assert summarize(history) == SUMMARY
    system, human = model.summaries[0]
    assert system.text == summarizers.PROMPT
    assert human.text == "[user] Fix the parser.\n[assistant] Looking."


def test_third_refusal_compacts_and_the_run_goes_on(tmp_path: Path) -> None:
    """A provider refusing long prompts: two harder trims, then the third refusal compacts and the agent finishes instead of ContextOverflow."""
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from budget.integrations.langchain import ToolBudgetMiddleware
    from tests.integrations._langchain_compaction_kit import CONFIG, WorkingModel, run

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


def test_async_agent_compacts_with_an_async_summarizer(tmp_path: Path) -> None:
    """An async summarizer given to the middleware is awaited by an ainvoke'd agent (the docs: a
    callable, sync or async), instead of an InputError telling the caller to use aprepare()."""
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from budget.integrations.langchain import ToolBudgetMiddleware
    from tests.integrations._langchain_compaction_kit import CONFIG, WorkingModel, run

    summarize = AsyncCounting()

    model = WorkingModel()
    with Budget.open(tmp_path / "s", CONFIG) as session:
        middleware = ToolBudgetMiddleware(session, summarizer=summarize)
        agent = create_agent(model, tools=[run], middleware=[middleware])
        task = HumanMessage("Fix the parser.\nNever edit tests/.")
        state = asyncio.run(agent.ainvoke({"messages": [task]}, {"recursion_limit": 200}))
    assert summarize.calls
    assert any("<summary>" in str(sent[0].content) for sent in model.received)
    assert len(state["messages"]) > min(len(sent) for sent in model.received)


def test_the_extractive_summary_finds_the_goal_in_a_langchain_history() -> None:
    """LangChain's ``human`` message is the transcript's ``[user]``: the extractive summary's goal
    is its first one (it found none, the transcript said ``[human]``)."""
    from langchain_core.messages import AIMessage, HumanMessage

    summary = summarizers.extractive()([HumanMessage("Fix the parser."), AIMessage("Looking.")])
    assert isinstance(summary, str)
    assert "## Goal\n- [user] Fix the parser." in summary
    assert "## Current work\n- [assistant] Looking." in summary
