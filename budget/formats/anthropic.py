"""Anthropic Messages: ``tool_use`` blocks in assistant messages, ``tool_result`` blocks in user ones."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from budget._errors import InputError
from budget._view import EMPTY_SCAN, Call, RawResult, Scanned

__all__ = ["ANTHROPIC", "AnthropicFormat"]

_ROLES = frozenset({"user", "assistant"})


def _type_name(value: object) -> str:
    return type(value).__name__


def result_text(content: object, where: str) -> tuple[str, int]:
    """The text of a tool_result's content and how many non-text parts it has."""
    if content is None:
        return "", 0
    if isinstance(content, str):
        return content, 0
    if not isinstance(content, list):
        raise InputError(
            f"{where}.content must be a string or a list of blocks, not {_type_name(content)}"
        )
    texts: list[str] = []
    others = 0
    for k, part in enumerate(content):
        if not isinstance(part, dict):
            raise InputError(f"{where}.content[{k}] must be a dict, not {_type_name(part)}")
        if part.get("type") == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise InputError(
                    f"{where}.content[{k}].text must be a string, not {_type_name(text)}"
                )
            texts.append(text)
        else:
            others += 1
    return "\n".join(texts), others


def replace_text(content: object, text: str) -> object:
    """``content`` with its text parts replaced by ``text``; images and other parts kept in place."""
    if not isinstance(content, list):
        return text
    out: list[Any] = []
    placed = False
    for part in content:
        if isinstance(part, dict) and part.get("type") == "text":
            if not placed:
                # The first text part keeps its other keys (a cache_control, say).
                out.append({**part, "text": text})
                placed = True
            continue
        out.append(part)
    if not placed:
        out.insert(0, {"type": "text", "text": text})
    return out


class AnthropicFormat:
    """The Anthropic Messages format, as plain dicts (what the SDK sends)."""

    name = "anthropic"

    def scan(self, index: int, message: Any) -> Scanned:
        """Validate one message and say which calls and results it holds."""
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise InputError(
                f"{where} must be a dict (an Anthropic message), not {_type_name(message)}"
            )
        role = message.get("role")
        if role not in _ROLES:
            raise InputError(f"{where}.role must be 'user' or 'assistant', not {role!r}")
        content = message.get("content")
        if isinstance(content, str):
            return EMPTY_SCAN
        if not isinstance(content, list):
            raise InputError(
                f"{where}.content must be a string or a list of blocks, not {_type_name(content)}"
            )
        calls: list[Call] = []
        results: list[RawResult] = []
        for j, block in enumerate(content):
            bw = f"{where}.content[{j}]"
            if not isinstance(block, dict):
                raise InputError(f"{bw} must be a dict (a content block), not {_type_name(block)}")
            kind = block.get("type")
            if kind == "tool_use":
                if role != "assistant":
                    raise InputError(f"{bw} is a tool_use block in a {role} message")
                call_id, name = block.get("id"), block.get("name")
                if not isinstance(call_id, str) or not call_id:
                    raise InputError(f"{bw}.id must be a non-empty string, not {call_id!r}")
                if not isinstance(name, str):
                    raise InputError(f"{bw}.name must be a string, not {_type_name(name)}")
                calls.append(Call(call_id, name))
            elif kind == "tool_result":
                if role != "user":
                    raise InputError(f"{bw} is a tool_result block in a {role} message")
                call_id = block.get("tool_use_id")
                if not isinstance(call_id, str) or not call_id:
                    raise InputError(
                        f"{bw}.tool_use_id must be a non-empty string, not {call_id!r}"
                    )
                text, others = result_text(block.get("content"), bw)
                results.append(RawResult(call_id, j, text, block.get("is_error") is True, others))
        if not calls and not results:
            return EMPTY_SCAN
        return Scanned(tuple(calls), tuple(results), opens_round=bool(calls))

    def rewrite(self, message: Any, texts: Mapping[int, str]) -> Any:
        """A new message whose tool_result blocks at the given slots show the given texts."""
        content = list(message["content"])
        for slot, text in texts.items():
            block = content[slot]
            content[slot] = {**block, "content": replace_text(block.get("content"), text)}
        return {**message, "content": content}


ANTHROPIC = AnthropicFormat()
