"""OpenAI Agents SDK: the input filter compacts inside a real ``Runner`` loop with an async summarizer."""

# ruff: noqa: E402 - the framework is imported after its CI guard (require_module below).
from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from tests._ci import require_module
from tests.compaction import AUTO, ROUNDS, build_log

require_module("agents", extra="openai-agents")

from agents import Agent, ModelResponse, RunConfig, Runner, Usage, function_tool
from agents.models.interface import Model
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from budget import Budget, summarizers
from budget.integrations.openai_agents import toolbudget_input_filter

CONFIG = AUTO
"""A 4k window: the run passes the 3,000-token threshold after about a dozen rounds."""


@function_tool
def run(step: int) -> str:
    """Run one step of the build and return its log.

    Args:
        step: The step to run.
    """
    return build_log(step)


class WorkingModel(Model):
    """A model that calls ``run`` with the next step number its input shows, then answers."""

    def __init__(self) -> None:
        self.received: list[list[Any]] = []

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        self.received.append(items)
        steps = [
            json.loads(i["arguments"])["step"]
            for i in items
            if isinstance(i, dict) and i.get("type") == "function_call"
        ]
        done = steps[-1] + 1 if steps else 0
        if done < ROUNDS:
            call = ResponseFunctionToolCall(
                type="function_call",
                call_id=f"call_{done}",
                name="run",
                arguments=json.dumps({"step": done}),
            )
            return ModelResponse(output=[call], usage=Usage(requests=1), response_id=None)
        text = ResponseOutputText(type="output_text", text="done", annotations=[])
        message = ResponseOutputMessage(
            id="msg_1", type="message", role="assistant", status="completed", content=[text]
        )
        return ModelResponse(output=[message], usage=Usage(requests=1), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("this test model does not stream")


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
