"""OpenAI Chat Completions: ``tool_calls`` on assistant messages, ``role: "tool"`` messages as results.

An assistant message with tool calls opens a round; the ``tool`` messages answering its calls are
its group. A tool message holds one result (slot 0): its ``content`` is a string or a list of
``{"type": "text", "text"}`` parts, and keeps that shape when rewritten (a string stays a string;
a list keeps its non-text parts). Every other message and field goes out as it came.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from budget._errors import InputError
from budget._view import EMPTY_SCAN, Call, RawResult, Scanned
from budget.formats._common import (
    NO_CALL,
    call_facts,
    field,
    is_record,
    parts_text,
    replace_sole_result,
    require_str,
    type_name,
)
from budget.formats._shapes import ShapedFormat, require_fit

__all__ = ["OPENAI_CHAT", "OpenAIChatFormat"]

# "function" is the legacy (pre-tools) result role: accepted and passed through, never budgeted.
_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
_CALL_KINDS = (None, "function", "custom")  # a tuple: a type may be any value, even unhashable


class OpenAIChatFormat(ShapedFormat):
    """The Chat Completions message list, as dicts or as the SDK's models."""

    name = "openai_chat"
    breakpoints = False  # OpenAI caches by prefix, automatically (docs, "Prompt caching")

    def scan(self, index: int, message: Any) -> Scanned:
        """Validate one message and say which calls and results it holds."""
        where = f"messages[{index}]"
        if not is_record(message):
            raise InputError(
                f"{where} must be a dict (a Chat Completions message), not {type_name(message)}"
            )
        role = field(message, "role")
        if role not in _ROLES:
            allowed = ", ".join(repr(r) for r in _ROLES[:-1])
            raise InputError(f"{where}.role must be one of {allowed}, not {role!r}")
        content = field(message, "content")
        if content is not None and not isinstance(content, str | list | tuple):
            raise InputError(
                f"{where}.content must be a string, a list of parts or null, "
                f"not {type_name(content)}"
            )
        tool_calls = field(message, "tool_calls")
        if tool_calls is not None:
            return Scanned(self._calls(where, role, tool_calls), opens_round=bool(tool_calls))
        if role != "tool":
            require_fit(self.name, index, message)  # tool_result blocks, say
            return NO_CALL.get(role, EMPTY_SCAN)
        call_id = require_str(field(message, "tool_call_id"), f"{where}.tool_call_id")
        text, others = parts_text(content, f"{where}.content", ("text",))
        return Scanned(results=(RawResult(call_id, 0, text, False, others),))

    @staticmethod
    def _calls(where: str, role: object, tool_calls: object) -> tuple[Call, ...]:
        if role != "assistant":
            raise InputError(f"{where}.tool_calls is set on a {role} message")
        if not isinstance(tool_calls, list | tuple):
            raise InputError(f"{where}.tool_calls must be a list, not {type_name(tool_calls)}")
        calls = []
        for j, call in enumerate(tool_calls):
            cw = f"{where}.tool_calls[{j}]"
            if not is_record(call):
                raise InputError(f"{cw} must be a dict (a tool call), not {type_name(call)}")
            call_id = require_str(field(call, "id"), f"{cw}.id")
            kind = field(call, "type")
            if kind not in _CALL_KINDS:
                raise InputError(f"{cw}.type must be 'function' or 'custom', not {kind!r}")
            key = "custom" if kind == "custom" else "function"
            fn = field(call, key)
            if fn is not None and not is_record(fn):  # not its name: the call itself is wrong
                raise InputError(
                    f"{cw}.{key} must be a dict (its name and arguments), not {type_name(fn)}"
                )
            name = field(fn, "name") if is_record(fn) else None
            if not isinstance(name, str):
                raise InputError(f"{cw}.{key}.name must be a string, not {type_name(name)}")
            arguments = field(fn, "input" if key == "custom" else "arguments")
            calls.append(Call(call_id, name, *call_facts(name, arguments)))
        return tuple(calls)

    def rewrite(self, message: Any, texts: Mapping[int, str]) -> Any:
        """A new tool message showing ``texts[0]``, its content keeping its shape."""
        return replace_sole_result(message, texts, "content", "text")

    def tool_definition(
        self, name: str, description: str, parameters: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A tool definition as Chat Completions takes it (``{"type": "function", ...}``)."""
        return {
            "type": "function",
            "function": {"name": name, "description": description, "parameters": dict(parameters)},
        }


OPENAI_CHAT = OpenAIChatFormat()
