"""OpenAI Agents SDK: the input filter compacts inside a real ``Runner`` loop with an async summarizer."""

# ruff: noqa: E402 - the framework is imported after its CI guard (require_module below).
from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests._ci import require_module
from tests.compaction import AUTO, ROUNDS, build_log

require_module("agents", extra="openai-agents")

from agents import Agent, ModelResponse, RunConfig, Runner, function_tool

from budget import Budget, summarizers
from budget.integrations.openai_agents import toolbudget_input_filter
from tests.integrations._agents_fake import RecordingModel

CONFIG = AUTO
"""A 4k window: the run passes the 3,000-token threshold after about a dozen rounds."""


@function_tool
def run(step: int) -> str:
    """Run one step of the build and return its log.

    Args:
        step: The step to run.
    """
    return build_log(step)


class WorkingModel(RecordingModel):
    """A model that calls ``run`` with the next step number its input shows, then answers."""

    def reply(self, items: list[Any]) -> ModelResponse:
        """Call ``run`` for the step after the last one the input shows, or answer."""
        steps = [
            json.loads(i["arguments"])["step"]
            for i in items
            if isinstance(i, dict) and i.get("type") == "function_call"
        ]
        done = steps[-1] + 1 if steps else 0
        if done < ROUNDS:
            return self.call("run", {"step": done}, f"call_{done}")
        return self.answer("done")


def test_runner_compacts_with_an_async_summarizer(tmp_path: Path) -> None:
    """The filter given an async summarizer compacts the run's input; the run's own items keep everything."""
    calls: list[int] = []
    extractive = summarizers.extractive()

    async def summarize(messages: Sequence[Any]) -> str:
        await asyncio.sleep(0)
        calls.append(len(messages))
        text = extractive(messages)
        assert isinstance(text, str)
        return text

    model = WorkingModel()
    with Budget.open(tmp_path / "s", CONFIG) as session:
        budgeting = toolbudget_input_filter(session, summarizer=summarize)
        agent = Agent(name="builder", model=model, tools=[run])
        config = RunConfig(call_model_input_filter=budgeting, tracing_disabled=True)
        task = "Fix the parser.\nNever edit tests/."
        result = asyncio.run(Runner.run(agent, task, run_config=config, max_turns=100))

    assert result.final_output == "done"
    assert calls
    compacted = [items for items in model.received if "<summary>" in str(items[0]["content"])]
    assert compacted
    first = compacted[-1][0]
    assert first["role"] == "user"
    assert "Never edit tests/." in first["content"]
    assert len(compacted[-1]) < len(result.to_input_list())
    outputs = [i for i in result.to_input_list() if i.get("type") == "function_call_output"]
    assert len(outputs) == ROUNDS
