"""The OpenAI Agents SDK's ``ToolOutputTrimmer``: the real class from the installed package.

Followed (and run): ``agents/extensions/tool_output_trimmer.py`` of ``openai-agents`` (a
``call_model_input_filter``; defaults ``recent_turns=2``, ``max_output_chars=500``,
``preview_chars=200``). Before each model call it finds the second-to-last user message of the
Responses input; every ``function_call_output`` before it whose output is longer than 500
characters becomes ``[Trimmed: <tool> output — <N> chars → 200 char preview]`` and the first 200
characters followed by ``...`` (structured outputs get a shorter header and keep their text
preview). It runs from scratch on every call, so the boundary slides with each user message.

Mapping: the history is converted to Responses input items each request (a prompt becomes a
``user`` message, a tool_use a ``function_call``, a tool_result a ``function_call_output`` whose
output is the text, or a list of ``input_text``/``input_image`` parts when the result holds an
image), handed to the trimmer through ``CallModelData``, and every output item it replaced
carries its new output back into the matching tool_result. Only prompts are ``user`` items, as in
the SDK, so a single-task session is never trimmed. Nothing is recoverable.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._jsonbytes import dumps
from benchmarks.strategies._base import Declaration, Messages, Unrecoverable
from benchmarks.strategies._common import apply_edits, is_prompt, with_content
from benchmarks.trace import Trace, Usage

__all__ = ["STRATEGY", "OpenAIAgentsConfig", "to_items"]


@dataclass(frozen=True, slots=True)
class OpenAIAgentsConfig:
    """``ToolOutputTrimmer`` arguments; the SDK's defaults."""

    recent_turns: int = 2
    max_output_chars: int = 500
    preview_chars: int = 200
    trimmable_tools: frozenset[str] | None = None
    """None: every tool's output may be trimmed."""


def _output(content: Any) -> Any:
    """A tool result's content as a Responses ``function_call_output`` output."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else str(content)
    if all(isinstance(b, dict) and b.get("type") == "text" for b in content):
        return "\n".join(str(b.get("text", "")) for b in content)
    parts: list[dict[str, str]] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            parts.append({"type": "input_text", "text": str(block.get("text", ""))})
        elif block.get("type") == "image":
            source = block.get("source") or {}
            if source.get("type") == "base64":
                url = f"data:{source.get('media_type', 'image/png')};base64,{source.get('data')}"
            else:
                url = str(source.get("url", ""))
            parts.append({"type": "input_image", "image_url": url})
    return parts


def to_items(messages: Iterable[dict[str, Any]]) -> list[tuple[dict[str, Any], str | None]]:
    """Responses input items for a canonical history, each with the call id it answers."""
    items: list[tuple[dict[str, Any], str | None]] = []
    for message in messages:
        content: Any = message.get("content") or []
        role = message.get("role")
        if isinstance(content, str):
            items.append(({"role": role, "content": content}, None))
            continue
        if role == "assistant":
            text = "".join(
                str(b.get("text", ""))
                for b in content
                if isinstance(b, dict) and b.get("type") == "text"
            )
            if text:
                items.append(({"role": "assistant", "content": text}, None))
            for b in content:
                if isinstance(b, dict) and b.get("type") == "tool_use":
                    call = {
                        "type": "function_call",
                        "call_id": str(b.get("id", "")),
                        "name": str(b.get("name", "")),
                        "arguments": dumps(b.get("input") or {}).decode(),
                    }
                    items.append((call, None))
            continue
        rest: list[Any] = []
        for b in content:
            if isinstance(b, dict) and b.get("type") == "tool_result":
                call_id = str(b.get("tool_use_id", ""))
                out = {
                    "type": "function_call_output",
                    "call_id": call_id,
                    "output": _output(b.get("content")),
                }
                items.append((out, call_id))
            else:
                rest.append(b)
        if rest and is_prompt(message):
            items.append(({"role": "user", "content": rest}, None))
        elif rest:
            # Text riding along with tool results is not a new user turn in the SDK's terms.
            items.append(({"role": "system", "content": rest}, None))
    return items


class _Session(Unrecoverable):
    """The installed Agents SDK ``ToolOutputTrimmer``, run on each request (stateless: one
    trimmer)."""

    def __init__(self, config: OpenAIAgentsConfig, trace: Trace, workdir: Path) -> None:
        from agents.extensions import ToolOutputTrimmer

        self.config = config
        self.trimmer = ToolOutputTrimmer(
            recent_turns=config.recent_turns,
            max_output_chars=config.max_output_chars,
            preview_chars=config.preview_chars,
            trimmable_tools=config.trimmable_tools,
        )

    def prepare(self, messages: Messages, *, usage: Usage | None, now: float | None) -> Messages:
        from agents.run_config import CallModelData, ModelInputData

        pairs = to_items(messages)
        items: Any = [item for item, _ in pairs]
        # The trimmer reads only ``model_data``; the agent is irrelevant to it.
        agent: Any = None
        data = CallModelData(
            model_data=ModelInputData(input=items, instructions=None), agent=agent, context=None
        )
        result = self.trimmer(data)
        changed: dict[str, Any] = {}
        for (before, call_id), after in zip(pairs, result.input, strict=True):
            if after is not before and call_id is not None:
                changed[call_id] = after.get("output")
        if not changed:
            return list(messages)
        edits: dict[int, dict[int, dict[str, Any]]] = {}
        for i, message in enumerate(messages):
            content = message.get("content")
            if message.get("role") != "user" or not isinstance(content, list):
                continue
            for j, block in enumerate(content):
                if (
                    isinstance(block, dict)
                    and block.get("type") == "tool_result"
                    and block.get("tool_use_id") in changed
                ):
                    new = changed[str(block["tool_use_id"])]
                    edits.setdefault(i, {})[j] = with_content(block, new)
        return apply_edits(messages, edits)


STRATEGY = Declaration("openai-agents", OpenAIAgentsConfig, _Session)
