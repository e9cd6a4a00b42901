"""Compaction's pure half: the transcript a summarizer reads, the tail kept, the copy projected.

Nothing here calls a model, touches a file or edits a message: the session (``Budget``) asks these
functions where to cut and what the copy is, and records the checkpoint itself (SPEC §11).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from budget.formats._common import field, is_record

__all__ = ["render_transcript"]


def render_transcript(messages: Sequence[Any]) -> str:
    """The messages as plain text, one ``[role]`` paragraph per part, in any of the three formats.

    Tool calls show as ``[tool call <id>] name(arguments)``, results as ``[tool result <id>]``
    followed by their text: what a summarizer needs, without the wire format's structure.
    """
    out: list[str] = []
    for message in messages:
        if not is_record(message):
            out.append(f"[unknown] {message!s}")
            continue
        role = str(field(message, "role") or field(message, "type") or "unknown")
        kind = field(message, "type")
        if kind == "function_call":
            out.append(
                _call(
                    field(message, "call_id"), field(message, "name"), field(message, "arguments")
                )
            )
        elif kind == "function_call_output":
            out.append(
                f"[tool result {field(message, 'call_id')}] {_text(field(message, 'output'))}"
            )
        elif role == "tool":
            out.append(
                f"[tool result {field(message, 'tool_call_id')}] {_text(field(message, 'content'))}"
            )
        else:
            content = field(message, "content")
            if isinstance(content, str):
                out.append(f"[{role}] {content}")
            elif isinstance(content, list):
                out += [_block(role, b) for b in content]
            for tc in field(message, "tool_calls") or []:
                fn = field(tc, "function")
                out.append(_call(field(tc, "id"), field(fn, "name"), field(fn, "arguments")))
    return "\n".join(p for p in out if p)


def _block(role: str, block: Any) -> str:
    if isinstance(block, str):
        return f"[{role}] {block}"
    kind = field(block, "type")
    if kind == "tool_use":
        return _call(field(block, "id"), field(block, "name"), field(block, "input"))
    if kind == "tool_result":
        return f"[tool result {field(block, 'tool_use_id')}] {_text(field(block, 'content'))}"
    text = field(block, "text")
    if isinstance(text, str):
        return f"[{role}] {text}" if text else ""
    # Images, thinking and other parts: named, not rendered (a summary has no use for base64).
    return f"[{role}] <{kind or 'part'}>"


def _call(call_id: object, name: object, arguments: object) -> str:
    args = arguments if isinstance(arguments, str) else _json(arguments)
    return f"[tool call {call_id}] {name}({args})"


def _text(content: object) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [field(p, "text") if is_record(p) else p for p in content]
        return "\n".join(p if isinstance(p, str) else "<part>" for p in parts)
    return _json(content)


def _json(value: object) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return str(value)
