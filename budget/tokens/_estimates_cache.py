"""Text token estimates kept across a resume, keyed by the hash of each text.

The first ``prepare`` after a resume rebuilds the per-message caches for the whole history, and
most of that is estimating the tokens of every text again (the character-class estimator reads
about 200 MB/s; hashing the same text with xxh3 runs at several GB/s). A session therefore keeps
what it estimated in a *sidecar* of its directory (``estimates.bin``, see
:meth:`spill.LocalStore.write_sidecar`): written at close and every ``SAVE_EVERY`` new
estimates, read when the session is opened again.

Nothing in it is trusted blindly:

* an entry is keyed by the xxh3-128 hash of its text's UTF-8 bytes (as refs are), so it can only
  answer for the very text it was computed from; an edited text misses and is estimated;
* the file carries a fingerprint of the estimator (the tokenizer profile, a format version and
  the estimate of a probe text covering every character class), so an estimator that changed
  (another model family, another release) makes the whole file stale, and it is ignored;
* the file carries a checksum, and is ignored when torn, truncated or damaged (it is written
  without fsync: a cache is not worth a journal commit).

An ignored sidecar only costs the time it would have saved, and the answers are the same with
and without it: a hit gives the number the estimator gave for the same text.

Whole messages are kept the same way, keyed by the hash of their compact JSON (orjson, a seed of
their own so a message never answers for a text): at close the session hands over the tokens of
its history's messages, as given and as its copies show them (:meth:`EstimateCache.keep_messages`),
and a scan of many messages (a resume) looks them up (:meth:`EstimateCache.message_tokens`), so a
resumed history is neither walked nor estimated again (serializing and hashing the 42 MB of a
5,201-message history takes ~15 ms; walking it ~150 ms). A request's few new messages are walked
as before: hashing them would cost a steady-state request more than it saves. The fingerprint
also holds the framed estimate of probe messages of every shape. A message orjson cannot
serialize as plain JSON (an SDK object, a dataclass, a subclass of a built-in type, an int beyond
64 bits) is estimated as without the cache. Two values with one JSON form (``NaN`` and ``None``,
an ``Enum`` member and its value) share a key: such a message, never seen in a provider's JSON,
could take the other's estimate.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from typing import Any, Final, TypeVar

import orjson
import xxhash

from budget._errors import StoreError
from budget._log import get_logger
from budget.tokens._tokens import TokenizerProfile, estimate_tokens
from spill import LocalStore, Store
from spill._store import encode_text

_T = TypeVar("_T")

__all__ = [
    "CACHE_MIN_CHARS",
    "MAX_ENTRIES",
    "SAVE_EVERY",
    "SIDECAR",
    "EstimateCache",
    "fingerprint",
    "load",
]

SIDECAR: Final = "estimates.bin"
CACHE_MIN_CHARS: Final = 256
"""Shorter texts are estimated again: hashing and a lookup cost about what estimating them does."""
MAX_ENTRIES: Final = 50_000
"""At most this many estimates are kept (24 bytes each on disk, 1.2 MB at most): a very long
session keeps the first ones, and the texts after them are estimated as without a cache. It
bounds what a save costs on the request path (encoding 50,000 entries takes a few ms) and what
decoding costs at open."""
SAVE_EVERY: Final = 4_096
"""New estimates after which the sidecar is written again during a session (and at close)."""

_VERSION: Final = 2
"""Bump when the estimator's answers change in a way the probe text could miss."""
_MAGIC: Final = b"TBEST\x00\x00\x01"
_HEAD: Final = struct.Struct("<8s8sQ")  # magic, estimator fingerprint, entry count
_ENTRY: Final = struct.Struct("<16sQ")  # xxh3-128 digest of the text, its tokens
_TAIL: Final = struct.Struct("<Q")  # xxh3-64 of everything before it
_PROBE: Final = (
    "Probe 0123456789 ÄÖÜ äöü ß é 中文 日本語 한국어 Ελληνικά русский עברית العربية 🙂🚀 "
    "def f(x): return {'k': [1, 2.5, None]}  # comment\n\t  src/app/models.py:42: Error\n"
    "https://example.com/a?b=c&d=e ~`!@#$%^&*()_+-=[]{}|;:'\",.<>/? \ud800"
)
"""A text with every character class the estimator weighs: its estimate is in the fingerprint."""
_PROBE_MESSAGES: Final = [
    {"role": "user", "content": [{"type": "text", "text": "x", "cache_control": {"t": 1}}]},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "n", "input": {}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c", "content": "y"}]},
    {
        "role": "assistant",
        "tool_calls": [{"id": "c", "function": {"name": "n", "arguments": "{}"}}],
    },
    {"role": "tool", "tool_call_id": "c", "content": "z"},
    {"type": "function_call_output", "call_id": "c", "output": "w"},
]
"""Messages of every shape the framing weighs: their estimate is in the fingerprint too."""
_MESSAGE_SEED: Final = 0x6D657373616765
"""Seeds the hash of a message's JSON: a message's key is never a text's (whose JSON it may be)."""
_JSON_ONLY: Final = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)
"""orjson refuses these (no ``default``): what the estimator may weigh otherwise than as JSON."""


def fingerprint(profile: TokenizerProfile, count: Callable[[str], int]) -> bytes:
    """8 bytes naming the estimator: ``profile``, this module's version, ``count``'s estimate
    of a probe text and the framed estimate of probe messages (so a changed estimator does not
    reuse old answers)."""
    framed = estimate_tokens(_PROBE_MESSAGES, model=profile, text=count)
    key = f"{_VERSION}|{profile!r}|{count(_PROBE)}|{framed}"
    return xxhash.xxh3_64_digest(key.encode("utf-8", "surrogatepass"))


