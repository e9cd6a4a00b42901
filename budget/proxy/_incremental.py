"""Parsing a request body in time proportional to what is new in it.

An agent re-sends its whole conversation with every request: the same bytes as last time, a few
new messages at the end (and the last one or two edited in place, where clients move their
``cache_control`` markers). :class:`Bodies` keeps, per conversation, the last body's bytes and
where each message of its history array ends; a body that starts with the same bytes through
message ``k``'s end reuses the messages parsed before (the very same objects, so the session's
history check is an identity check) and parses only what follows; its request copy is the
agent's bytes with the replaced messages swapped (:mod:`budget.proxy._encode`).

Exactness: the result is always what ``orjson.loads`` gives for the whole body (property-tested).
The prefix is compared byte for
byte, never by hash; the new part is parsed by orjson, which also validates it; anything the
incremental path is unsure of (a key repeated across the parts, a field it cannot find, bytes
orjson refuses) falls back to the full parse, which alone decides what a body is.
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from budget.proxy._sent import Sent

__all__ = ["INLINE_BYTES", "MAX_BYTES", "MAX_STATES", "Bodies", "Parsed", "string_end"]

MAX_STATES: Final = 64
"""Bodies kept to parse the next request of their conversation against (least recently used
dropped first): more than the conversations an agent runs at once."""
MAX_BYTES: Final = 256 * 1024 * 1024
"""And at most this many bytes of them in all (each holds the copy last sent beside it, uncounted)."""
_FINGERPRINT: Final = 1024
"""A body's first bytes index the kept ones: the next request of a conversation starts with the
same (its model, its first message), and a miss only costs a full parse."""
INLINE_BYTES: Final = 256 * 1024
"""New bytes a body may need parsed for the proxy to parse it in its event loop (~0.3 ms with
orjson for bytes it encodes as the agent did); more, or a conversation's first body, goes to a
worker thread."""
_PER_FINGERPRINT: Final = 4
"""Kept bodies sharing their first bytes (a conversation and its branches, subagents starting
alike), the most recent first."""

_WS: Final = re.compile(rb"[ \t\n\r]*")
_STRUCT: Final = re.compile(rb'["\[\]{}]')
"""What the scanner stops at: a string's start, an object's or array's bounds."""
_SCALAR: Final = re.compile(rb"[^ \t\n\r,\]}]+")
_OPEN: Final = frozenset(b"[{")


def _ws(data: bytes, pos: int) -> int:
    m = _WS.match(data, pos)
    assert m is not None  # matches the empty string
    return m.end()


def string_end(data: bytes, pos: int) -> int:
    """Where the JSON string opening at ``pos`` ends, or -1: its first quote not escaped (an odd
    number of backslashes before it), found with ``bytes.find`` at C speed, so a long tool output
    costs what its escaped quotes do, not its escapes (a regex walks every ``\\n``)."""
    at = pos + 1
    while True:
        quote = data.find(b'"', at)
        if quote < 0:
            return -1
        back = quote - 1
        while data[back] == 0x5C:  # stops at the opening quote at the latest
            back -= 1
        if (quote - 1 - back) % 2 == 0:
            return quote + 1
        at = quote + 1


def _value_end(data: bytes, pos: int) -> int:
    """Where the JSON value starting at ``pos`` ends, or -1 (exact on valid JSON only: the
    scanner is trusted only where orjson has found the bytes valid)."""
    if pos >= len(data):
        return -1
    head = data[pos]
    if head == 0x22:  # '"'
        return string_end(data, pos)
    if head in _OPEN:
        depth, at, search = 0, pos, _STRUCT.search
        while True:
            m = search(data, at)
            if m is None:
                return -1
            found = m.start()
            char = data[found]
            if char == 0x22:
                at = string_end(data, found)
                if at < 0:
                    return -1
                continue
            if char in _OPEN:
                depth += 1
            else:
                depth -= 1
                if depth == 0:
                    return found + 1
            at = found + 1
    m = _SCALAR.match(data, pos)
    return m.end() if m is not None else -1


