"""OpenAI Responses API input items: ``function_call`` / ``custom_tool_call`` /
``local_shell_call`` / ``shell_call`` items and their outputs.

Each item of the input list is one "message" here. A run of call items (possibly interleaved with
``reasoning`` items) after any other item is one assistant turn: it opens a round, and the outputs
answering its calls are its group. A ``function_call_output``, ``custom_tool_call_output`` or
``local_shell_call_output`` item holds one result (slot 0): its ``output`` is a string, or a list
of ``input_text`` / ``input_image`` / ``input_file`` parts whose text parts are replaced and whose
other parts are kept. Messages (``{role, content}`` or ``{"type": "message", ...}``) and every
other item (reasoning, web searches, other built-in tool calls...) go out untouched.

The local shell tool's call names its call by ``call_id``, or by its ``id`` where it has none (as
Codex CLI reads it); its answer is a ``function_call_output`` with that ``call_id`` (Codex CLI's)
or a ``local_shell_call_output`` naming it by ``call_id`` (OpenAI's guide, the Vercel AI SDK) or,
where it has none, by ``id`` (the API reference's).

The shell tool's ``shell_call`` is answered by a ``shell_call_output`` whose ``output`` is a list of
chunks, each a ``stdout``, a ``stderr`` and the ``outcome`` of a command: its text is the chunks'
non-empty streams in order, joined by newlines (as a part list's texts are), an error when a
command exited non-zero or timed out. Rewritten, the first chunk's ``stdout`` shows the new text
and every other stream is emptied; each chunk keeps its outcome (the exit codes stay visible).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
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
    to_dict,
    type_name,
)
from budget.formats._shapes import ShapedFormat, require_fit

__all__ = ["CALL_TYPES", "OPENAI_RESPONSES", "OUTPUT_TYPES", "OpenAIResponsesFormat"]

CALL_TYPES = frozenset({"function_call", "custom_tool_call", "local_shell_call", "shell_call"})
OUTPUT_TYPES = frozenset(
    {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}
)
_SHELL_OUTPUT = "shell_call_output"
"""The shell tool's output: a list of chunks (see the module), not a string or a part list."""
_LOCAL_SHELL, _SHELL = "local_shell", "shell"
"""The tool names a ``local_shell_call`` and a ``shell_call`` are counted under (the items carry
none: the API's tool type is their name)."""
_NEUTRAL = "reasoning"
"""Items that may sit between the calls of one turn without ending it."""


