"""MemoryStore: the store contract held in memory, for tests and throwaway sessions.

The log keeps the exact bytes a LocalStore would write and reads them back through the same
decoder, so both stores accept and refuse the same records and return fresh copies.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
import xxhash

from spill._errors import QuotaExceeded, RefError, StoreError
from spill._log import decode_log, encode_records
from spill._store import LogRecord, PutResult, StoreBase, check_quota, encode_text, validate_ref

__all__ = ["MemoryStore"]


class MemoryStore(StoreBase):
    """The store contract without files: no lock, no durability, ``path_of`` is None.

    Args:
        quota_bytes: the most bytes (UTF-8) of bodies the store may hold (None: no limit).
    """

    def __init__(self, *, quota_bytes: int | None = None) -> None:
        check_quota(quota_bytes)
        self._quota = quota_bytes
        self._bodies: dict[str, str] = {}
        self._total = 0
        self._log = bytearray()
        self._meta = b"{}"
        self._closed = False
        self._mutex = threading.Lock()

    @property
    def bodies_bytes(self) -> int:
        """Total UTF-8 size of the stored bodies, as counted against the quota."""
        return self._total

    def put(self, text: str) -> str:
        """Store ``text`` once by content hash and return its ref."""
        if not isinstance(text, str):
            raise StoreError(f"put takes a str body, got {type(text).__name__}")
        with self._mutex:
            self._check_open()
            return self._store(text)

    def put_many(self, texts: Sequence[str]) -> list[PutResult]:
        """Store each text in turn (nothing to sync); one that fails does not stop the rest."""
        if isinstance(texts, str | bytes) or not isinstance(texts, Sequence):
            raise StoreError(f"put_many takes a sequence of str bodies, got {type(texts).__name__}")
        for text in texts:
            if not isinstance(text, str):
                raise StoreError(f"put_many takes str bodies, got {type(text).__name__}")
        out: list[PutResult] = []
        with self._mutex:
            self._check_open()
            for text in texts:
                try:
                    out.append(self._store(text))
                except StoreError as exc:
                    out.append(exc)
        return out

    def _store(self, text: str) -> str:
        data = encode_text(text)
        ref, size = xxhash.xxh3_128_hexdigest(data), len(data)
        if ref in self._bodies:
            return ref
        new_total = self._total + size
        if self._quota is not None and new_total > self._quota:
            raise QuotaExceeded(
                f"storing a body of {size} bytes would bring the in-memory session to "
                f"{new_total} bytes of bodies, above its quota of {self._quota} bytes"
            )
        self._bodies[ref] = text
        self._total = new_total
        return ref

    def get(self, ref: str) -> str:
        """Return the exact text stored under ``ref``."""
        ref = validate_ref(ref)
        with self._mutex:
            self._check_open()
            try:
                return self._bodies[ref]
            except KeyError:
                raise RefError(f"no body is stored for ref {ref} in this session") from None

    def has(self, ref: str) -> bool:
        """Whether a body is stored under ``ref``; RefError if ``ref`` is malformed."""
        ref = validate_ref(ref)
        with self._mutex:
            self._check_open()
            return ref in self._bodies

    def path_of(self, ref: str) -> None:
        """Always None (no files), after checking that ``ref`` is well formed."""
        validate_ref(ref)

    def append_log(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Append ``records`` to the in-memory log."""
        payload = encode_records(records)
        with self._mutex:
            self._check_open()
            self._log += payload

    def read_log(self) -> list[LogRecord]:
        """Every valid record in order, as fresh copies."""
        with self._mutex:
            self._check_open()
            data = bytes(self._log)
        return decode_log(data, source="<memory>")

    def read_meta(self) -> dict[str, Any]:
        """A fresh copy of the session metadata (``{}`` if none was written)."""
        with self._mutex:
            self._check_open()
            meta: dict[str, Any] = orjson.loads(self._meta)
        return meta

    def write_meta(self, meta: Mapping[str, Any]) -> None:
        """Replace the session metadata."""
        if not isinstance(meta, Mapping):
            raise StoreError(f"session metadata must be a mapping, got {type(meta).__name__}")
        try:
            data = orjson.dumps(dict(meta), option=orjson.OPT_SORT_KEYS)
        except TypeError as exc:
            raise StoreError(f"session metadata is not JSON-serializable: {exc}") from exc
        with self._mutex:
            self._check_open()
            self._meta = data

    def close(self) -> None:
        """Mark the store closed; idempotent."""
        with self._mutex:
            self._closed = True

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"MemoryStore({len(self._bodies)} bodies, {state})"

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the in-memory store is closed")
