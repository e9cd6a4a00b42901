"""The transcript a summarizer reads: any of the three wire formats (and LangChain's and
pydantic-ai's message objects) as plain text, one ``[role]`` paragraph per part.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from budget.formats._common import field, is_record

__all__ = ["name_args", "render_transcript"]


def render_transcript(messages: Sequence[Any]) -> str:
    """The messages as plain text, one ``[role]`` paragraph per part, in any of the three formats.

    Tool calls show as ``[tool call <id>] name(arguments)``, results as ``[tool result <id>]``
    followed by their text: what a summarizer needs, without the wire format's structure.
    """
    out: list[str] = []
    for message in messages:
        if not is_record(message):
            parts = getattr(message, "parts", None)
            if isinstance(parts, list):  # pydantic-ai's ModelRequest and ModelResponse
                out += [_part(p) for p in parts]
            else:
                out.append(f"[unknown] {message!s}")
            continue
        kind = field(message, "type")
        role = str(field(message, "role") or _TYPE_ROLES.get(str(kind), kind) or "unknown")
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
                out.append(_call(field(tc, "id"), *name_args(tc)))
    return "\n".join(p for p in out if p)


def name_args(tool_call: Any) -> tuple[object, object]:
    """A Chat Completions tool call's function name and arguments; LangChain's ``tool_calls``
    hold them at the top (``name``, ``args``)."""
    fn = field(tool_call, "function")
    if fn is None:
        return field(tool_call, "name"), field(tool_call, "args")
    return field(fn, "name"), field(fn, "arguments")


_TYPE_ROLES = {"human": "user", "ai": "assistant"}
"""LangChain's message types as the roles of the other formats: a summarizer (the extractive
one looks for the first ``[user]`` line as the goal) reads one transcript whatever the format."""

_PART_ROLES = {"system-prompt": "system", "user-prompt": "user", "text": "assistant"}


def _part(part: Any) -> str:
    """One part of a pydantic-ai message, as the transcript shows it."""
    kind = getattr(part, "part_kind", None)
    if kind == "tool-call":
        return _call(part.tool_call_id, part.tool_name, part.args)
    if kind in ("tool-return", "retry-prompt"):
        return f"[tool result {part.tool_call_id}] {_text(part.content)}"
    role = _PART_ROLES.get(str(kind))
    content = getattr(part, "content", None)
    if role is not None and isinstance(content, str):
        return f"[{role}] {content}"
    return f"[{role or 'part'}] <{kind or 'part'}>"


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
        pass
    try:
        return str(value)
    except (RecursionError, ValueError):  # nested past the limit; an integer past its digits
        return "<a value too deep or too long to print>"
