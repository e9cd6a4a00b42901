"""pydantic-ai: the capability compacts inside a real agent run (a FunctionModel) with an async summarizer."""

# ruff: noqa: E402 - the framework is imported after its CI guard (require_module below).
from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests._ci import require_module
from tests.compaction import AUTO, ROUNDS, build_log

require_module("pydantic_ai", extra="pydantic-ai")

from pydantic_ai import Agent
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

from budget import Budget, summarizers
from budget.integrations.pydantic_ai import ToolBudgetCapability

CONFIG = AUTO
"""A 4k window: the run passes the 3,000-token threshold after about a dozen rounds."""


def run(step: int) -> str:
    """Run one step of the build and return its log."""
    return build_log(step)


@dataclass
class Worker:
    """A model function calling ``run`` with the next step its messages show, then answering."""

    received: list[list[ModelMessage]] = field(default_factory=list)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.received.append(list(messages))
        steps = [
            int(p.args_as_dict()["step"])
            for m in messages
            if isinstance(m, ModelResponse)
            for p in m.parts
            if isinstance(p, ToolCallPart)
        ]
        done = steps[-1] + 1 if steps else 0
        if done < ROUNDS:
            return ModelResponse(parts=[ToolCallPart("run", {"step": done}, f"call_{done}")])
        return ModelResponse(parts=[TextPart("done")])


def _first_prompt(messages: list[ModelMessage]) -> str:
    """The user prompt the messages start with ("" when they start otherwise)."""
    first = messages[0]
    if not isinstance(first, ModelRequest):
        return ""
    part = first.parts[0]
    return str(part.content) if isinstance(part, UserPromptPart) else ""


def test_capability_compacts_with_an_async_summarizer(tmp_path: Path) -> None:
    """The capability given an async summarizer sends the summary as a user prompt; the run's history keeps every return."""
    transcripts: list[str] = []
    extractive = summarizers.extractive()

    async def summarize(messages: Sequence[Any]) -> str:
        await asyncio.sleep(0)
        text = extractive(messages)
        assert isinstance(text, str)
        transcripts.append(text)
        return text

    worker = Worker()
    with Budget.open(tmp_path / "s", CONFIG) as session:
        capability = ToolBudgetCapability(session, summarizer=summarize)
        agent = Agent(FunctionModel(worker), tools=[run], capabilities=[capability])
        result = asyncio.run(agent.run("Fix the parser.\nNever edit tests/."))

    assert result.output == "done"
    assert transcripts
    assert "Fix the parser." in transcripts[0]  # pydantic-ai parts rendered, not a repr
    compacted = [msgs for msgs in worker.received if "<summary>" in _first_prompt(msgs)]
    assert compacted
    assert "Never edit tests/." in _first_prompt(compacted[-1])
    returns = [
        p
        for m in result.all_messages()
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    ]
    assert len(returns) == ROUNDS
    assert len(compacted[-1]) < len(result.all_messages())
