"""The framework side of tests/integrations/test_openai_agents_compaction.py: its tools, models and
helpers, imported by each test so that collecting the suite imports no OpenAI Agents SDK."""

from __future__ import annotations

import json
from typing import Any

from agents import ModelResponse, function_tool

from tests.compaction import AUTO, ROUNDS, build_log
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
