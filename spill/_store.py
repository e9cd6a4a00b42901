"""The store protocol and the reference helpers shared by every store.

A *ref* names a spilled body by its content: the 128-bit xxh3 hash of the body's UTF-8 bytes
(lone surrogates kept with ``surrogatepass``), as 32 lowercase hex characters. Refs are the only
thing a model may hand back to the store, so :func:`validate_ref` is the single gate between a
model's text and the filesystem: nothing else is ever turned into a path.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Final, Protocol, Self, TypeAlias, runtime_checkable

import xxhash

from spill._errors import ConfigError, RefError, StoreError
from spill._logger import Events, get_logger

__all__ = [
    "REF_LEN",
    "REF_RE",
    "STORE_METHODS",
    "LogRecord",
    "PutResult",
    "Store",
    "StoreBase",
    "check_quota",
    "check_seconds",
    "encode_text",
    "events",
    "is_store",
    "ref_for",
    "validate_ref",
]

REF_LEN: Final = 32
# \A and \Z rather than ^ and $: "$" would also match before a trailing newline.
REF_RE: Final = re.compile(r"\A[0-9a-f]{32}\Z")

LogRecord: TypeAlias = dict[str, Any]
"""One decision record as the caller appended it (JSON-serializable, without ``v``/``crc``)."""

PutResult: TypeAlias = str | StoreError
"""What :meth:`Store.put_many` gives for one body: its ref once durable, or why it was not stored."""

_MAX_SHOWN_CHARS = 5
_SCANNED_PREFIX = 256


def events() -> Events:
    """toolbudget's event emitter, for spill's events (``toolbudget.spill.*``, ``toolbudget.gc.*``,
    ``toolbudget.log.*``): each goes to the stdlib logger of its area (see spill._logger)."""
    return get_logger()


def encode_text(text: str) -> bytes:
    """The bytes a body is stored and hashed as (UTF-8, lone surrogates kept)."""
    return text.encode("utf-8", "surrogatepass")


def ref_for(text: str) -> str:
    """Return the ref of ``text``: xxh3-128 of its UTF-8 (surrogatepass) bytes, 32 hex chars."""
    if not isinstance(text, str):
        raise StoreError(f"ref_for takes a str body, got {type(text).__name__}")
    return xxhash.xxh3_128_hexdigest(encode_text(text))


def check_quota(quota_bytes: object) -> None:
    """Raise ConfigError unless ``quota_bytes`` is None or a non-negative int."""
    if quota_bytes is None:
        return
    if isinstance(quota_bytes, bool) or not isinstance(quota_bytes, int) or quota_bytes < 0:
        raise ConfigError(f"quota_bytes must be a non-negative int or None, got {quota_bytes!r}")


def check_seconds(value: object, name: str) -> float:
    """``value`` as a float of seconds >= 0; ConfigError unless it is such a number (not a bool).

    An int past the largest float (``10**400``) is more seconds than any float holds: it is
    infinity, as ``float("inf")`` is accepted here, where ``float()`` alone raised OverflowError.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{name} must be a number of seconds, got {value!r:.80}")
    if not value >= 0:
        raise ConfigError(f"{name} must be >= 0 seconds, got {value!r:.80}")
    try:
        return float(value)
    except OverflowError:
        return math.inf


