"""Findings of a hostile review of the pydantic-ai integration: each a test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from budget import Budget, summarizers
from tests.compaction import build_log, compaction_config

pytestmark = pytest.mark.usefixtures("needs_pydantic_ai")


def test_a_pydantic_ai_compaction_re_attaches_the_files_read_and_the_tools_called(
    tmp_path: Path,
) -> None:
    """A compaction of pydantic-ai messages carries the file a read_file call returned and the
    tools called, as it does for every other format (ToolCallPart calls were not seen)."""
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    from budget.integrations.pydantic_ai import PYDANTIC_AI

    def round_of(call_id: str, tool: str, args: dict[str, Any], out: str) -> list[Any]:
        return [
            ModelResponse(parts=[ToolCallPart(tool_name=tool, args=args, tool_call_id=call_id)]),
            ModelRequest(parts=[ToolReturnPart(tool_name=tool, content=out, tool_call_id=call_id)]),
        ]

    messages: list[Any] = [
        ModelRequest(parts=[UserPromptPart(content="Fix the parser.\nNever edit tests/.")]),
        *round_of("r1", "read_file", {"path": "src/parser.py"}, "def parse(): ...  # SOURCE\n"),
    ]
    for step in range(12):
        messages += round_of(f"c{step}", "bash", {"cmd": "make"}, build_log(step))
    config = compaction_config("manual")
    with Budget.open(
        tmp_path / "s", config, summarizer=summarizers.extractive(), format=PYDANTIC_AI
    ) as session:
        assert session.compact(messages)
        summary = session.prepare(messages).messages[0]["content"]
    assert '<file path="src/parser.py"' in summary
    assert "# SOURCE" in summary
    assert "read_file, bash" in summary
