"""The neutral view of a conversation's tool calls and results that passes work on.

A format adapter turns each message of its format into a :class:`Scanned` (the calls it makes and
the results it holds) and later rewrites a message to show new result texts. Passes see only
:class:`ToolResult` values, never messages, so one set of passes serves every format.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

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


class Format(Protocol):
    """A message format: find the tool calls and results, and rewrite results. One per format."""

    name: str

    def scan(self, index: int, message: Any) -> Scanned:
        """Validate one message and say what it holds; raise InputError naming what is wrong."""
        ...

    def rewrite(self, message: Any, texts: Mapping[int, str]) -> Any:
        """A new message showing ``texts[slot]`` for each given result; all else kept as is."""
        ...


def scan_at(fmt: Format, messages: Sequence[Any], index: int) -> Scanned:
    """What ``messages[index]`` holds, in ``fmt``.

    A format whose round boundaries depend on neighbouring messages (in the Responses API each
    call is its own item, and parallel calls are consecutive items) may define
    ``scan_in(messages, index)``; it is used instead of ``scan`` when present.
    """
    scan_in = getattr(fmt, "scan_in", None)
    if scan_in is not None:
        scanned: Scanned = scan_in(messages, index)
        return scanned
    return fmt.scan(index, messages[index])