def _element_end(data: bytes, pos: int, value: Any) -> tuple[int, bool]:
    """Where the array element at ``pos`` (parsed as ``value``) ends, and whether its bytes are
    exactly ``orjson.dumps(value)`` (then its numbers need no check: orjson wrote them): checked
    first, as it also finds the end at C speed. An object or array's encoding cannot be a proper
    prefix of another value's bytes, so a match is the element; a scalar is always scanned."""
    if isinstance(value, dict | list):
        try:
            enc = orjson.dumps(value)
        except orjson.JSONEncodeError:  # nested deeper than orjson encodes (254 levels)
            return _value_end(data, pos), False
        if data.startswith(enc, pos):
            return pos + len(enc), True
    return _value_end(data, pos), False


@dataclass(eq=False, slots=True)
class Parsed:
    """A body as ``orjson.loads`` gives it, with where its history's messages are in ``raw``.

    ``history`` is None when the body has no ``name`` list; ``open`` is -1 when the body is not
    indexed (its next request is parsed whole)."""

    raw: bytes
    body: Any
    history: list[Any] | None
    name: str
    """The history's key (``messages``, ``input``)."""
    open: int = -1
    """Offset of the history array's ``[``."""
    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    """Offsets of each message's first byte and of the byte after its last."""
    own: bytearray = field(default_factory=bytearray)
    """Per message, 1 when its bytes are exactly ``orjson.dumps`` of it."""
    numbers: bytearray = field(default_factory=bytearray)
    """Per message, whether its numbers are written as orjson writes them back: 0 not checked
    yet, 1 they are, 2 not (checked once, when the copy first replaces the message)."""
    close: int = -1
    """Offset of the array's ``]``."""
    head: dict[str, Any] = field(default_factory=dict)
    tail: dict[str, Any] = field(default_factory=dict)
    """The body's other keys, before and after the history's."""
    lead: int = -1
    """Messages whose bytes (with the head's and the tail's) determine the session's key."""
    key: tuple[str | None, str] | None = None
    """The explicit session header and the session key computed for this body."""
    encoded: dict[int, tuple[Any, bytes]] = field(default_factory=dict)
    """Encodings of copy messages that are not the agent's bytes, by object id (the object kept
    beside it, so an id is never reused while its entry lives)."""
    reused: int = 0
    """Messages taken from the previous body (0: parsed whole)."""
    sent: Sent | None = None
    """This body's request copy as last encoded (before: the previous body's, if made from it)."""

    @property
    def indexed(self) -> bool:
        return self.open >= 0

    def rest(self) -> memoryview:
        """The bytes after the history array."""
        return memoryview(self.raw)[self.close + 1 :]

    def key_for(self, explicit: str | None, prev: Parsed | None) -> str | None:
        """The session key ``prev`` computed, if this body's key is bound to be the same."""
        if prev is None or prev.key is None or prev.key[0] != explicit:
            return None
        if self.head is prev.head and self.tail is prev.tail and 0 <= prev.lead < self.reused:
            return prev.key[1]
        return None


def _index(raw: bytes, body: dict[str, Any], history: list[Any], name: str) -> Parsed | None:
    """Where ``body`` (``orjson.loads(raw)``) keeps each message of ``history``, or None."""
    quoted = orjson.dumps(name)
    pos = _ws(raw, 0)
    if raw[pos : pos + 1] != b"{":
        return None
    pos = _ws(raw, pos + 1)
    head_end = pos  # the head's bytes end before the history's key (and its comma)
    while True:
        key_end = string_end(raw, pos) if raw[pos : pos + 1] == b'"' else -1
        if key_end < 0:
            return None
        colon = _ws(raw, key_end)
        if raw[colon : colon + 1] != b":":
            return None
        value = _ws(raw, colon + 1)
        if raw[pos:key_end] == quoted:
            break
        end = _value_end(raw, value)
        if end < 0:
            return None
        pos = _ws(raw, end)
        if raw[pos : pos + 1] != b",":
            return None  # the object ends before the history's key (written escaped)
        head_end = pos
        pos = _ws(raw, pos + 1)
    if raw[value : value + 1] != b"[":
        return None
    parsed = Parsed(raw, body, history, name, open=value)
    pos = value + 1
    for i, message in enumerate(history):
        pos = _ws(raw, pos)
        if i:
            if raw[pos : pos + 1] != b",":
                return None
            pos = _ws(raw, pos + 1)
        end, own = _element_end(raw, pos, message)
        if end < 0:
            return None
        parsed.starts.append(pos)
        parsed.ends.append(end)
        parsed.own.append(own)
        pos = end
    parsed.numbers = bytearray(len(history))
    pos = _ws(raw, pos)
    if raw[pos : pos + 1] != b"]":
        return None
    parsed.close = pos
    head = _head(raw, head_end)
    tail = _tail(parsed.rest())
    if head is None or tail is None or name in head or name in tail:
        return None  # the history's key appears twice: orjson keeps the last one
    # The parts put together give the whole body (the history compared by identity: cheap).
    if {**head, name: history, **tail} != body or [*head, name, *tail] != list(body):
        return None
    parsed.head, parsed.tail = head, tail
    return parsed


