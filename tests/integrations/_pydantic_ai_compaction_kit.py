"""The framework side of tests/integrations/test_pydantic_ai_compaction.py: its tools, models and
helpers, imported by each test so that collecting the suite imports no pydantic-ai."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo

from tests.compaction import AUTO, ROUNDS, build_log

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


def first_prompt(messages: list[ModelMessage]) -> str:
    """The user prompt the messages start with ("" when they start otherwise)."""
    first = messages[0]
    if not isinstance(first, ModelRequest):
        return ""
    part = first.parts[0]
    return str(part.content) if isinstance(part, UserPromptPart) else ""
