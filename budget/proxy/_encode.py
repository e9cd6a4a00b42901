"""Encoding a request copy from the agent's own bytes, in time proportional to the messages the
copy replaced.

The copy's bytes are the agent's body with each message the copy replaced (a new object at the
same index; the session never modifies a message it is given) swapped for ``orjson.dumps`` of its
replacement: every other byte, the fields around the history and the messages kept, goes
upstream as the agent wrote it. A number orjson would write back otherwise (an integer beyond 64
bits, which it parses as a float; ``1E5``, ``-0``, ``1e-400``, digits past a double's precision)
is thus kept as written, unless it sits in a replaced message: then the copy cannot keep it and
:class:`NumberRewritten` is raised (the proxy sends the body unchanged). Property-tested.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from itertools import compress, islice
from operator import is_not
from typing import Any, Final

import orjson

from budget.proxy._incremental import Parsed, string_end
from budget.proxy._sent import Sent

__all__ = ["NumberRewritten", "encode", "numbers_exact"]

_NUMBER: Final = re.compile(rb"-?[0-9][0-9.eE+-]*")
"""A number, outside strings (no other JSON token holds a digit)."""


class NumberRewritten(Exception):
    """A number the copy would re-encode is not written as orjson writes it back."""


def numbers_exact(raw: bytes, start: int, end: int) -> bool:
    """Whether every number in ``raw[start:end]`` (valid JSON) is what ``orjson.dumps`` writes for
    the value ``orjson.loads`` reads from it. Strings are skipped with ``bytes.find`` (C speed):
    the work is the strings' count, not their length."""
    pos = start
    while pos < end:
        quote = raw.find(b'"', pos, end)
        stop = end if quote < 0 else quote
        for m in _NUMBER.finditer(raw, pos, stop):
            token = m.group()
            try:
                if orjson.dumps(orjson.loads(token)) != token:
                    return False
            except orjson.JSONDecodeError:
                return False
        if quote < 0:
            return True
        pos = string_end(raw, quote)
        if pos < 0:
            return False
    return True


def encode(parsed: Parsed, copy: Sequence[Any]) -> bytes:
    """The bytes of ``parsed``'s body with ``copy`` as its history: the agent's bytes, the
    messages of ``copy`` that are not ``parsed.history``'s (at the same index) swapped for their
    encoding. :class:`NumberRewritten` if that would rewrite a number the agent wrote.

    The messages the last body's copy had, on the same bytes, are its bytes again (decisions
    are frozen: a conversation's copy changes in its last messages only, but for a batch): they
    are taken from it whole, and only the messages after them are swapped one by one."""
    name, body, history = parsed.name, parsed.body, parsed.history
    raw = parsed.raw
    if not parsed.indexed or history is None or len(copy) != len(history):
        # Not spliceable (a body _index could not map, a copy of another length): orjson's
        # bytes of the whole copy, where that keeps every number as the agent wrote it.
        if not numbers_exact(raw, 0, len(raw)):
            raise NumberRewritten
        return orjson.dumps({**body, name: list(copy)})
    # The replaced positions, found at C speed (map and compress, no Python loop per message).
    replaced = list(compress(range(len(history)), map(is_not, copy, history)))
    starts, ends, own, numbers = parsed.starts, parsed.ends, parsed.own, parsed.numbers
    view = memoryview(raw)
    old, encoded = parsed.encoded, dict[int, tuple[Any, bytes]]()
    same = _same(parsed, copy)
    pieces: list[bytes | memoryview] = []
    done, shifts, at, shift = list[int](), list[int](), 0, 0
    if same:
        sent = parsed.sent
        assert sent is not None  # _same found messages in it
        r = bisect_left(sent.replaced, same)
        done, shifts = sent.replaced[:r], sent.shifts[:r]
        at = ends[same - 1]
        shift = shifts[-1] if shifts else 0
        pieces.append(memoryview(sent.out)[: at + shift])
    for i in replaced[bisect_left(replaced, same) :]:
        if numbers[i] == 0:  # checked once per message: the next bodies carry the flag over
            numbers[i] = 1 if own[i] or numbers_exact(raw, starts[i], ends[i]) else 2
        if numbers[i] == 2:
            raise NumberRewritten
        pieces.append(view[at : starts[i]])
        enc = _encoded(copy[i], old, encoded)
        pieces.append(enc)
        shift += len(enc) - (ends[i] - starts[i])
        done.append(i)
        shifts.append(shift)
        at = ends[i]
    pieces.append(view[at:])
    parsed.encoded = encoded
    out = b"".join(pieces) if done else raw
    parsed.sent = Sent(raw, list(copy), out, done, shifts)
    return out


def _same(parsed: Parsed, copy: Sequence[Any]) -> int:
    """How many messages the copy starts with that the last body's copy had, on the same bytes
    (``parsed.sent``: carried from the body ``parsed`` reused messages of)."""
    sent = parsed.sent
    if sent is None:
        return 0
    limit = min(parsed.reused, len(sent.copy), len(copy))
    differs = list(map(is_not, islice(copy, limit), islice(sent.copy, limit)))
    return differs.index(True) if True in differs else limit


def _encoded(
    message: Any, old: dict[int, tuple[Any, bytes]], encoded: dict[int, tuple[Any, bytes]]
) -> bytes:
    """``orjson.dumps(message)``, kept from the last request's copy when it is the same object
    (the session hands the same rewritten message back while its decisions stand)."""
    got = old.get(id(message))
    enc = got[1] if got is not None and got[0] is message else orjson.dumps(message)
    encoded[id(message)] = (message, enc)
    return enc
