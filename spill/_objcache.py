"""An fsspec session's local read-through cache of bodies, by ref.

Content-addressed like the bodies, so it never goes stale: a damaged entry is detected by its
hash and fetched again, and a cache that cannot be written only costs a fetch later.
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
