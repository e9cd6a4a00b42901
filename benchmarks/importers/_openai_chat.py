"""Generic OpenAI chat message lists: ``[messages]`` or ``{"messages": [...]}``.

Leading ``system``/``developer`` messages become the system prompt (a later one becomes user text,
the closest the Anthropic shape has). Assistant ``tool_calls`` become ``tool_use`` blocks and the
``tool`` messages after them one user message of ``tool_result`` blocks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.importers._common import (
    Block,
    TraceBuilder,
    fail,
    parse_arguments,
    read_json,
    text_blocks,
)
from benchmarks.trace import Trace

FORMAT = "openai-chat"


def _image(part: dict[str, Any]) -> Block:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    url = str(url or "")
    if url.startswith("data:") and ";base64," in url:
        media, data = url[5:].split(";base64,", 1)
        return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def content_blocks(content: Any) -> list[Block]:
    """Text and image blocks from an OpenAI ``content`` (string, null, or list of parts)."""
    if content is None:
        return []
    if isinstance(content, str):
        return text_blocks(content)
    if not isinstance(content, list):
        raise ValueError(f"content is {type(content).__name__}, not a string, null or a list")
    out: list[Block] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if isinstance(part, str):
            out.extend(text_blocks(part))
        elif kind in ("text", "input_text", "output_text"):
            out.extend(text_blocks(str(part.get("text", ""))))
        elif kind in ("image_url", "input_image"):  # Responses: image_url a string
            out.append(_image(part))
        elif kind == "refusal":
            out.extend(text_blocks(str(part.get("refusal", ""))))
        else:
            raise ValueError(f"unsupported content part type {kind!r}")
    return out


def _text(blocks: list[Block]) -> str:
    return "\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")


def load(path: Path, root: Path) -> list[Trace]:
    """One trace: one request per assistant message, plus one if the list ends on a user turn."""
    doc = read_json(path)
    model = None
    if isinstance(doc, dict):
        model = doc.get("model") if isinstance(doc.get("model"), str) else None
        doc = doc.get("messages")
    if not isinstance(doc, list):
        raise fail(path, "expected a list of messages or an object with 'messages'")
    builder = TraceBuilder()
    system: list[str] = []
    legacy_calls = 0
    for i, msg in enumerate(doc):
        if not isinstance(msg, dict):
            raise fail(path, f"message {i} is not an object")
        role = msg.get("role")
        try:
            blocks = content_blocks(msg.get("content"))
        except ValueError as exc:
            raise fail(path, f"message {i}: {exc}") from exc
        if role in ("system", "developer"):
            if builder.messages:
                builder.stats["late_system_as_user"] += 1
                builder.user(blocks)
            else:
                system.append(_text(blocks))
        elif role == "user":
            builder.user(blocks)
        elif role == "assistant":
            for call in msg.get("tool_calls") or []:
                function = call.get("function") or {}
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": str(call.get("id")),
                        "name": str(function.get("name")),
                        "input": parse_arguments(function.get("arguments")),
                    }
                )
            legacy = msg.get("function_call")
            if isinstance(legacy, dict):
                legacy_calls += 1
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": f"function_call_{legacy_calls}",
                        "name": str(legacy.get("name")),
                        "input": parse_arguments(legacy.get("arguments")),
                    }
                )
            builder.assistant(str(i), blocks)
        elif role in ("tool", "function"):
            call_id = msg.get("tool_call_id") if role == "tool" else f"function_call_{legacy_calls}"
            builder.user([{"type": "tool_result", "tool_use_id": str(call_id), "content": blocks}])
        else:
            raise fail(path, f"message {i} has role {role!r}")
    return builder.plain(FORMAT, path, root, "openai", "\n\n".join(s for s in system if s), model)