class EstimateCache:
    """Estimates of texts by the hash of their bytes, for one estimator (its fingerprint).

    ``sink`` receives the encoded cache when it should be written (every ``SAVE_EVERY`` new
    entries, see :meth:`tick`, and at :meth:`save`); it must not raise.
    """

    __slots__ = ("_added", "_entries", "_fingerprint", "_sink")

    def __init__(
        self,
        fp: bytes,
        entries: dict[bytes, int] | None = None,
        sink: Callable[[bytes], None] | None = None,
    ) -> None:
        self._fingerprint = fp
        self._entries: dict[bytes, int] = entries if entries is not None else {}
        self._sink = sink
        self._added = 0

    def __len__(self) -> int:
        return len(self._entries)

    def tokens(self, text: str, count: Callable[[str], int]) -> int:
        """The estimate of ``text``: remembered for its hash, else ``count(text)`` (kept)."""
        return self._kept(xxhash.xxh3_128_digest(encode_text(text)), count, text)

    def message_tokens(self, message: Any, estimate: Callable[[Any], int]) -> int:
        """The estimate of ``message``: remembered for the hash of its JSON, else
        ``estimate(message)`` (kept); a message that is not plain JSON is not kept."""
        try:
            data = orjson.dumps(message, option=_JSON_ONLY)
        except TypeError:  # orjson.JSONEncodeError: not plain JSON (or nested too deep)
            return estimate(message)
        return self._kept(xxhash.xxh3_128_digest(data, seed=_MESSAGE_SEED), estimate, message)

    def _kept(self, key: bytes, count: Callable[[_T], int], value: _T) -> int:
        """The estimate remembered under ``key``, else ``count(value)``, kept while there is room."""
        n = self._entries.get(key)
        if n is None:
            n = count(value)
            if len(self._entries) < MAX_ENTRIES:
                self._entries[key] = n
                self._added += 1
        return n

    def keep_messages(self, counted: Iterable[tuple[Any, int]]) -> None:
        """Keep the tokens of each (message, tokens) pair of ``counted`` by the hash of the
        message's JSON; ``tokens`` must be the estimate of the message as it is now."""
        entries = self._entries
        for message, n in counted:
            if len(entries) >= MAX_ENTRIES:
                return
            try:
                data = orjson.dumps(message, option=_JSON_ONLY)
            except TypeError:  # not plain JSON: never looked up either
                continue
            key = xxhash.xxh3_128_digest(data, seed=_MESSAGE_SEED)
            if key not in entries:
                entries[key] = n
                self._added += 1

    def tick(self) -> None:
        """End of a request: write the cache when enough estimates were added since the last
        write (a crash then loses at most that many)."""
        if self._added >= SAVE_EVERY:
            self.save()

    def save(self) -> None:
        """Hand the encoded cache to the sink if anything was added since the last write."""
        if self._sink is not None and self._added:
            self._added = 0
            self._sink(self.encode())

    def encode(self) -> bytes:
        """The sidecar's bytes: header, entries, checksum."""
        parts = [_HEAD.pack(_MAGIC, self._fingerprint, len(self._entries))]
        pack = _ENTRY.pack
        parts.extend(pack(key, n) for key, n in self._entries.items())
        body = b"".join(parts)
        return body + _TAIL.pack(xxhash.xxh3_64_intdigest(body))

    @classmethod
    def decode(cls, data: bytes, fp: bytes) -> dict[bytes, int] | None:
        """The entries in ``data`` if it is a whole sidecar for estimator ``fp``, else None."""
        if len(data) < _HEAD.size + _TAIL.size:
            return None
        body, (check,) = data[: -_TAIL.size], _TAIL.unpack(data[-_TAIL.size :])
        if xxhash.xxh3_64_intdigest(body) != check:
            return None
        magic, file_fp, count = _HEAD.unpack_from(body)
        if magic != _MAGIC or file_fp != fp or len(body) != _HEAD.size + count * _ENTRY.size:
            return None
        return dict(_ENTRY.iter_unpack(memoryview(body)[_HEAD.size :]))


def load(
    store: Store, profile: TokenizerProfile, count: Callable[[str], int]
) -> EstimateCache | None:
    """The estimate cache of the session in ``store``: what its sidecar holds when it is valid
    for this estimator (else empty), written back to it as it grows. None for a store without
    a directory (in memory: nothing outlives the process, so nothing is hashed or kept). Never
    raises for the store: a session opens the same without its cache."""
    if not isinstance(store, LocalStore):
        return None
    fp = fingerprint(profile, count)
    log = get_logger("toolbudget")

    def sink(data: bytes) -> None:
        try:
            store.write_sidecar(SIDECAR, data)
        except StoreError as exc:  # a cache write must never fail a request or a close
            log.warning("toolbudget.session.estimates_save_failed", error=str(exc))

    entries: dict[bytes, int] | None = None
    try:
        data = store.read_sidecar(SIDECAR)
    except StoreError as exc:  # unreadable (a planted directory, EIO): estimated again
        log.warning("toolbudget.session.estimates_load_failed", error=str(exc))
        data = None
    if data is not None:
        entries = EstimateCache.decode(data, fp)
        if entries is None:
            log.info(
                "toolbudget.session.estimates_ignored",
                reason="torn, damaged or stale",
                bytes=len(data),
            )
    return EstimateCache(fp, entries, sink)