def _head(raw: bytes, end: int) -> dict[str, Any] | None:
    """The keys before the history's (``raw[:end]``, ``end`` at the comma before its key)."""
    try:
        got = orjson.loads(raw[:end] + b"}") if raw[end : end + 1] == b"," else {}
    except orjson.JSONDecodeError:
        return None
    return got if isinstance(got, dict) else None


def _tail(rest: memoryview) -> dict[str, Any] | None:
    """The keys after the history array (``rest``: from the byte after its ``]``)."""
    data = bytes(rest)
    pos = _ws(data, 0)
    if data[pos : pos + 1] == b"}":
        return {} if _ws(data, pos + 1) == len(data) else None
    if data[pos : pos + 1] != b",":
        return None
    try:
        got = orjson.loads(b"{" + data[pos + 1 :])
    except orjson.JSONDecodeError:
        return None
    return got if isinstance(got, dict) else None


def _extend(prev: Parsed, raw: bytes, k: int) -> Parsed | None:
    """``raw`` parsed reusing ``prev``'s first ``k`` messages (``raw`` starts with the same bytes
    through the end of the ``k``-th), or None: then it is parsed whole."""
    start = prev.ends[k - 1]
    starts, ends = prev.starts[:k], prev.ends[:k]
    own, numbers = prev.own[:k], prev.numbers[:k]
    try:
        # The array's continuation after message k behind a stand-in first element, and the rest
        # of the body: valid only if it is a valid continuation of the body, and then its first
        # value is the array's new messages (unless the history's key comes again later, which
        # the rest's own check below refuses).
        cont = orjson.loads(b"{" + orjson.dumps(prev.name) + b":[0" + raw[start:])
    except orjson.JSONDecodeError:
        return None
    array = cont.get(prev.name) if isinstance(cont, dict) else None
    if not isinstance(array, list) or not array:
        return None
    new = array[1:]
    # Where each new message ends: orjson's bytes for it, checked in place (C speed), else scanned.
    pos = _ws(raw, start)
    for message in new:
        if raw[pos : pos + 1] != b",":
            return None
        at = _ws(raw, pos + 1)
        end, mine = _element_end(raw, at, message)
        if end < 0:
            return None
        starts.append(at)
        ends.append(end)
        own.append(mine)
        numbers.append(0)
        pos = _ws(raw, end)
    if raw[pos : pos + 1] != b"]":
        return None
    close = pos
    rest = memoryview(raw)[close + 1 :]
    if rest == prev.rest():
        tail = prev.tail  # the same bytes: the same keys, checked when they were parsed
    else:
        got = _tail(rest)
        if got is None or prev.name in got or any(key in prev.head for key in got):
            return None  # a key repeated across the parts: orjson keeps the last one
        tail = got
    assert prev.history is not None  # an indexed body has its history
    history = prev.history[:k] + new
    body = {**prev.head, prev.name: history, **tail}
    parsed = Parsed(raw, body, history, prev.name, open=prev.open)
    parsed.starts, parsed.ends, parsed.close = starts, ends, close
    parsed.own, parsed.numbers = own, numbers
    parsed.head, parsed.tail, parsed.reused = prev.head, tail, k
    parsed.encoded = prev.encoded
    parsed.sent = prev.sent if prev.sent is not None and prev.sent.raw is prev.raw else None
    return parsed


