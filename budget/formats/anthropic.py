"""Anthropic Messages: ``tool_use`` blocks in assistant messages, ``tool_result`` blocks in user ones."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from pydantic import BaseModel

from budget._errors import InputError
from budget._view import (
    Call,
    RawResult,
    Scanned,
    build_call,
    build_raw,
    build_scanned,
)
from budget.formats._common import (
    NO_CALL,
    call_facts,
    field,
    is_record,
    parts_text,
    replace_parts,
    require_str,
    to_dict,
    type_name,
)
from budget.formats._shapes import ShapedFormat, require_fit

__all__ = ["ANTHROPIC", "AnthropicFormat"]

_ROLES = ("user", "assistant")  # a tuple: a role may be any value, even unhashable


def result_text(content: object, where: str) -> tuple[str, int]:
    """The text of a tool_result's content and how many non-text parts it has."""
    if content is not None and not isinstance(content, str | list | tuple):
        raise InputError(
            f"{where}.content must be a string or a list of blocks, not {type_name(content)}"
        )
    return parts_text(content, f"{where}.content", ("text",))


def replace_text(content: object, text: str) -> object:
    """``content`` with its text parts replaced by ``text``; images and other parts kept in place."""
    return replace_parts(content, text, "text")


def _where(index: int, block: int) -> str:
    """Where block ``block`` of message ``index`` is, for an error message."""
    return f"messages[{index}].content[{block}]"


def _getter(block: object, index: int, j: int) -> Callable[[str], Any]:
    """How to read block ``j`` of message ``index``'s fields: ``dict.get``, or :func:`field`."""
    if type(block) is dict:
        return block.get
    if not is_record(block):
        raise InputError(
            f"{_where(index, j)} must be a dict (a content block), not {type_name(block)}"
        )
    return partial(field, block)


class AnthropicFormat(ShapedFormat):
    """The Anthropic Messages format: dicts (what the SDK sends) or the SDK's models.

    An assistant message may be a ``{"role": "assistant", "content": response.content}`` dict
    whose blocks are SDK models, or an ``anthropic.types.Message`` itself: both are read as is.
    A ``Message`` goes out as ``{"role", "content"}`` (see :meth:`outgoing`).
    """

    name = "anthropic"

    def scan(self, index: int, message: Any) -> Scanned:
        """Validate one message and say which calls and results it holds."""
        # Error locations are spelled out on the error path only (a resume scans every message).
        if not is_record(message):
            raise InputError(
                f"messages[{index}] must be a dict (an Anthropic message), not {type_name(message)}"
            )
        role = message.get("role") if type(message) is dict else field(message, "role")
        if role not in _ROLES:
            raise InputError(f"messages[{index}].role must be 'user' or 'assistant', not {role!r}")
        content = message.get("content") if type(message) is dict else field(message, "content")
        if isinstance(content, str):
            require_fit(self.name, index, message)
            return NO_CALL[role]
        if not isinstance(content, list | tuple):
            raise InputError(
                f"messages[{index}].content must be a string or a list of blocks, not "
                f"{type_name(content)}"
            )
        calls: list[Call] = []
        results: list[RawResult] = []
        for j, block in enumerate(content):
            get = _getter(block, index, j)
            kind = get("type")
            if kind == "tool_use":
                if role != "assistant":
                    raise InputError(f"{_where(index, j)} is a tool_use block in a {role} message")
                call_id = get("id")
                if not isinstance(call_id, str) or not call_id:
                    require_str(call_id, f"{_where(index, j)}.id")
                name = get("name")
                if not isinstance(name, str):
                    raise InputError(
                        f"{_where(index, j)}.name must be a string, not {type_name(name)}"
                    )
                calls.append(build_call(call_id, name, *call_facts(name, get("input"))))
            elif kind == "tool_result":
                if role != "user":
                    raise InputError(
                        f"{_where(index, j)} is a tool_result block in a {role} message"
                    )
                call_id = get("tool_use_id")
                if not isinstance(call_id, str) or not call_id:
                    require_str(call_id, f"{_where(index, j)}.tool_use_id")
                content_of = get("content")
                if type(content_of) is str:
                    text, others = content_of, 0
                else:
                    text, others = result_text(content_of, _where(index, j))
                results.append(build_raw(call_id, j, text, get("is_error") is True, others))
        if not calls and not results:
            require_fit(self.name, index, message)  # a Chat assistant's tool_calls, say
            return NO_CALL[role]
        return build_scanned(tuple(calls), tuple(results), bool(calls))

    def rewrite(self, message: Any, texts: Mapping[int, str]) -> Any:
        """A new message whose tool_result blocks at the given slots show the given texts."""
        out = to_dict(message)  # a model is dumped whole: its blocks become dicts too
        content = list(out["content"])
        for slot, text in texts.items():
            block = content[slot]
            content[slot] = {
                **to_dict(block),
                "content": replace_text(field(block, "content"), text),
            }
        out["content"] = content
        return out

    def outgoing(self, message: Any) -> Any:
        """``message`` as a request sends it: itself, but a whole response (``anthropic.types.Message``
        or ``BetaMessage``) as ``{"role", "content"}``, its blocks as the SDK sends them.

        A response's ``id``, ``model``, ``stop_reason`` and ``usage`` are not request fields: the
        API refuses a message carrying them. The history keeps the response object.
        """
        if type(message) is dict or not isinstance(message, BaseModel):
            return message
        if field(message, "type") != "message":
            return message
        dumped = to_dict(message)
        return {"role": dumped.get("role"), "content": dumped.get("content")}

    def tool_definition(
        self, name: str, description: str, parameters: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A tool definition as the Messages API takes it (``input_schema``)."""
        return {"name": name, "description": description, "input_schema": dict(parameters)}


ANTHROPIC = AnthropicFormat()
