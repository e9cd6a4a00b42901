"""Encoding a request copy from the agent's own bytes: ``orjson.dumps`` of the whole copy, in
time proportional to the messages the copy replaced.

A message the copy keeps as it came (the same object, at the same index) is the agent's bytes
when those are what ``orjson.dumps`` makes of it (:attr:`Parsed.own`, checked once, when the
message was parsed; the session never modifies a message it is given), and a run of such
messages one comma apart is one slice of the body. Property-tested against ``orjson.dumps``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from itertools import compress
from operator import is_not
from typing import Any, Final

import orjson

from budget.proxy._incremental import Parsed

__all__ = ["encode"]

_MARK: Final = f"\x00toolbudget-{uuid.uuid4().hex}"
_MARK_BYTES: Final = orjson.dumps(_MARK)


def _outer(body: dict[str, Any], name: str) -> tuple[bytes, bytes] | None:
    """``orjson.dumps(body)``'s bytes before and after the history's value, or None."""
    out = orjson.dumps({**body, name: _MARK})
    if out.count(_MARK_BYTES) != 1:
        return None
    at = out.index(_MARK_BYTES)
    return out[:at], out[at + len(_MARK_BYTES) :]


def encode(parsed: Parsed, copy: Sequence[Any]) -> bytes:
    """``orjson.dumps({**parsed.body, parsed.name: copy})``, with the agent's own bytes for the
    messages of ``copy`` that are ``parsed.history``'s (at the same index) and were sent as
    orjson encodes them: the work is proportional to the messages the copy replaced."""
    name, body, history = parsed.name, parsed.body, parsed.history
    if not parsed.indexed or history is None or len(copy) != len(history):
        return orjson.dumps({**body, name: list(copy)})
    if parsed.outer is None:
        parsed.outer = _outer(body, name)
    if parsed.outer is None:
        return orjson.dumps({**body, name: list(copy)})
    n = len(history)
    # The replaced positions, found at C speed (map and compress, no Python loop per message).
    replaced = list(compress(range(n), map(is_not, copy, history)))
    old, encoded = parsed.encoded, dict[int, tuple[Any, bytes]]()
    pieces: list[bytes | memoryview] = []
    at = 0
    for i in [*replaced, n]:
        if at < i:
            pieces.extend(_kept(parsed, at, i, old, encoded))
        if i < n:
            pieces.append(_encoded(copy[i], old, encoded))
        at = i + 1
    parsed.encoded = encoded
    outer = parsed.outer
    return b"".join([outer[0], b"[", b",".join(pieces), b"]", outer[1]])


def _kept(
    parsed: Parsed,
    a: int,
    b: int,
    old: dict[int, tuple[Any, bytes]],
    encoded: dict[int, tuple[Any, bytes]],
) -> list[bytes | memoryview]:
    """The encodings of ``parsed.history[a:b]``, kept as they came: one slice of the agent's
    bytes when those are orjson's, one comma apart (``tight``), else message by message."""
    starts, ends, own, tight = parsed.starts, parsed.ends, parsed.own, parsed.tight
    if own[a] and tight.find(0, a + 1, b) < 0:
        return [memoryview(parsed.raw)[starts[a] : ends[b - 1]]]
    raw, history = memoryview(parsed.raw), parsed.history
    assert history is not None
    return [
        raw[starts[j] : ends[j]] if own[j] else _encoded(history[j], old, encoded)
        for j in range(a, b)
    ]


def _encoded(
    message: Any, old: dict[int, tuple[Any, bytes]], encoded: dict[int, tuple[Any, bytes]]
) -> bytes:
    """``orjson.dumps(message)``, kept from the last request's copy when it is the same object
    (the session hands the same rewritten message back while its decisions stand)."""
    got = old.get(id(message))
    enc = got[1] if got is not None and got[0] is message else orjson.dumps(message)
    encoded[id(message)] = (message, enc)
    return enc
