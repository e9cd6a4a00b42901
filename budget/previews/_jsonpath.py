"""JSON paths for read-back: ``$.items[3].name``, ``$["a key"][0]``, ``$[-1]`` (a subset of RFC
9535's normalized paths: names and indexes, no wildcards or filters), and what they select."""

from __future__ import annotations

import json
import re
import sys
from typing import Any, Final

from budget._errors import InputError

__all__ = ["parse_path", "select"]

_STEP: Final = re.compile(
    r"""\.(?P<name>[A-Za-z_$][\w$-]*)|\[(?P<index>-?\d+)\]|\[(?P<q>["'])(?P<key>(?:\\.|(?!(?P=q))[^\\])*)(?P=q)\]""",
    re.S,  # a key may hold a newline (a model's JSON argument decodes "\n" to one)
)
"""A step. A quoted key's characters are an escape or any character but the quote and the
backslash: with a backslash allowed in both (as before), a run of them could be read in 2**n
ways: refusing ``$["`` then backslashes and no closing quote took twice as long for every two
more (24 of them: 16 ms; the 497 a 500-character path allows: longer than any session)."""
_ESCAPE: Final = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.S)
_ESCAPED: Final = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _unescape(key: str) -> str:
    """A quoted key's escapes as JSON (and RFC 9535) read them: ``\\n``, ``\\t``, ``\\u001f``, a
    surrogate pair as its one character; any other escaped character as itself (``\\"``, ``\\'``,
    ``\\\\``). Before, ``\\u001f`` selected the key ``u001f``."""

    def one(m: re.Match[str]) -> str:
        e = m.group(1)
        return chr(int(e[1:], 16)) if len(e) == 5 else _ESCAPED.get(e, e)

    out = _ESCAPE.sub(one, key)
    # Joins a \uD83D\uDE00 pair into one character as json.loads does; lone halves stay.
    return out.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


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
            steps.append(_unescape(m.group("key")))
        pos = m.end()
    return tuple(steps)


def _number(literal: str) -> int:
    try:
        return int(literal)
    except ValueError:
        return 0  # past Python's digit limit: stands in, so the parse tells if the rest is JSON


def _refuse_huge_numbers(text: str) -> None:
    """InputError when ``text`` is JSON that fails to load only for an integer past Python's
    digit limit: the model is told so, not that the output is no JSON."""
    try:
        json.loads(text, parse_int=_number)
    except (ValueError, RecursionError):
        return
    raise InputError(
        f"path cannot read this JSON: a number in it has more than "
        f"{sys.get_int_max_str_digits():,} digits; read its lines with offset and limit"
    )


def _records(text: str) -> Any:
    """``text`` as JSON, or as NDJSON (a list of its records); InputError when it is neither."""
    try:
        return json.loads(text)
    except RecursionError:
        raise InputError("path cannot read this JSON: it is nested too deeply") from None
    except ValueError:
        _refuse_huge_numbers(text)
    records: list[Any] = []
    for n, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except (ValueError, RecursionError):
            _refuse_huge_numbers(line)
            if not records:
                raise InputError("path needs a JSON output, and this output is not JSON") from None
            # Records before it parsed: NDJSON with one broken line; say which, so the model
            # can page to it rather than be told the whole output is not JSON.
            raise InputError(
                f"path needs a JSON output: this output reads as one JSON record a line, but "
                f"its line {n:,} is not JSON; read it with offset={n - 1} and limit=1"
            ) from None
    return records


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
