"""Generic Anthropic message lists: ``[messages]`` or ``{"system": ..., "messages": [...]}`` (a
request body: its ``model`` is the trace's, which sets its window and cache rules).

Also home of the Anthropic content normalization that the Claude Code importer reuses.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.importers._common import (
    Block,
    TraceBuilder,
    fail,
    json_text,
    read_json,
    text_block,
    text_blocks,
)
from benchmarks.trace import Trace

FORMAT = "anthropic"

_KEPT_USER_BLOCKS = frozenset({"image", "document"})


def result_content(content: Any, stats: Counter[str]) -> list[Block]:
    """A tool result's content as a list of text and image blocks."""
    if content is None:
        return []
    if isinstance(content, str):
        return text_blocks(content)
    if not isinstance(content, list):
        return text_blocks(json_text(content))
    out: list[Block] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            out.extend(text_blocks(str(part.get("text", ""))))
        elif kind == "image":
            out.append(part)
        elif kind == "tool_reference":
            # Tool search hands back references the API expands into tool definitions; a short
            # text keeps the result's shape canonical without inventing the definition.
            stats["tool_references_as_text"] += 1
            out.append(text_block(f"[tool_reference: {part.get('tool_name')}]"))
        else:
            stats["result_parts_as_text"] += 1
            out.append(text_block(json_text(part)))
    return out


def tool_result(block: dict[str, Any], stats: Counter[str]) -> Block:
    """A canonical tool_result block from a recorded one."""
    out: Block = {
        "type": "tool_result",
        "tool_use_id": str(block.get("tool_use_id")),
        "content": result_content(block.get("content"), stats),
    }
    if isinstance(block.get("is_error"), bool):
        out["is_error"] = block["is_error"]
    return out


def blocks(content: Any, role: str, stats: Counter[str]) -> list[Block]:
    """Canonical blocks of one message; thinking and unknown blocks are dropped (counted)."""
    if isinstance(content, str):
        return text_blocks(content)
    if not isinstance(content, list):
        raise ValueError(f"content is {type(content).__name__}, not a string or a list")
    out: list[Block] = []
    for block in content:
        if isinstance(block, str):
            out.extend(text_blocks(block))
            continue
        kind = block.get("type")
        if kind == "text":
            out.extend(text_blocks(str(block.get("text", ""))))
        elif kind == "tool_use" and role == "assistant":
            out.append(
                {
                    "type": "tool_use",
                    "id": str(block.get("id")),
                    "name": str(block.get("name")),
                    "input": block.get("input") if isinstance(block.get("input"), dict) else {},
                }
            )
        elif kind == "tool_result" and role == "user":
            out.append(tool_result(block, stats))
        elif kind in _KEPT_USER_BLOCKS and role == "user":
            out.append(block)
        else:
            # Thinking is not part of what budgeting changes; the provider's usage still counts it.
            stats[f"dropped_{kind}_blocks"] += 1
    return out


def load(path: Path, root: Path) -> list[Trace]:
    """One trace: one request per assistant message, plus one if the list ends on a user turn."""
    doc = read_json(path)
    system: Any = ""
    model = None
    if isinstance(doc, dict):
        system = doc.get("system") or ""
        model = doc.get("model") if isinstance(doc.get("model"), str) else None
        doc = doc.get("messages")
    if not isinstance(doc, list):
        raise fail(path, "expected a list of messages or an object with 'messages'")
    if isinstance(system, list):
        system = "\n\n".join(str(b.get("text", "")) for b in system if isinstance(b, dict))
    builder = TraceBuilder()
    for i, msg in enumerate(doc):
        role = msg.get("role") if isinstance(msg, dict) else None
        if role not in ("user", "assistant"):
            raise fail(path, f"message {i} has role {role!r}, not 'user' or 'assistant'")
        try:
            content = blocks(msg.get("content"), role, builder.stats)
        except ValueError as exc:
            raise fail(path, f"message {i}: {exc}") from exc
        if role == "assistant":
            builder.assistant(str(i), content)
        else:
            builder.user_message(content)
    return builder.plain(FORMAT, path, root, "anthropic", str(system), model)
