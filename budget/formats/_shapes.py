"""What each format allows a message to look like: the facts detection and adapters share.

A message is checked by its role, its keys (``tool_calls``, ``tool_call_id``), its item ``type``
and the ``type`` of its content parts; :func:`shape_fits` returns the formats it fits. Detection
intersects them over a history; an adapter uses them to refuse, rather than pass through
silently, a message that belongs to another format (a Chat ``tool`` message given to the
Anthropic adapter would otherwise be a plain message, and its result never budgeted).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from budget._errors import FormatError
from budget.formats._common import field, is_record, type_name

__all__ = ["LABELS", "NAMES", "Reason", "describe", "explain", "require_fit", "shape_fits"]

NAMES = ("anthropic", "openai_chat", "openai_responses")
"""The built-in formats, in the order a guess prefers them."""

_A, _C, _R = NAMES
_ALL = frozenset(NAMES)
LABELS = {_A: "Anthropic Messages", _C: "OpenAI Chat Completions", _R: "OpenAI Responses"}

# Item types of the Responses input list (openai.types.responses.ResponseInputItemParam), besides
# "message". An item with another type and no role fits no known format.
_RESPONSES_ITEMS = frozenset(
    {
        "additional_tools", "apply_patch_call", "apply_patch_call_output", "code_interpreter_call",
        "compaction", "compaction_trigger", "computer_call", "computer_call_output",
        "configuration_update", "custom_tool_call", "custom_tool_call_output", "file_search_call",
        "function_call", "function_call_output", "image_generation_call", "item_reference",
        "local_shell_call", "local_shell_call_output", "mcp_approval_request",
        "mcp_approval_response", "mcp_call", "mcp_list_tools", "program", "program_output",
        "reasoning", "shell_call", "shell_call_output", "tool_search_call", "tool_search_output",
        "web_search_call",
    }
)  # fmt: skip
_ANTHROPIC_PARTS = frozenset(
    {
        "advisor_tool_result", "bash_code_execution_tool_result", "code_execution_tool_result",
        "container_upload", "document", "image", "mcp_tool_result", "mcp_tool_use",
        "redacted_thinking", "search_result", "server_tool_use",
        "text_editor_code_execution_tool_result", "thinking", "tool_result",
        "tool_search_tool_result", "tool_use", "web_fetch_tool_result", "web_search_tool_result",
    }
)  # fmt: skip
_PART_FITS: Mapping[str, frozenset[str]] = {
    **{t: frozenset({_A}) for t in _ANTHROPIC_PARTS},
    "text": frozenset({_A, _C}),
    "image_url": frozenset({_C}),
    "file": frozenset({_C}),
    "input_audio": frozenset({_C, _R}),
    "refusal": frozenset({_C, _R}),
    "input_text": frozenset({_R}),
    "input_image": frozenset({_R}),
    "input_file": frozenset({_R}),
    "output_text": frozenset({_R}),
}
_ROLE_FITS: Mapping[str, frozenset[str]] = {
    "user": _ALL,
    "assistant": _ALL,
    "system": frozenset({_C, _R}),
    "developer": frozenset({_C, _R}),
    "tool": frozenset({_C}),
    "function": frozenset({_C}),
}


def describe(fits: frozenset[str]) -> str:
    """The formats in ``fits`` by their full names, for messages."""
    return " or ".join(LABELS[n] for n in NAMES if n in fits)


Reason = tuple[Any, ...]
"""What in a message decided its fits, kept raw: formatted by :func:`explain` only on error."""

_NONE: frozenset[str] = frozenset()
_ONLY_A_R = frozenset({_A, _R})
_ONLY_C = frozenset({_C})
_ONLY_R = frozenset({_R})


def shape_fits(message: Any) -> tuple[frozenset[str], Reason]:
    """The formats ``message`` fits, and what in it narrowed them (see :func:`explain`)."""
    if not is_record(message):
        return _NONE, ("not_record",)
    role, kind = field(message, "role"), field(message, "type")
    if kind is not None:
        if not isinstance(kind, str):
            return _NONE, ("bad_type",)
        if kind != "message":
            if kind in _RESPONSES_ITEMS:
                return _ONLY_R, ("item", kind)
            if role is None:
                return _NONE, ("unknown_item", kind)
    if role is None:
        return _NONE, ("no_role",)
    fits = _ROLE_FITS.get(role) if isinstance(role, str) else None
    if fits is None:
        return _NONE, ("unknown_role", role)
    reason: Reason = ("role", role)
    # Each piece of evidence narrows the fits; the reason kept is the last that did.
    if kind == "message" and not fits <= _ONLY_A_R:  # Responses items; anthropic.types.Message
        fits, reason = fits & _ONLY_A_R, ("type_message",)
    if field(message, "tool_calls") is not None and not fits <= _ONLY_C:
        fits, reason = fits & _ONLY_C, ("tool_calls",)
    if field(message, "tool_call_id") is not None and not fits <= _ONLY_C:
        fits, reason = fits & _ONLY_C, ("tool_call_id",)
    content = field(message, "content")
    if content is None:
        if not fits <= _ONLY_C:
            fits, reason = fits & _ONLY_C, ("no_content",)
    elif isinstance(content, list | tuple):
        for j, part in enumerate(content):
            part_kind = field(part, "type") if is_record(part) else None
            allowed = _PART_FITS.get(part_kind) if isinstance(part_kind, str) else None
            if allowed is not None and fits and not fits <= allowed:
                fits, reason = fits & allowed, ("part", j, part_kind)
    return fits, reason


def explain(index: int, message: Any, reason: Reason) -> str:
    """What ``reason`` (from :func:`shape_fits`) says about ``messages[index]``, in words."""
    where = f"messages[{index}]"
    what, *args = reason
    if what == "not_record":
        return f"{where} is a {type_name(message)}, not a dict or an SDK model"
    if what == "bad_type":
        return f"{where}.type is a {type_name(field(message, 'type'))}, not a string"
    if what == "item":
        return f"{where} is a {args[0]!r} item"
    if what == "unknown_item":
        return (
            f"{where} ({type_name(message)}) has type {args[0]!r} and no role, which no known "
            "format has"
        )
    if what == "no_role":
        return f"{where}.role is missing (and it has no item type)"
    if what == "unknown_role":
        return f"{where}.role is {args[0]!r}, which no known format has"
    if what == "role":
        return f"{where} has role {args[0]!r}"
    if what == "part":
        return f"{where}.content[{args[0]}] is a {args[1]!r} part"
    words = {
        "type_message": "has type 'message'",
        "tool_calls": "has tool_calls",
        "tool_call_id": "has a tool_call_id",
        "no_content": "has no content",
    }
    return f"{where} {words[what]}"


def require_fit(name: str, index: int, message: Any) -> None:
    """FormatError unless ``message`` may be a message of format ``name``."""
    fits, reason = shape_fits(message)
    if name not in fits:
        label = LABELS.get(name, name)
        seen = f" ({describe(fits)})" if fits else ""
        raise FormatError(
            f"{explain(index, message, reason)}{seen}, which the session's format, {label} "
            f"({name!r}), does not allow"
        )