def _shared(prev: Parsed, raw: bytes) -> int:
    """How many of ``prev``'s messages ``raw`` starts with, byte for byte (0: none)."""
    ends, old = prev.ends, memoryview(prev.raw)
    n = len(ends)
    if n == 0 or not raw.startswith(old[: ends[0]]):
        return 0
    # Mostly the whole previous history but its last message or two: checked in that order,
    # each range compared once (memcmp), then a bisection over the rest if it diverged earlier.
    good = 1
    probe = max(n - 2, 1)
    if raw.startswith(old[ends[0] : ends[probe - 1]], ends[0]):
        good = probe
        while good < n and raw.startswith(old[ends[good - 1] : ends[good]], ends[good - 1]):
            good += 1
        return good
    lo, hi = 1, probe - 1  # messages [0, lo) match; the answer is in [lo, hi]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if raw.startswith(old[ends[lo - 1] : ends[mid - 1]], ends[lo - 1]):
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass(eq=False, slots=True)
class _Kept:
    by_fingerprint: OrderedDict[bytes, list[Parsed]] = field(default_factory=OrderedDict)
    used_at: dict[bytes, float] = field(default_factory=dict)
    count: int = 0
    size: int = 0


class Bodies:
    """The last bodies of the conversations going through the proxy, to parse their next
    requests against (thread-safe: bodies are parsed in worker threads)."""

    def __init__(
        self,
        *,
        max_states: int = MAX_STATES,
        max_bytes: int = MAX_BYTES,
        idle_s: float = 900.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``idle_s``: a conversation's body unused that long is dropped (as the pool closes
        its session), so an idle proxy holds none of them."""
        self._max_states, self._max_bytes = max_states, max_bytes
        self._idle_s, self._clock = idle_s, clock
        self._kept = _Kept()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._kept.count

    def parse(self, name: str, raw: bytes) -> tuple[Parsed, Parsed | None]:
        """``raw`` parsed (``orjson.JSONDecodeError`` if it is not JSON) and the body it reused
        messages of, if any."""
        got = self.parse_within(name, raw, None)
        assert got is not None  # no limit
        return got

    def parse_within(
        self, name: str, raw: bytes, at_most: int | None
    ) -> tuple[Parsed, Parsed | None] | None:
        """:meth:`parse`, or None if that means parsing more than ``at_most`` new bytes (the
        caller then parses it where a long parse blocks nothing)."""
        fingerprint = raw[:_FINGERPRINT]
        with self._lock:
            candidates = list(self._kept.by_fingerprint.get(fingerprint, ()))
        best, k = None, 0
        for prev in candidates:
            if prev.name != name:
                continue
            shared = _shared(prev, raw)
            if shared > k:
                best, k = prev, shared
        if best is not None:
            if at_most is not None and len(raw) - best.ends[k - 1] > at_most:
                return None
            got = _extend(best, raw, k)
            if got is not None:
                self._keep(fingerprint, got, best)
                return got, best
        if at_most is not None and len(raw) > at_most:
            return None
        body = orjson.loads(raw)
        history = body.get(name) if isinstance(body, dict) else None
        if not isinstance(history, list):
            return Parsed(raw, body, None, name), None
        indexed = _index(raw, body, history, name)
        if indexed is None:
            return Parsed(raw, body, history, name), None
        self._keep(fingerprint, indexed, None)
        return indexed, None

    def _keep(self, fingerprint: bytes, parsed: Parsed, prev: Parsed | None) -> None:
        kept = self._kept
        now = self._clock()
        with self._lock:
            bucket = kept.by_fingerprint.setdefault(fingerprint, [])
            kept.by_fingerprint.move_to_end(fingerprint)
            kept.used_at[fingerprint] = now
            if prev is not None and prev.ends and parsed.reused == len(prev.ends):
                # The conversation went on from prev: prev is never the better match again.
                for i, other in enumerate(bucket):
                    if other is prev:
                        del bucket[i]
                        kept.count -= 1
                        kept.size -= len(prev.raw)
                        break
            bucket.insert(0, parsed)
            kept.count += 1
            kept.size += len(parsed.raw)
            while len(bucket) > _PER_FINGERPRINT:
                dropped = bucket.pop()
                kept.count -= 1
                kept.size -= len(dropped.raw)
            while kept.by_fingerprint:
                oldest_key = next(iter(kept.by_fingerprint))
                over = kept.count > self._max_states or kept.size > self._max_bytes
                if not over and now - kept.used_at[oldest_key] < self._idle_s:
                    break
                oldest = kept.by_fingerprint[oldest_key]
                dropped = oldest.pop()
                kept.count -= 1
                kept.size -= len(dropped.raw)
                if not oldest:
                    del kept.by_fingerprint[oldest_key], kept.used_at[oldest_key]
