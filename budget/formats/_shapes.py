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

__all__ = ["LABELS", "NAMES", "describe", "require_fit", "shape_fits"]

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


def shape_fits(index: int, message: Any) -> tuple[frozenset[str], str]:
    """The formats ``message`` fits, and what in it narrowed them (for error messages)."""
    where = f"messages[{index}]"
    if not is_record(message):
        return frozenset(), f"{where} is a {type_name(message)}, not a dict or an SDK model"
    role, kind = field(message, "role"), field(message, "type")
    if kind is not None and not isinstance(kind, str):
        return frozenset(), f"{where}.type is a {type_name(kind)}, not a string"
    if kind is not None and kind != "message":
        if kind in _RESPONSES_ITEMS:
            return frozenset({_R}), f"{where} is a {kind!r} item"
        if role is None:
            return frozenset(), (
                f"{where} ({type_name(message)}) has type {kind!r} and no role, which no known "
                "format has"
            )
    if role is None:
        return frozenset(), f"{where}.role is missing (and it has no item type)"
    fits = _ROLE_FITS.get(role) if isinstance(role, str) else None
    if fits is None:
        return frozenset(), f"{where}.role is {role!r}, which no known format has"
    why = f"{where} has role {role!r}"
    narrowing = []
    if kind == "message":  # Responses message items; also an anthropic.types.Message object
        narrowing.append((frozenset({_A, _R}), f"{where} has type 'message'"))
    if field(message, "tool_calls") is not None:
        narrowing.append((frozenset({_C}), f"{where} has tool_calls"))
    if field(message, "tool_call_id") is not None:
        narrowing.append((frozenset({_C}), f"{where} has a tool_call_id"))
    content = field(message, "content")
    if content is None:
        narrowing.append((frozenset({_C}), f"{where} has no content"))
    elif isinstance(content, list | tuple):
        for j, part in enumerate(content):
            part_kind = field(part, "type") if is_record(part) else None
            part_fits = _PART_FITS.get(part_kind) if isinstance(part_kind, str) else None
            if part_fits is not None:
                narrowing.append((part_fits, f"{where}.content[{j}] is a {part_kind!r} part"))
    for allowed, reason in narrowing:
        # The reason kept is the one that narrowed last: the evidence that decided.
        if fits and not fits <= allowed:
            fits, why = fits & allowed, reason
    return fits, why


def require_fit(name: str, index: int, message: Any) -> None:
    """FormatError unless ``message`` may be a message of format ``name``."""
    fits, why = shape_fits(index, message)
    if name not in fits:
        label = LABELS.get(name, name)
        seen = f" ({describe(fits)})" if fits else ""
        raise FormatError(
            f"{why}{seen}, which the session's format, {label} ({name!r}), does not allow"
        )
