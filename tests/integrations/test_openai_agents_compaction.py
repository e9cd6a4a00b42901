"""OpenAI Agents SDK: the input filter compacts inside a real ``Runner`` loop with an async summarizer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from budget import Budget
from tests.compaction import ROUNDS, AsyncCounting

pytestmark = pytest.mark.usefixtures("needs_openai_agents")


def test_runner_compacts_with_an_async_summarizer(tmp_path: Path) -> None:
    """The filter given an async summarizer compacts the run's input; the run's own items keep everything."""
    from agents import Agent, RunConfig, Runner

    from budget.integrations.openai_agents import toolbudget_input_filter
    from tests.integrations._openai_agents_compaction_kit import CONFIG, WorkingModel, run

    summarize = AsyncCounting()

    model = WorkingModel()
    with Budget.open(tmp_path / "s", CONFIG) as session:
        budgeting = toolbudget_input_filter(session, summarizer=summarize)
        agent = Agent(name="builder", model=model, tools=[run])
        config = RunConfig(call_model_input_filter=budgeting, tracing_disabled=True)
        task = "Fix the parser.\nNever edit tests/."
        result = asyncio.run(Runner.run(agent, task, run_config=config, max_turns=100))

    assert result.final_output == "done"
    assert summarize.calls
    compacted = [items for items in model.received if "<summary>" in str(items[0]["content"])]
    assert compacted
    first = compacted[-1][0]
    assert first["role"] == "user"
    assert "Never edit tests/." in first["content"]
    assert len(compacted[-1]) < len(result.to_input_list())
    outputs = [i for i in result.to_input_list() if i.get("type") == "function_call_output"]
    assert len(outputs) == ROUNDS