class OpenAIResponsesFormat(ShapedFormat):
    """The Responses API ``input`` list, as dicts or as the SDK's models."""

    name = "openai_responses"
    breakpoints = False  # OpenAI caches by prefix, automatically (docs, "Prompt caching")

    def scan(self, index: int, message: Any) -> Scanned:
        """Validate one item and say which call or result it holds.

        Seen alone, a call item opens a round; :meth:`scan_in` says whether it continues the turn
        of the call items just before it.
        """
        where = f"messages[{index}]"
        if not is_record(message):
            raise InputError(
                f"{where} must be a dict (a Responses input item), not {type_name(message)}"
            )
        kind = field(message, "type")
        if kind is not None and not isinstance(kind, str):  # a list or dict is unhashable too
            raise InputError(f"{where}.type must be a string, not {type_name(kind)}")
        if kind == "local_shell_call":
            call_id = _shell_call_id(message, where)
            facts = call_facts(_LOCAL_SHELL, field(message, "action"))
            return Scanned(calls=(Call(call_id, _LOCAL_SHELL, *facts),), opens_round=True)
        if kind == "shell_call":
            call_id = require_str(field(message, "call_id"), f"{where}.call_id")
            facts = call_facts(_SHELL, field(message, "action"))
            return Scanned(calls=(Call(call_id, _SHELL, *facts),), opens_round=True)
        if kind == _SHELL_OUTPUT:
            call_id = require_str(field(message, "call_id"), f"{where}.call_id")
            output = field(message, "output")
            text, failed = _shell_text(output, f"{where}.output")
            if not output:
                # No chunk to show a text in (each carries its command's outcome, which the API
                # requires and toolbudget cannot make up): the item goes out as it is.
                return EMPTY_SCAN
            return Scanned(results=(RawResult(call_id, 0, text, failed, 0),))
        if kind in CALL_TYPES:
            call_id = require_str(field(message, "call_id"), f"{where}.call_id")
            name = field(message, "name")
            if not isinstance(name, str):
                raise InputError(f"{where}.name must be a string, not {type_name(name)}")
            arguments = field(message, "input" if kind == "custom_tool_call" else "arguments")
            return Scanned(
                calls=(Call(call_id, name, *call_facts(name, arguments)),), opens_round=True
            )
        if kind in OUTPUT_TYPES:
            if kind == "local_shell_call_output":
                call_id = _shell_call_id(message, where)
            else:
                call_id = require_str(field(message, "call_id"), f"{where}.call_id")
            output = field(message, "output")
            if output is not None and not isinstance(output, str | list | tuple):
                raise InputError(
                    f"{where}.output must be a string or a list of parts, not {type_name(output)}"
                )
            text, others = parts_text(output, f"{where}.output", ("input_text",))
            return Scanned(results=(RawResult(call_id, 0, text, False, others),))
        if kind is None or kind == "message":
            if (role := field(message, "role")) is None:
                raise InputError(
                    f"{where} has neither a type nor a role: not a Responses input item"
                )
            require_fit(self.name, index, message)  # a Chat tool message, say
            return NO_CALL.get(role, EMPTY_SCAN) if isinstance(role, str) else EMPTY_SCAN
        return EMPTY_SCAN

    def scan_in(self, messages: Sequence[Any], index: int) -> Scanned:
        """:meth:`scan` of ``messages[index]``, knowing its neighbours: a call item right after
        other call items (reasoning items aside) continues their round instead of opening one."""
        scanned = super().scan_in(messages, index)
        if not scanned.opens_round:
            return scanned
        j = index - 1
        while j >= 0:
            kind = field(messages[j], "type")
            if kind in CALL_TYPES:
                return replace(scanned, opens_round=False)
            if kind != _NEUTRAL:
                break
            j -= 1
        return scanned

    def rewrite(self, message: Any, texts: Mapping[int, str]) -> Any:
        """A new output item showing ``texts[0]``, its output keeping its shape."""
        if field(message, "type") == _SHELL_OUTPUT and 0 in texts:
            out = to_dict(message)
            out["output"] = _shell_chunks(out.get("output"), texts[0])
            return out
        return replace_sole_result(message, texts, "output", "input_text")

    def tool_definition(
        self, name: str, description: str, parameters: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A function tool as the Responses API takes it (flat; ``strict`` off, since the
        read-back tool has optional arguments, which strict mode does not allow)."""
        return {
            "type": "function",
            "name": name,
            "description": description,
            "parameters": dict(parameters),
            "strict": False,
        }


def _shell_text(output: object, where: str) -> tuple[str, bool]:
    """A shell call output's text (its chunks' non-empty ``stdout`` and ``stderr``, in order,
    joined by newlines) and whether a command failed: an ``exit`` outcome with a non-zero code,
    a ``timeout``, or the Agents SDK's raw ``"failure"``."""
    if output is None:
        return "", False
    if not isinstance(output, list | tuple):
        raise InputError(f"{where} must be a list of output chunks, not {type_name(output)}")
    texts: list[str] = []
    failed = False
    for i, chunk in enumerate(output):
        if not is_record(chunk):
            raise InputError(f"{where}[{i}] must be a dict (stdout, stderr, outcome)")
        for stream in ("stdout", "stderr"):
            value = field(chunk, stream)
            if value is not None and not isinstance(value, str):
                raise InputError(f"{where}[{i}].{stream} must be a string, not {type_name(value)}")
            if value:
                texts.append(value)
        outcome = field(chunk, "outcome")
        kind = field(outcome, "type") if is_record(outcome) else outcome
        code = field(outcome, "exit_code") if is_record(outcome) else None
        failed = failed or kind in ("timeout", "failure") or (kind == "exit" and code != 0)
    return "\n".join(texts), failed


def _shell_chunks(output: object, text: str) -> list[dict[str, Any]]:
    """The chunks of a shell call output (at least one: see ``scan``) showing ``text``: the first
    chunk's ``stdout``, every other stream emptied, each chunk's outcome and other fields kept."""
    assert isinstance(output, list | tuple) and output
    chunks = [to_dict(c) for c in output]
    for chunk in chunks:
        chunk["stdout"], chunk["stderr"] = "", ""
    chunks[0]["stdout"] = text
    return chunks


def _shell_call_id(message: Any, where: str) -> str:
    """The call id of a local shell call or of its output: its ``call_id``, else its ``id``. The
    API reference's output names the call by ``id``; OpenAI's own local shell guide and the
    Vercel AI SDK answer by ``call_id`` (an ``id`` beside it, if any, is then the item's own)."""
    key = "call_id" if field(message, "call_id") is not None else "id"
    return require_str(field(message, key), f"{where}.{key}")


OPENAI_RESPONSES = OpenAIResponsesFormat()
