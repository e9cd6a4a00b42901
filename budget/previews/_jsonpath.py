"""JSON paths for read-back: ``$.items[3].name``, ``$["a key"][0]``, ``$[-1]`` (a subset of RFC
9535's normalized paths: names and indexes, no wildcards or filters), and what they select."""

from __future__ import annotations

import json
import re
from typing import Any, Final

from budget._errors import InputError

__all__ = ["parse_path", "select"]

_STEP: Final = re.compile(
    r"""\.(?P<name>[A-Za-z_$][\w$-]*)|\[(?P<index>-?\d+)\]|\[(?P<q>["'])(?P<key>(?:\\.|(?!(?P=q)).)*)(?P=q)\]"""
)


def parse_path(path: str) -> tuple[str | int, ...]:
    """The steps of ``path`` (names and indexes); InputError saying where it stops making sense."""
    text = path.strip()
    if not text.startswith("$"):
        raise InputError(f'path must start with "$" (e.g. "$.items[3].name"), not "{path}"')
    steps: list[str | int] = []
    pos = 1
    while pos < len(text):
        m = _STEP.match(text, pos)
        if m is None:
            raise InputError(
                f'path "{path}" is not understood at character {pos + 1} ("{text[pos : pos + 20]}"); '
                'use .name, ["a name"] or [index] steps'
            )
        if m.group("name") is not None:
            steps.append(m.group("name"))
        elif m.group("index") is not None:
            steps.append(int(m.group("index")))
        else:
            steps.append(re.sub(r"\\(.)", r"\1", m.group("key")))
        pos = m.end()
    return tuple(steps)


def _records(text: str) -> Any:
    """``text`` as JSON, or as NDJSON (a list of its records); InputError when it is neither."""
    try:
        return json.loads(text)
    except RecursionError:
        raise InputError("path cannot read this JSON: it is nested too deeply") from None
    except ValueError:
        pass
    try:
        return [json.loads(line) for line in text.split("\n") if line.strip()]
    except (ValueError, RecursionError):
        raise InputError("path needs a JSON output, and this output is not JSON") from None


def select(text: str, path: str) -> Any:
    """The value at ``path`` in JSON (or NDJSON) ``text``; InputError naming the missing step."""
    steps = parse_path(path)
    value = _records(text)
    where = "$"
    for step in steps:
        if isinstance(step, int):
            if not isinstance(value, list):
                raise InputError(f"{where} is {_kind(value)}, not an array: no [{step}]")
            if not -len(value) <= step < len(value):
                raise InputError(f"{where} has {len(value):,} items: no [{step}]")
            value = value[step]
            where = f"{where}[{step}]"
        else:
            if not isinstance(value, dict):
                raise InputError(f'{where} is {_kind(value)}, not an object: no key "{step}"')
            if step not in value:
                keys = ", ".join(list(value)[:10])
                raise InputError(f'{where} has no key "{step}" (its keys: {keys})')
            value = value[step]
            where = (
                f"{where}.{step}"
                if re.fullmatch(r"[A-Za-z_$][\w$-]*", step)
                else f'{where}["{step}"]'
            )
    return value


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"
