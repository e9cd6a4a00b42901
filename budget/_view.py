"""The neutral view of a conversation's tool calls and results that passes work on.

A format adapter turns each message of its format into a :class:`Scanned` (the calls it makes and
the results it holds) and later rewrites a message to show new result texts. Passes see only
:class:`ToolResult` values, never messages, so one set of passes serves every format.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Call", "Format", "RawResult", "Scanned", "ToolResult", "scan_at"]


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call made by an assistant message."""

    call_id: str
    tool: str


@dataclass(frozen=True, slots=True)
class RawResult:
    """A tool result as found in one message, before it is placed in its group and round."""

    call_id: str
    slot: int
    """Where in its message the result sits (block index; 0 where a message holds one result)."""
    text: str
    """The text parts, joined by newlines: what is measured, spilled and read back."""
    is_error: bool
    other_blocks: int
    """Images and other non-text parts: never rewritten, counted by an estimate."""


@dataclass(frozen=True, slots=True)
class Scanned:
    """What one message holds: the calls it makes, the results it carries."""

    calls: tuple[Call, ...] = ()
    results: tuple[RawResult, ...] = ()
    opens_round: bool = False
    """True for a message that starts a round (an assistant message making tool calls)."""


EMPTY_SCAN = Scanned()


@dataclass(frozen=True, slots=True)
class ToolResult:
    """One tool result, placed: which call it answers, its group and its round."""

    call_id: str
    tool: str
    msg_index: int
    slot: int
    group: int
    """Index of the message that made the call; results sharing it form one group."""
    round: int
    """0-based ordinal of the round the call was made in."""
    text: str
    is_error: bool
    extra_chars: int
    """Size estimate of the non-text parts, in characters."""
    order: int
    """Position among all results of the conversation (ties are broken by it: earlier first)."""

    @property
    def size(self) -> int:
        """Characters this result takes as it stands: its text plus its non-text estimate."""
        return len(self.text) + self.extra_chars


class _PlacedResult:
    """A :class:`ToolResult` built at the cost of a plain slotted object.

    A frozen dataclass sets each field through ``object.__setattr__``, about four times the
    cost of a plain attribute store, and a resume places every result of a long history. This
    class has the same slots; once they are set the instance becomes a ToolResult (CPython allows
    ``__class__`` assignment between classes of one slot layout), equal to the one the
    constructor makes and as frozen (tests/budget/test_resume_rebuild.py checks both).
    """

    # CPython keeps slots sorted: the layout is ToolResult's whatever the order written.
    __slots__ = (
        "call_id", "extra_chars", "group", "is_error", "msg_index", "order", "round", "slot",
        "text", "tool",
    )  # fmt: skip

    def __init__(
        self, call_id: str, tool: str, msg_index: int, slot: int, group: int, round: int,
        text: str, is_error: bool, extra_chars: int, order: int,
    ) -> None:  # fmt: skip
        self.call_id, self.tool, self.msg_index, self.slot = call_id, tool, msg_index, slot
        self.group, self.round, self.text, self.is_error = group, round, text, is_error
        self.extra_chars, self.order = extra_chars, order
        self.__class__ = ToolResult  # type: ignore[assignment]  # noqa: PLE0237


def placed_result(
    call_id: str, tool: str, msg_index: int, slot: int, group: int, round: int,
    text: str, is_error: bool, extra_chars: int, order: int,
) -> ToolResult:  # fmt: skip
    """``ToolResult(...)`` with these fields (positional, in field order), built faster."""
    made: Any = _PlacedResult(
        call_id, tool, msg_index, slot, group, round, text, is_error, extra_chars, order
    )
    return made  # type: ignore[no-any-return]


class Format:
    """A message format: find the tool calls and results, and rewrite results. One per format.

    A format subclasses this and gives ``name``, :meth:`scan` and :meth:`rewrite`; the other
    methods are optional extension points with their default here, as httpx's ``BaseTransport``
    leaves one method to implement (encode/httpx, ``httpx/_transports/base.py``).
    """

    name: str

    def scan(self, index: int, message: Any) -> Scanned:
        """Validate one message and say what it holds; raise InputError naming what is wrong."""
        raise NotImplementedError(f"{type(self).__name__} must implement Format.scan")

    def rewrite(self, message: Any, texts: Mapping[int, str]) -> Any:
        """A new message showing ``texts[slot]`` for each given result; all else kept as is."""
        raise NotImplementedError(f"{type(self).__name__} must implement Format.rewrite")

    def scan_in(self, messages: Sequence[Any], index: int) -> Scanned:
        """What ``messages[index]`` holds, seen among its neighbours: :meth:`scan` by default.

        A format whose round boundaries depend on neighbouring messages (in the Responses API
        each call is its own item, and parallel calls are consecutive items) overrides it.
        """
        return self.scan(index, messages[index])

    def outgoing(self, message: Any) -> Any:
        """``message`` as a request sends it when none of its results is rewritten (and it is
        not a plain dict): itself by default; a format whose histories may hold SDK response
        objects converts them to what the request takes."""
        return message

    def tool_definition(
        self, name: str, description: str, parameters: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A tool definition as this format's API takes it: the Anthropic shape by default
        (name, description, input_schema)."""
        return {"name": name, "description": description, "input_schema": dict(parameters)}


def scan_at(fmt: Format, messages: Sequence[Any], index: int) -> Scanned:
    """What ``messages[index]`` holds, in ``fmt`` (its :meth:`Format.scan_in`)."""
    return fmt.scan_in(messages, index)
