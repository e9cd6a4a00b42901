"""Read-back: the exact lines of a spilled output, and the tool that lets a model page through them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

from budget._config import BudgetConfig
from budget._errors import BudgetError, InputError
from spill import Store, validate_ref

__all__ = ["ReadBack", "split_lines"]

_MAX_GREP = 500


def split_lines(text: str) -> list[str]:
    """The lines of ``text``, each keeping its newline, so that joining them gives ``text`` back."""
    if not text:
        return []
    lines = text.split("\n")
    last = lines.pop()
    out = [line + "\n" for line in lines]
    if last:
        out.append(last)
    return out


def _matcher(grep: str) -> re.Pattern[str]:
    if not isinstance(grep, str) or not grep:
        raise InputError("grep must be a non-empty string")
    if len(grep) > _MAX_GREP:
        raise InputError(f"grep must be at most {_MAX_GREP} characters, not {len(grep)}")
    try:
        return re.compile(grep)
    except re.error:
        # A pattern that is not a valid regular expression is searched for literally.
        return re.compile(re.escape(grep))


def _int_arg(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{name} must be an integer, not {type(value).__name__}")
    if value < minimum:
        raise InputError(f"{name} must be at least {minimum}, not {value}")
    return value


class ReadBack:
    """Reads spilled outputs back by lines; keeps the last one read, for paging."""

    def __init__(self, store: Store, config: BudgetConfig) -> None:
        self._store = store
        self._config = config
        self._cached: tuple[str, list[str]] | None = None

    def _lines(self, ref: str) -> list[str]:
        ref = validate_ref(ref)
        if self._cached is not None and self._cached[0] == ref:
            return self._cached[1]
        lines = split_lines(self._store.get(ref))
        self._cached = (ref, lines)
        return lines

    def _select(
        self, ref: str, offset: int, limit: int | None, grep: str | None
    ) -> tuple[list[tuple[int, str]], int]:
        """(1-based line number, line) pairs chosen, and the number of candidate lines."""
        offset = _int_arg(offset, "offset", 0)
        if limit is not None:
            limit = _int_arg(limit, "limit", 1)
        lines = self._lines(ref)
        numbered: list[tuple[int, str]] = list(enumerate(lines, 1))
        if grep is not None:
            pattern = _matcher(grep)
            numbered = [(n, line) for n, line in numbered if pattern.search(line)]
        end = len(numbered) if limit is None else offset + limit
        return numbered[offset:end], len(numbered)

    def read(
        self, ref: str, *, offset: int = 0, limit: int | None = None, grep: str | None = None
    ) -> str:
        """The exact text of the chosen lines (the whole output, byte-exact, when no argument)."""
        if offset == 0 and limit is None and grep is None:
            return self._store.get(validate_ref(ref))
        chosen, _ = self._select(ref, offset, limit, grep)
        return "".join(line for _, line in chosen)

    def tool_definition(self) -> dict[str, Any]:
        """The read-back tool in the Anthropic format (``input_schema``)."""
        return {
            "name": self._config.read_tool_name,
            "description": (
                "Read a tool output that was too large to show in full. Pass the ref given in "
                "the [toolbudget] notice; page with offset (lines to skip) and limit, or pass "
                "grep (a regular expression) to see only the matching lines, with line numbers."
            ),
            "input_schema": {
                "type": "object",
                "properties": {
                    "ref": {
                        "type": "string",
                        "description": "The 32-character ref from the notice.",
                        "pattern": "^[0-9a-f]{32}$",
                    },
                    "offset": {
                        "type": "integer",
                        "minimum": 0,
                        "description": "Lines to skip (0 starts at the first line).",
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "Most lines to return.",
                    },
                    "grep": {
                        "type": "string",
                        "description": "Only lines matching this regular expression.",
                    },
                },
                "required": ["ref"],
                "additionalProperties": False,
            },
        }

    def handle(self, tool_input: Mapping[str, Any] | str) -> str:
        """One page of numbered lines, with a hint to read on; an error text the model can act on."""
        try:
            return self._page(tool_input)
        except BudgetError as exc:
            return f"Error: {exc}"

    def _page(self, tool_input: Mapping[str, Any] | str) -> str:
        if isinstance(tool_input, str):  # OpenAI formats pass the arguments as a JSON string
            try:
                tool_input = orjson.loads(tool_input)
            except orjson.JSONDecodeError as exc:
                raise InputError(f"the tool input is not valid JSON: {exc}") from None
        if not isinstance(tool_input, Mapping):
            raise InputError(f"the tool input must be an object, not {type(tool_input).__name__}")
        unknown = set(tool_input) - {"ref", "offset", "limit", "grep"}
        if unknown:
            raise InputError(f"unknown argument(s): {', '.join(sorted(map(str, unknown)))}")
        ref = tool_input.get("ref")
        offset = tool_input.get("offset", 0)
        limit = tool_input.get("limit")
        grep = tool_input.get("grep")
        if grep is not None and not isinstance(grep, str):
            raise InputError(f"grep must be a string, not {type(grep).__name__}")
        chosen, total = self._select(ref, offset, limit, grep)  # type: ignore[arg-type]
        budget = self._config.read_page_chars
        out: list[str] = []
        used = 0
        shown = 0
        for n, line in chosen:
            body = line.removesuffix("\n")
            row = f"{n:>6}\t{body}"
            if used + len(row) + 1 > budget:
                if shown == 0:
                    # One line longer than a page: show its start rather than nothing.
                    out.append(row[:budget] + f" [line {n} continues: {len(body):,} characters]")
                    shown = 1
                break
            out.append(row)
            used += len(row) + 1
            shown += 1
        what = "matching lines" if grep is not None else "lines"
        head = f"[toolbudget] ref {ref}: {what} {offset + 1}-{offset + shown} of {total}"
        if not chosen:
            head = f"[toolbudget] ref {ref}: no {what} at offset {offset} (there are {total})"
        nxt = offset + shown
        tail = f"[more: call again with offset={nxt}]" if nxt < total else "[end]"
        return "\n".join([head, *out, tail])
