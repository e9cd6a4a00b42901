"""JSON bytes of any value an importer accepts, however deeply nested.

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

__all__ = ["dumps"]


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
