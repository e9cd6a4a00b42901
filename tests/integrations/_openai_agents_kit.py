"""The framework side of tests/integrations/test_openai_agents.py: its tools, models and
helpers, imported by each test so that collecting the suite imports no OpenAI Agents SDK."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agents import ModelResponse, Usage, function_tool

from tests.integrations._agentkit import (
    PAGE_LIMIT,
    PAGE_OFFSET,
    envelope_ref,
)
from tests.integrations._agents_fake import RecordingModel


@function_tool
def read_file(path: str) -> str:
    """Read a text file and return its contents.

    Args:
        path: The file to read.
    """
    return Path(path).read_text(encoding="utf-8")


def tool_outputs(items: list[Any]) -> list[dict[str, Any]]:
    return [i for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"]


def tool_names(items: list[Any]) -> dict[str, str]:
    return {
        i["call_id"]: i["name"]
        for i in items
        if isinstance(i, dict) and i.get("type") == "function_call"
    }


class ReadingModel(RecordingModel):
    """A model that decides its next output from the input items it receives.

    It reads ``path``; when the result comes back as an envelope it reads a page of it back
    through the read-back tool; then it answers.
    """

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def reply(self, items: list[Any]) -> ModelResponse:
        """Read the file, then a page of its envelope back, then answer."""
        outputs = tool_outputs(items)
        names = tool_names(items)
        if not outputs:
            return self.call("read_file", {"path": self.path}, "call_read_1")
        last = outputs[-1]
        if names[last["call_id"]] == "read_file":
            ref = envelope_ref(str(last["output"]))
            if ref is not None:
                args = {"ref": ref, "offset": PAGE_OFFSET, "limit": PAGE_LIMIT}
                return self.call("toolbudget_read", args, "call_back_1")
        return self.answer("done")


class ShellModel(RecordingModel):
    """A model that runs one shell command through the SDK's ShellTool, then answers."""

    def reply(self, items: list[Any]) -> ModelResponse:
        """Call the shell once (a ``shell_call`` item), then answer once its output is back."""
        from openai.types.responses import ResponseFunctionShellToolCall

        if any(isinstance(i, dict) and i.get("type") == "shell_call_output" for i in items):
            return self.answer("done")
        call = ResponseFunctionShellToolCall.model_validate(
            {
                "id": "sh_1",
                "call_id": "call_shell_1",
                "type": "shell_call",
                "status": "completed",
                "action": {
                    "commands": ["pytest -q"],
                    "timeout_ms": None,
                    "max_output_length": None,
                },
            }
        )
        return ModelResponse(output=[call], usage=Usage(requests=1), response_id=None)
