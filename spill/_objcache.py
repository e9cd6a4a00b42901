"""An fsspec session's local read-through cache of bodies, by ref.

Content-addressed like the bodies, so it never goes stale: a damaged entry is detected by its
hash and fetched again, and a cache that cannot be written only costs a fetch later.

One ``cache_dir`` may serve several sessions (the documented way to keep the cache across
processes), so an entry says only what a ref's text is, never that this session holds it: the
refs this store has put or fetched are kept in ``_present``, and a cached ref outside it is
answered only once the session is asked for the object (one HEAD, no body sent). Before issue
31 a session answered another session's ref from the shared cache.
"""

from __future__ import annotations

import contextlib
import os
import secrets

import xxhash

from spill._objfs import BODY_SUFFIX, ObjectSession
from spill._store import events


class ReadCache(ObjectSession):
    """The cache layer of :class:`spill.FsspecStore`: ``_cache`` is its directory."""

    _cache: str
    _present: set[str]
    """Refs this store stored or fetched from its session: held by the session."""

    def _cache_path(self, ref: str) -> str:
        return os.path.join(self._cache, ref + BODY_SUFFIX)

    def _cache_get(self, ref: str) -> bytes | None:
        try:
            with open(self._cache_path(ref), "rb") as f:
                data = f.read()
        except OSError:
            return None
        if xxhash.xxh3_128_hexdigest(data) != ref:
            events().warning("toolbudget.spill.cache_corrupt", path=self._url, ref=ref)
            return None
        return data

    def _cache_put(self, ref: str, data: bytes, *, replace: bool = False) -> None:
        """Best effort: a cache that cannot be written only costs a fetch later.

        ``replace``: after a fetch, which happens only when the entry is absent or damaged.
        """
        self._present.add(ref)
        path = self._cache_path(ref)
        if not replace and os.path.exists(path):
            return
        tmp = f"{path}.tmp-{secrets.token_hex(6)}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except OSError as exc:
            events().warning(
                "toolbudget.spill.cache_write_failed", path=self._url, ref=ref, error=str(exc)
            )
            with contextlib.suppress(OSError):
                os.unlink(tmp)
