"""What counts as a quote of a tool result's line: the one rule the cost policy learns its
read-back rate by (``budget.session._quotes``) and the benchmark charges read-backs by
(``benchmarks/readbacks.py``), so that what the policy learns is what it is billed for.

A line is quotable when, stripped, it has at least :data:`MIN_QUOTE_CHARS` characters (shorter
ones recur by chance in code and logs). A numbered view of a file (Claude Code's ``Read``:
``     12→code``; ``cat -n``, ``nl``, OpenHands' editor: ``     12<TAB>code``) is quoted without
its line numbers: an edit's old text, or a remark on line 12, quotes ``code``; so the number
gutter is not part of the line. An *answer* is the model's message: its text and the strings of
its tool inputs (a JSON-encoded input decoded), never a user's, a system's or a tool's output.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import orjson
from pydantic import BaseModel

__all__ = ["MIN_QUOTE_CHARS", "answer_strings", "quotable", "without_gutter"]

MIN_QUOTE_CHARS = 30
"""The shortest stripped line that counts as a quote."""

_GUTTER = re.compile(r"^[ \t]*\d+(?:→|\t)", re.MULTILINE)
"""A line number and its separator at the start of a line: Claude Code's ``Read`` (``→``) and
``cat -n`` / ``nl`` / OpenHands' editor views (a tab)."""


def without_gutter(text: str) -> str:
    """``text`` without the line numbers of its numbered lines (a view may follow a header, or
    share a message with other results); a text with neither separator as it is (two scans
    in C, where the substitution takes ~40 µs for 8 kB)."""
    if "→" not in text and "\t" not in text:
        return text
    return _GUTTER.sub("", text)


def quotable(text: str) -> Iterator[str]:
    """The stripped lines of ``text`` (without a numbered view's gutter) long enough to count
    as a quote."""
    for line in without_gutter(text).splitlines():
        if len(line) >= MIN_QUOTE_CHARS:
            stripped = line.strip()
            if len(stripped) >= MIN_QUOTE_CHARS:
                yield stripped


_ASKER_ROLES = frozenset({"user", "system", "developer", "tool", "function"})
"""Roles whose messages are not the model's answers (a user's paste is no evidence that the
model needed a line)."""

_OUTPUT_SUFFIXES = ("_output", "_result")
"""Type suffixes of the items and blocks that carry a tool's output (Responses'
``function_call_output``, ``shell_call_output``...; Anthropic's ``tool_result``,
``web_search_tool_result``...)."""


def answer_strings(message: Any) -> Iterator[str]:
    """Every string of an answer message (text, tool inputs; a JSON-encoded input decoded), or
    nothing when ``message`` is not the model's (a user, system or tool message)."""
    if isinstance(message, BaseModel):
        message = message.model_dump(mode="json")
    if not isinstance(message, dict) or message.get("role") in _ASKER_ROLES:
        return
    if _is_output(message):
        return  # a Responses tool output item (no role): the tool's text, not the model's
    yield from _strings(message, depth=0)


def _is_output(value: dict[str, Any]) -> bool:
    """Whether ``value`` is a tool's output item or block (``function_call_output``, a server
    tool's ``web_search_tool_result``...): what a tool said, even inside the model's turn."""
    kind = value.get("type")
    return isinstance(kind, str) and kind.endswith(_OUTPUT_SUFFIXES)


def _strings(value: Any, depth: int) -> Iterator[str]:
    # Answers are shallow (content blocks, tool inputs); a bound keeps a hostile one cheap.
    if depth > 32:
        return
    if isinstance(value, str):
        if value[:1] in ("{", "[") and len(value) >= MIN_QUOTE_CHARS:
            # OpenAI's tool-call arguments are a JSON string: its strings hold the quotes.
            try:
                decoded = orjson.loads(value)
            except orjson.JSONDecodeError:
                yield value
            else:
                yield from _strings(decoded, depth + 1)
            return
        yield value
    elif isinstance(value, dict):
        if _is_output(value):
            return
        for item in value.values():
            yield from _strings(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item, depth + 1)
