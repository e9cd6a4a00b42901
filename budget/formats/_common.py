"""What the adapters share: reading dicts and SDK models alike, and text parts of a result.

Messages come as plain dicts (what the SDKs send) or as the SDKs' own pydantic models (response
objects a caller appends to its history: ``anthropic.types.Message``, ``ToolUseBlock``,
``openai.types.chat.ChatCompletionMessage``, ``ResponseFunctionToolCall``...). Adapters read both
by field name, with attribute access on models: no copy is made to *read* a message, and a message
that is not rewritten goes out as the caller's own object. A message that is rewritten becomes a
dict: its model is dumped as the SDK would send it (JSON mode, wire names, no ``None`` fields).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
import xxhash
from pydantic import BaseModel

from budget._errors import InputError
from budget._view import PROMPT_SCAN, REPLY_SCAN, Scanned

__all__ = [
    "NO_CALL",
    "call_facts",
    "call_key",
    "field",
    "is_record",
    "parts_text",
    "replace_parts",
    "replace_sole_result",
    "require_str",
    "to_dict",
    "type_name",
]


NO_CALL: Mapping[object, Scanned] = {"user": PROMPT_SCAN, "assistant": REPLY_SCAN}
"""By role, the scan of a message that makes no call and holds no result: the user's is a
prompt, the assistant's an answer (a system or developer message is neither)."""

_COMMAND_KEYS = ("command", "cmd")
"""Input fields that hold a shell command: the same command is a re-run whatever else the call
says (a description, a timeout) and whichever tool ran it."""


REF_PATTERN = re.compile(rb"(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])")
"""A spilled body's ref (``spill.ref_for``: 32 hex digits, xxh3-128) standing alone in a call's
input: a read tool's ``ref``, or the body's file in a path an agent's own tools open
(``.../bodies/ab/<ref>.txt``). Longer hex runs (git's 40-digit ids) are not refs."""


def call_key(tool: str, arguments: Any) -> str:
    """What a call asks for, as a short hash (see :func:`call_facts`)."""
    return call_facts(tool, arguments)[0]


def call_facts(tool: str, arguments: Any) -> tuple[str, tuple[str, ...]]:
    """What a call asks for, as a short hash: its command when its input has one, else its tool
    and its input (canonical JSON: key order does not matter); "" when the input cannot be read.
    With it, the refs of spilled bodies its input names (:data:`REF_PATTERN`).

    A later call with the same key is a re-run, whose result may be previewed as a diff against
    the earlier one (:mod:`budget.previews`). A call naming a hidden result's ref reads it back,
    with the read-back tool or with the agent's own (the cost policy's read-back evidence)."""
    if isinstance(arguments, str):
        # A custom tool's free-form input is no JSON: the text itself is then the input.
        with contextlib.suppress(orjson.JSONDecodeError):
            arguments = orjson.loads(arguments)
    if isinstance(arguments, BaseModel):
        arguments = arguments.model_dump(mode="json")
    if isinstance(arguments, Mapping):
        arguments = dict(arguments)
        for name in _COMMAND_KEYS:
            command = arguments.get(name)
            if isinstance(command, str | list) and command:
                arguments, tool = command, "\x00command"
                break
    try:
        canonical = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return "", ()
    key = xxhash.xxh3_128_hexdigest(tool.encode("utf-8", "surrogatepass") + b"\x00" + canonical)
    # Most inputs are short and name no ref: the search runs only where one could fit.
    refs = tuple(m.decode() for m in REF_PATTERN.findall(canonical)) if len(canonical) >= 32 else ()
    return key, refs


def type_name(value: object) -> str:
    """The class name of ``value``, for error messages."""
    return type(value).__name__


def is_record(value: object) -> bool:
    """Whether ``value`` is a message or block the adapters can read: a mapping or an SDK model."""
    # A plain dict first: the ABC check costs several times more, on every message and block.
    return type(value) is dict or isinstance(value, Mapping | BaseModel)


def field(record: Any, key: str) -> Any:
    """``record[key]`` for a mapping, the attribute for a model; None when absent."""
    if type(record) is dict or isinstance(record, Mapping):
        return record.get(key)
    return getattr(record, key, None)


def to_dict(record: Any) -> dict[str, Any]:
    """A new dict with ``record``'s fields: a shallow copy of a mapping, or a model's wire form."""
    if isinstance(record, BaseModel):
        dumped: dict[str, Any] = record.model_dump(mode="json", by_alias=True, exclude_none=True)
        return dumped
    return dict(record)


def parts_text(content: object, where: str, text_types: Iterable[str]) -> tuple[str, int]:
    """The text of a result's content (a string or a list of parts) and its non-text part count.

    Text parts (whose ``type`` is one of ``text_types``) are joined by newlines; every other part
    (images, files) is counted, never read.
    """
    if content is None:
        return "", 0
    if isinstance(content, str):
        return content, 0
    if not isinstance(content, list | tuple):
        raise InputError(f"{where} must be a string or a list of parts, not {type_name(content)}")
    kinds = tuple(text_types)  # a tuple: a part's type may be any value, even unhashable
    texts: list[str] = []
    others = 0
    for k, part in enumerate(content):
        if not is_record(part):
            raise InputError(f"{where}[{k}] must be a dict, not {type_name(part)}")
        if field(part, "type") in kinds:
            text = field(part, "text")
            if not isinstance(text, str):
                raise InputError(f"{where}[{k}].text must be a string, not {type_name(text)}")
            texts.append(text)
        else:
            others += 1
    return "\n".join(texts), others


def replace_parts(content: object, text: str, text_type: str) -> object:
    """``content`` showing ``text``: a string stays a string; a list keeps its non-text parts.

    In a list, the first text part takes ``text`` and keeps its other keys (a ``cache_control``,
    say); later text parts are dropped, their text being in ``text``, and a ``cache_control`` marker
    one of them carried moves onto the first (the caller's cache breakpoint stays in the result;
    one marker stands for several); images and files stay in place. A list without a text part
    gets one in front.
    """
    if not isinstance(content, list | tuple):
        return text
    out: list[Any] = []
    first: dict[str, Any] | None = None
    moved: Any = None
    for part in content:
        if field(part, "type") == text_type:
            if first is None:
                first = {**to_dict(part), "text": text}
                out.append(first)
            else:
                moved = field(part, "cache_control") or moved
            continue
        out.append(part)
    if first is None:
        out.insert(0, {"type": text_type, "text": text})
    elif moved is not None and first.get("cache_control") is None:
        first["cache_control"] = moved
    return out


def require_str(value: object, where: str) -> str:
    """``value`` if it is a non-empty string; else an InputError naming ``where``."""
    if not isinstance(value, str) or not value:
        raise InputError(f"{where} must be a non-empty string, not {value!r}")
    return value


def replace_sole_result(message: Any, texts: Mapping[int, str], key: str, text_type: str) -> Any:
    """A new message whose ``key`` shows ``texts[0]`` in its own shape (see
    :func:`replace_parts`), for formats whose message holds one result (slot 0); ``message``
    itself when slot 0 is not rewritten."""
    if 0 not in texts:
        return message
    out = to_dict(message)
    out[key] = replace_parts(out.get(key), texts[0], text_type)
    return out
