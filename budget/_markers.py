"""Where a message carries ``cache_control`` markers: what keeps a request copy's markers the caller's.

A rewritten message in a request copy is a new dict made when its result was decided; it copied the
markers the caller's message had at that moment. Agents move markers in place between requests
(Anthropic's reference loop, ``_inject_prompt_caching`` in anthropics/anthropic-quickstarts
``computer-use-demo/computer_use_demo/loop.py``, marks the last three user turns and removes the
marker of the fourth in place), and some mark the copy they were given. The session compares a
message's markers, as :func:`markers` lists them, with those it saw when it made the copy, and makes
the copy again when they differ.

Markers are looked for where the three formats (and the proxies that accept markers in the OpenAI
shapes) put them: on the message or item, on its content blocks or output parts, and on the parts
of a block's content (an Anthropic ``tool_result``'s text and images).
"""

from __future__ import annotations

from typing import Any

from budget.formats._common import field, is_record

__all__ = ["MARKER", "Markers", "markers"]

MARKER = "cache_control"

Markers = tuple[tuple[tuple[int, ...], Any], ...]
"""Each marker with where it sits: indices into ``content`` / ``output``, from the message down."""

_NESTED = ("content", "output")
"""The keys whose lists hold blocks and parts (``output``: a Responses tool output item)."""


def markers(message: Any) -> Markers:
    """Every marker of ``message`` with its place, in order (empty for most messages)."""
    if type(message) is dict and _unmarked(message):
        return ()
    found: list[tuple[tuple[int, ...], Any]] = []
    _collect(message, (), found, 2)
    return tuple(found)


def _unmarked(message: dict[str, Any]) -> bool:
    """True when plain dicts all the way down carry no marker key where :func:`_collect` looks;
    False when they may (or another type is met): then the full walk answers. A resume checks
    every rewritten message of a long history, which almost never carries one."""
    if MARKER in message:
        return False
    inner = message.get("content")
    if inner is None:
        inner = message.get("output")
    if type(inner) is not list:
        return inner is None or type(inner) is str
    for block in inner:
        if type(block) is not dict or MARKER in block:
            return False
        parts = block.get("content")
        if parts is None:
            parts = block.get("output")
        if type(parts) is list:
            for part in parts:
                if type(part) is not dict or MARKER in part:
                    return False
        elif parts is not None and type(parts) is not str:
            return False
    return True


def _collect(
    record: Any, at: tuple[int, ...], found: list[tuple[tuple[int, ...], Any]], depth: int
) -> None:
    if type(record) is dict:
        mark = record.get(MARKER)
        inner = record.get("content")
        if inner is None:
            inner = record.get("output")
    else:
        mark = field(record, MARKER)
        inner = None
        for key in _NESTED:
            inner = field(record, key)
            if inner is not None:
                break
    if mark is not None:
        found.append((at, mark))
    if depth and isinstance(inner, list | tuple):
        for j, part in enumerate(inner):
            if is_record(part):
                _collect(part, (*at, j), found, depth - 1)
