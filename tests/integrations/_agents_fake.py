"""An OpenAI Agents SDK model base for the tests: it records the input items and the tools it
was offered, and builds the responses, so a fake model only says what it replies (``reply``)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from agents import Model, ModelResponse, Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

__all__ = ["RecordingModel"]


class RecordingModel(Model):
    """A model that records each request's items and tool names, then asks :meth:`reply`."""

    def __init__(self) -> None:
        self.received: list[list[Any]] = []
        self.offered: list[list[str]] = []

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
        self.offered.append([t.name for t in tools])
        return self.reply(items)

    def reply(self, items: list[Any]) -> ModelResponse:
        """The response to a request whose input is ``items``."""
        raise NotImplementedError

    @staticmethod
    def call(name: str, args: dict[str, Any], call_id: str) -> ModelResponse:
        """A response calling tool ``name`` with ``args``."""
        call = ResponseFunctionToolCall(
            type="function_call", call_id=call_id, name=name, arguments=json.dumps(args)
        )
        return ModelResponse(output=[call], usage=Usage(requests=1), response_id=None)

    @staticmethod
    def answer(text: str) -> ModelResponse:
        """A response with the final answer ``text``."""
        part = ResponseOutputText(type="output_text", text=text, annotations=[])
        message = ResponseOutputMessage(
            id="msg_1", type="message", role="assistant", status="completed", content=[part]
        )
        return ModelResponse(output=[message], usage=Usage(requests=1), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("this test model does not stream")
