"""Helpers the peer strategies share: finding tool results and copying only what changes.

Messages are canonical Anthropic dicts (see ``benchmarks.trace``). A strategy never modifies them:
it builds a new list that shares every message it leaves alone and carries a shallow copy of
each message it edits (with a new content list and new dicts for the edited blocks only).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.strategies._base import Messages

__all__ = [
    "CallRef",
    "PrefixMemo",
    "ResultRef",
    "apply_edits",
    "content_chars",
    "has_non_text",
    "is_error",
    "is_prompt",
    "non_text_blocks",
    "result_text",
    "results_in",
    "safe_name",
    "tool_calls",
    "tool_results",
    "tool_use_ids",
    "with_content",
    "write_text",
]


@dataclass(frozen=True, slots=True)
class ResultRef:
    """Where one tool result sits: message index, block index, the call id and the block."""

    msg: int
    block: int
    call_id: str
    data: dict[str, Any]


def results_in(message: dict[str, Any], index: int) -> Iterator[ResultRef]:
    """The tool_result blocks of one message (at position ``index``), in order."""
    if message.get("role") != "user":
        return
    content = message.get("content")
    if not isinstance(content, list):
        return
    for j, block in enumerate(content):
        if isinstance(block, dict) and block.get("type") == "tool_result":
            yield ResultRef(index, j, str(block.get("tool_use_id", "")), block)


def tool_results(messages: Sequence[dict[str, Any]], start: int = 0) -> Iterator[ResultRef]:
    """Every tool_result block from message ``start`` on, in order."""
    for i in range(start, len(messages)):
        yield from results_in(messages[i], i)


@dataclass(frozen=True, slots=True)
class CallRef:
    """One tool_use block: message index, call id, tool name."""

    msg: int
    call_id: str
    name: str


def tool_calls(messages: Sequence[dict[str, Any]], start: int = 0) -> Iterator[CallRef]:
    """Every tool_use block from message ``start`` on, in order."""
    for i in range(start, len(messages)):
        message = messages[i]
        if message.get("role") != "assistant":
            continue
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                yield CallRef(i, str(block.get("id", "")), str(block.get("name", "")))


def is_prompt(message: dict[str, Any]) -> bool:
    """A user message that carries no tool result: a turn typed by the user (or the task)."""
    if message.get("role") != "user":
        return False
    content = message.get("content")
    if not isinstance(content, list):
        return True
    return not any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


def is_error(block: dict[str, Any]) -> bool:
    """Whether a tool_result block is marked as an error."""
    return bool(block.get("is_error"))


def tool_use_ids(content: list[Any]) -> list[str]:
    """The ids of the tool_use blocks in one assistant message's content, in order."""
    return [
        str(b.get("id", "")) for b in content if isinstance(b, dict) and b.get("type") == "tool_use"
    ]


def result_text(content: Any) -> str:
    """The text of a tool result's content: the string, or its text blocks joined by newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", ""))
            for b in content
            if isinstance(b, dict) and b.get("type") == "text"
        )
    return "" if content is None else str(content)


def content_chars(content: Any) -> int:
    """Characters of text in a tool result's content (non-text blocks count zero)."""
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(
            len(str(b.get("text", "")))
            for b in content
            if isinstance(b, dict) and b.get("type") == "text"
        )
    return 0


def non_text_blocks(content: Any) -> list[Any]:
    """The blocks of a tool result's content that are not text (images, documents)."""
    if isinstance(content, list):
        return [b for b in content if not (isinstance(b, dict) and b.get("type") == "text")]
    return []


def has_non_text(content: Any) -> bool:
    """Whether a tool result's content holds an image or another non-text block."""
    return bool(non_text_blocks(content))


def apply_edits(
    messages: Sequence[dict[str, Any]], edits: Mapping[int, Mapping[int, dict[str, Any]]]
) -> Messages:
    """A new message list where block ``j`` of message ``i`` becomes ``edits[i][j]``.

    Only edited messages are copied (shallow, with a new content list); the others are shared.
    """
    out = list(messages)
    for i, blocks in edits.items():
        message = messages[i]
        content = list(message["content"])
        for j, block in blocks.items():
            content[j] = block
        copy = dict(message)
        copy["content"] = content
        out[i] = copy
    return out


def with_content(block: dict[str, Any], content: Any) -> dict[str, Any]:
    """A copy of a tool_result block with new content."""
    copy = dict(block)
    copy["content"] = content
    return copy


_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def safe_name(text: str) -> str:
    """A file-name-safe form of a call id or tool name (other characters become ``_``)."""
    return _UNSAFE.sub("_", text) or "_"


def write_text(path: Path, text: str) -> None:
    """Write a spilled body (the peers' agents keep such files on local disk)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


class PrefixMemo:
    """Remembers the last request's input and output lists for append-only histories.

    A strategy whose earlier outputs never change (decisions frozen at first sight) can reuse the
    outputs of the messages it already processed and work only on the new tail.
    """

    def __init__(self) -> None:
        self.inputs: list[dict[str, Any]] = []
        self.outputs: list[dict[str, Any]] = []

    def reusable(self, messages: Sequence[dict[str, Any]]) -> int:
        """How many leading messages are the very objects processed last time."""
        k = min(len(self.inputs), len(messages))
        if k and messages[k - 1] is self.inputs[k - 1] and messages[0] is self.inputs[0]:
            return k
        n = 0
        while n < k and messages[n] is self.inputs[n]:
            n += 1
        return n

    def store(self, messages: Sequence[dict[str, Any]], outputs: Messages) -> None:
        """Remember this request's input and output lists."""
        self.inputs = list(messages)
        self.outputs = outputs

    def finish(
        self,
        messages: Sequence[dict[str, Any]],
        start: int,
        edits: Mapping[int, Mapping[int, dict[str, Any]]],
    ) -> Messages:
        """This request's output: the reused outputs before ``start``, then the messages from
        ``start`` on with ``edits`` applied (indices into ``messages``); remembered for the next."""
        out = self.outputs[:start] + apply_edits(messages, edits)[start:]
        self.store(messages, out)
        return out