def validate_ref(ref: object) -> str:
    """Return ``ref`` if it is exactly 32 lowercase hex characters, else raise :class:`RefError`.

    The message names what is wrong (type, length, offending characters) but never repeats the
    value itself: it came from a model and may be long, a path, or hold control characters.
    """
    if not isinstance(ref, str):
        raise RefError(
            f"ref must be a string of {REF_LEN} lowercase hex characters, got {type(ref).__name__}"
        )
    # A str subclass could answer str() or slicing with another value than the one checked:
    # check and return an exact copy of its characters instead.
    ref = str.__str__(ref)
    if REF_RE.match(ref):
        return ref
    problems: list[str] = []
    if len(ref) != REF_LEN:
        problems.append(f"it has {len(ref)} characters, expected {REF_LEN}")
    bad = sorted({c for c in ref[:_SCANNED_PREFIX] if c not in "0123456789abcdef"})
    if bad:
        shown = ", ".join(ascii(c) for c in bad[:_MAX_SHOWN_CHARS])
        more = f" and {len(bad) - _MAX_SHOWN_CHARS} more" if len(bad) > _MAX_SHOWN_CHARS else ""
        hint = " (uppercase hex is not accepted)" if any(c in "ABCDEF" for c in bad) else ""
        problems.append(f"it contains characters outside [0-9a-f]: {shown}{more}{hint}")
    if not problems:  # pragma: no cover - the regex and the checks above describe the same set
        problems.append("it does not match [0-9a-f]{32}")
    raise RefError(f"invalid ref: {'; '.join(problems)}")


@runtime_checkable
class Store(Protocol):
    """A session store: bodies by content hash, an append-only decision log, small metadata.

    Every failure is a :class:`budget.StoreError` (or a subclass); no raw ``OSError`` escapes.
    """

    def put(self, text: str) -> str:
        """Store ``text`` once by content hash and return its ref; durable before returning."""
        ...

    def put_many(self, texts: Sequence[str]) -> list[PutResult]:
        """Store several bodies as one group; for each, its ref or the StoreError it met.

        Every returned ref is durable before the call returns, as after :meth:`put`; a body
        that fails (quota, disk) does not stop the others. Raises StoreError for the whole call
        only when nothing can be tried (a closed store, a text that is not a str).
        """
        ...

    def get(self, ref: str) -> str:
        """Return the exact text stored under ``ref``; RefError if invalid or unknown."""
        ...

    def has(self, ref: str) -> bool:
        """Whether a body is stored under ``ref`` (RefError if ``ref`` is malformed)."""
        ...

    def path_of(self, ref: str) -> str | None:
        """Where the body of ``ref`` is (or will be, once put), for agents with file tools.

        None for a store without files. Touches nothing: envelopes are computed before the body
        is written.
        """
        ...

    def append_log(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Append decision records to the log and flush them before returning."""
        ...

    def read_log(self) -> list[LogRecord]:
        """Every valid record in order; damaged, unknown-version or duplicate lines skipped."""
        ...

    def read_meta(self) -> dict[str, Any]:
        """The session metadata (``{}`` if none was written)."""
        ...

    def write_meta(self, meta: Mapping[str, Any]) -> None:
        """Replace the session metadata atomically."""
        ...

    def close(self) -> None:
        """Release the session; idempotent."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


STORE_METHODS: Final = (
    "put",
    "put_many",
    "get",
    "has",
    "path_of",
    "append_log",
    "read_log",
    "read_meta",
    "write_meta",
    "close",
    "__enter__",
    "__exit__",
)
"""The methods of :class:`Store`, which :func:`is_store` looks for."""


def is_store(obj: object) -> bool:
    """Whether ``obj`` has every :class:`Store` method, each looked up as a call to it would be.

    Not ``isinstance(obj, Store)``: from Python 3.12 a runtime protocol check looks attributes up
    with ``inspect.getattr_static``, which never runs ``__getattr__``, so a wrapper that delegates
    to a store through it (logging, metrics) would be a store on 3.11 and not on 3.12 and later.
    """
    return all(callable(getattr(obj, name, None)) for name in STORE_METHODS)


class StoreBase:
    """What every store shares: a store is its own context manager, closed on exit.

    A store implements the :class:`Store` methods; this base gives it ``with`` once, as httpx's
    ``BaseTransport`` gives its transports theirs.
    """

    defers_sync: bool = False
    """Whether puts and appends are durable only at a later sync (``LocalStore(defer_sync=True)``):
    a power cut may then take the bodies of the last logged decisions. Every other store makes a
    body durable before :meth:`Store.put` returns (``budget.session._bodies.restore_missing``)."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
