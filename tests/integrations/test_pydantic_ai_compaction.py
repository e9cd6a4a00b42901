"""pydantic-ai: the capability compacts inside a real agent run (a FunctionModel) with an async summarizer."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from budget import Budget, summarizers
from tests.compaction import ROUNDS

pytestmark = pytest.mark.usefixtures("needs_pydantic_ai")


def test_capability_compacts_with_an_async_summarizer(tmp_path: Path) -> None:
    """The capability given an async summarizer sends the summary as a user prompt; the run's history keeps every return."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelRequest, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    from budget.integrations.pydantic_ai import ToolBudgetCapability
    from tests.integrations._pydantic_ai_compaction_kit import CONFIG, Worker, first_prompt, run

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
    compacted = [msgs for msgs in worker.received if "<summary>" in first_prompt(msgs)]
    assert compacted
    assert "Never edit tests/." in first_prompt(compacted[-1])
    returns = [
        p
        for m in result.all_messages()
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    ]
    assert len(returns) == ROUNDS
    assert len(compacted[-1]) < len(result.all_messages())


def test_history_processor_of_a_compacting_session_sends_the_summary(tmp_path: Path) -> None:
    """The history processor of a session that compacts (ProcessHistory) sends the summary as a
    user prompt and the run finishes, instead of a ValueError from pairing a shorter copy."""
    from pydantic_ai import Agent
    from pydantic_ai.capabilities import ProcessHistory
    from pydantic_ai.models.function import FunctionModel

    from budget.integrations.pydantic_ai import toolbudget_history_processor
    from tests.integrations._pydantic_ai_compaction_kit import CONFIG, Worker, first_prompt, run

    worker = Worker()
    with Budget.open(tmp_path / "s", CONFIG, summarizer=summarizers.extractive()) as session:
        processor = ProcessHistory(toolbudget_history_processor(session))
        agent = Agent(FunctionModel(worker), tools=[run], capabilities=[processor])
        result = asyncio.run(agent.run("Fix the parser.\nNever edit tests/."))

    assert result.output == "done"
    compacted = [msgs for msgs in worker.received if "<summary>" in first_prompt(msgs)]
    assert compacted
    assert "Never edit tests/." in first_prompt(compacted[-1])
