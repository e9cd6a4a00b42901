"""JSON bytes of any value an importer accepts, however deeply nested; JSON read as a UTF-16
recorder writes it.

orjson's encoder stops at 255 levels of nesting, fewer than its own parser accepts (1,024), so a
recorded tool input nested 300 levels deep loads but does not encode. :func:`dumps` falls back to
the standard library's encoder, which goes as deep as the interpreter's recursion limit; the
fallback's bytes differ from orjson's, but each value always takes the same path, so a hash of
them is stable.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["dumps", "loads"]


def dumps(value: Any, *, sort_keys: bool = False) -> bytes:
    """``value`` as compact JSON bytes (keys sorted when ``sort_keys``); raises ``TypeError`` for
    a value that is not JSON and ``RecursionError`` past the interpreter's recursion limit."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS if sort_keys else None)
    except TypeError as exc:
        if "Recursion limit" not in str(exc):
            raise
    return json.dumps(
        value, ensure_ascii=False, separators=(",", ":"), sort_keys=sort_keys
    ).encode()


def loads(data: bytes | str) -> Any:
    """The JSON value in ``data``, lone surrogate escapes (``"\\ud83d"``) read as U+FFFD.

    A recorder whose strings are UTF-16 (JavaScript's: Claude Code, Gemini CLI) writes half of
    an emoji that a ``slice`` cut as a lone ``\\udXXX`` escape, which RFC 8259 grammar allows
    and orjson refuses ("no low surrogate in string"): before this, the whole trace was
    skipped, or, on a JSONL file's last line, that line dropped as if torn. The standard
    library reads such an escape; each lone surrogate then becomes U+FFFD, the replacement
    character, which is what a UTF-8 consumer (the provider, orjson) can take of it. Other
    errors raise ``orjson.JSONDecodeError`` as before.
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if "surrogate" not in str(exc):
            raise
        try:
            value = json.loads(data)
        except ValueError:
            raise exc from None
    return _replace_surrogates(value)


def _replace_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        # Through UTF-16: a pair the parser left split joins again, a lone half becomes U+FFFD.
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [_replace_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_replace_surrogates(k): _replace_surrogates(v) for k, v in value.items()}
    return value
