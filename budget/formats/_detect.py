"""Telling the three formats apart from the messages themselves, and fixing one per session.

Each message is checked against what each format allows: its role, its keys (``tool_calls``,
``tool_call_id``), its item ``type`` and the ``type`` of its content parts. The formats every
message fits are the candidates:

* one candidate: that format, for sure (tool calls are always conclusive: ``tool_use`` /
  ``tool_result`` blocks are Anthropic, ``tool_calls`` and ``role: "tool"`` are Chat Completions,
  ``function_call`` / ``function_call_output``... items are Responses);
* several (no tool call, only shapes all of them allow, such as role/content dicts with string
  content or ``text`` parts): Anthropic if it is still a candidate, else Chat Completions. Nothing
  is a tool result then, so nothing is budgeted differently either way; the guess is used for
  this request only and the session keeps detecting until the format is certain;
* none (one message fits no format, or two messages fit different ones): FormatError naming the
  messages seen. Nothing is ever budgeted silently in the wrong format.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from budget._errors import FormatError
from budget._view import Format
from budget.formats._common import field, is_record, type_name
from budget.formats.anthropic import ANTHROPIC
from budget.formats.openai_chat import OPENAI_CHAT
from budget.formats.openai_responses import OPENAI_RESPONSES

__all__ = ["FORMATS", "FormatChoice", "detect", "detect_format", "get_format"]

FORMATS: Mapping[str, Format] = {f.name: f for f in (ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES)}
"""The built-in formats by name, in the order a guess prefers them."""

_A, _C, _R = ANTHROPIC.name, OPENAI_CHAT.name, OPENAI_RESPONSES.name
_ALL = frozenset(FORMATS)
_LABELS = {_A: "Anthropic Messages", _C: "OpenAI Chat Completions", _R: "OpenAI Responses"}

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


def _names(fits: frozenset[str]) -> str:
    return " or ".join(_LABELS[n] for n in FORMATS if n in fits)


def _fits(index: int, message: Any) -> tuple[frozenset[str], str]:
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
    if kind == "message":  # Responses message items; also an anthropic.types.Message object
        fits, why = fits & {_A, _R}, f"{where} has type 'message'"
    if field(message, "tool_calls") is not None:
        fits, why = fits & {_C}, f"{where} has tool_calls"
    if field(message, "tool_call_id") is not None:
        fits, why = fits & {_C}, f"{where} has a tool_call_id"
    content = field(message, "content")
    if content is None:
        fits, why = fits & {_C}, f"{where} has no content"
    elif isinstance(content, list | tuple):
        for j, part in enumerate(content):
            part_kind = field(part, "type") if is_record(part) else None
            part_fits = _PART_FITS.get(part_kind) if isinstance(part_kind, str) else None
            if part_fits is not None and not fits <= part_fits:
                fits, why = fits & part_fits, f"{where}.content[{j}] is a {part_kind!r} part"
    return fits, why


def detect(messages: Sequence[Any]) -> tuple[Format, bool]:
    """The format of ``messages`` and whether it is certain (see the module's rules)."""
    candidates, because = _ALL, ""
    for i, message in enumerate(messages):
        fits, why = _fits(i, message)
        if not fits:
            raise FormatError(
                f"cannot tell the message format: {why}. Messages must be Anthropic Messages, "
                "OpenAI Chat Completions or OpenAI Responses input items (dicts or SDK models); "
                "name the format with format=... to get that format's own validation errors"
            )
        if candidates <= fits:
            continue
        narrowed = candidates & fits
        if not narrowed:
            raise FormatError(
                f"the messages mix formats: {because} ({_names(candidates)}), but {why} "
                f"({_names(fits)})"
            )
        candidates, because = narrowed, why
    if len(candidates) == 1:
        return FORMATS[next(iter(candidates))], True
    guess = next(name for name in FORMATS if name in candidates)
    return FORMATS[guess], False


def detect_format(messages: Sequence[Any]) -> Format:
    """The format ``messages`` are in; FormatError when they fit none, or mix formats.

    Messages without any tool call that every format allows (role/content dicts with string
    content, say) are taken as Anthropic when Anthropic fits, else as Chat Completions.
    """
    return detect(messages)[0]


def get_format(name: str | Format) -> Format:
    """The built-in format called ``name`` (anthropic, openai_chat, openai_responses).

    A Format object is returned as it is, so custom adapters can be passed wherever a name is.
    """
    if not isinstance(name, str):
        if isinstance(getattr(name, "name", None), str) and callable(getattr(name, "scan", None)):
            return name
        raise FormatError(f"a format must be a name or a Format, not {type_name(name)}")
    fmt = FORMATS.get(name)
    if fmt is None:
        raise FormatError(
            f"unknown format {name!r}: the built-in formats are {', '.join(map(repr, FORMATS))}"
        )
    return fmt


@dataclass(slots=True)
class FormatChoice:
    """A session's format: fixed once named or detected for sure, then held to.

    ``fixed_name`` alone (no ``fixed``) is a format remembered from a resumed session that is not
    built in: the caller must pass that format again.
    """

    fixed: Format | None = None
    fixed_name: str | None = None

    @classmethod
    def start(cls, given: str | Format | None, remembered: object) -> FormatChoice:
        """The choice for a new or resumed session: ``given`` to the constructor, ``remembered``
        in the session's metadata. A given format that differs from the remembered one is refused.
        """
        choice = cls()
        if isinstance(remembered, str) and remembered:
            choice.fixed_name = remembered
            choice.fixed = FORMATS.get(remembered)
        if given is not None:
            choice.hold(get_format(given))
        return choice

    def hold(self, fmt: Format) -> bool:
        """Fix ``fmt``; True when it was not fixed before. FormatError if another one is."""
        if self.fixed_name is not None and fmt.name != self.fixed_name:
            raise FormatError(
                f"this session's messages are in the {self.fixed_name!r} format; "
                f"they cannot be prepared as {fmt.name!r}"
            )
        new = self.fixed is None
        self.fixed, self.fixed_name = fmt, fmt.name
        return new

    def for_request(
        self, messages: Sequence[Any], requested: str | Format | None
    ) -> tuple[Format, bool]:
        """The format to prepare ``messages`` in, and whether it was fixed just now.

        A named format is fixed; so is a detected one that is certain.
        """
        if requested is not None:
            fmt = get_format(requested)
            return fmt, self.fixed is not fmt and self.hold(fmt)
        if self.fixed is not None:
            return self.fixed, False
        if self.fixed_name is not None:
            raise FormatError(
                f"this session was started with the {self.fixed_name!r} format, which is not "
                "built in: pass that Format again (format=...)"
            )
        fmt, certain = detect(messages)
        return fmt, certain and self.hold(fmt)
