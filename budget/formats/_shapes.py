"""What each format allows a message to look like: the facts detection and adapters share.

A message is checked by its role, its keys (``tool_calls``, ``tool_call_id``), its item ``type``
and the ``type`` of its content parts; :func:`shape_fits` returns the formats it fits. Detection
intersects them over a history; an adapter uses them to refuse, rather than pass through
silently, a message that belongs to another format (a Chat ``tool`` message given to the
Anthropic adapter would otherwise be a plain message, and its result never budgeted).

A message an adapter refuses as malformed may be a well-formed message of another format (a Chat
assistant message's ``content: null``, a Responses item without a role): when the history it is
in is another format, the refusal is a FormatError (:class:`ShapedFormat`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from budget._errors import FormatError, InputError
from budget._view import Format, Scanned
from budget.formats._common import field, is_record, type_name

__all__ = [
    "LABELS",
    "NAMES",
    "Reason",
    "ShapedFormat",
    "describe",
    "explain",
    "history_fits",
    "require_fit",
    "shape_fits",
]

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
    error = _fit_error(name, index, message)
    if error is not None:
        raise error


def _fit_error(name: str, index: int, message: Any) -> FormatError | None:
    """The FormatError :func:`require_fit` raises, or None when ``message`` may be ``name``'s."""
    fits, reason = shape_fits(message)
    if name in fits:
        return None
    label = LABELS.get(name, name)
    seen = f" ({describe(fits)})" if fits else ""
    return FormatError(
        f"{explain(index, message, reason)}{seen}, which the session's format, {label} "
        f"({name!r}), does not allow"
    )


def history_fits(messages: Sequence[Any]) -> frozenset[str]:
    """The formats every message of ``messages`` fits, leaving out messages that fit none (they
    tell nothing of the history's format): one when the history is certainly that format,
    several when it may be any of them, none when its messages mix formats."""
    candidates = _ALL
    for message in messages:
        fits, _ = shape_fits(message)
        if fits:
            candidates &= fits
            if not candidates:
                break
    return candidates


class ShapedFormat(Format):
    """A built-in format: a message its adapter refuses in a history of another format is a
    FormatError, not the adapter's InputError about a field.

    The adapters check a message's fields first and its shape (:func:`require_fit`) only where
    the fields allow a message of another format through, so a Chat assistant message
    (``content: null``) in an Anthropic session or a Responses item (no role) in a Chat session
    is refused by a field. Once a message is refused, the history decides: FormatError when that
    message fits other formats only and the history is certainly another format (a tool call is
    conclusive) or mixes formats. The adapter's own error stands for a message that may be one
    of its format's (``content: 3``), fits none (``role: 'critic'``), or sits in a history that
    is no format for sure (a lone ``system`` message in an Anthropic session). The history is
    looked at on that error path only: a request that is not refused pays nothing.
    """

    def scan_in(self, messages: Sequence[Any], index: int) -> Scanned:
        """:meth:`Format.scan_in`, with a refusal of another format's message a FormatError."""
        try:
            return self.scan(index, messages[index])
        except InputError as exc:
            # A FormatError already names the formats.
            foreign = None if type(exc) is not InputError else _foreign(self.name, messages, index)
            if foreign is None:
                raise
            raise foreign from None


def _foreign(name: str, messages: Sequence[Any], index: int) -> FormatError | None:
    """The FormatError for format ``name``'s refusal of ``messages[index]`` when the messages
    are another format (see :class:`ShapedFormat`); None when the refusal stands."""
    fits, _ = shape_fits(messages[index])
    if not fits or name in fits or len(history_fits(messages)) > 1:
        return None
    return _fit_error(name, index, messages[index])
