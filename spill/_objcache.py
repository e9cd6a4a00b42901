"""An fsspec session's local read-through cache of bodies, by ref.

Content-addressed like the bodies, so it never goes stale: a damaged entry is detected by its
hash and fetched again, and a cache that cannot be written only costs a fetch later.
"""

from __future__ import annotations

import contextlib
import os
import secrets

import xxhash

from spill._objfs import BODY_SUFFIX
from spill._store import events


class ReadCache:
    """The cache of :class:`spill.FsspecStore`: bodies by ref in one local directory."""

    def __init__(self, directory: str, url: str) -> None:
        self._cache, self._url = directory, url

    def _cache_path(self, ref: str) -> str:
        return os.path.join(self._cache, ref + BODY_SUFFIX)

    def get(self, ref: str) -> bytes | None:
        try:
            with open(self._cache_path(ref), "rb") as f:
                data = f.read()
        except OSError:
            return None
        if xxhash.xxh3_128_hexdigest(data) != ref:
            events().warning("toolbudget.spill.cache_corrupt", path=self._url, ref=ref)
            return None
        return data

    def put(self, ref: str, data: bytes, *, replace: bool = False) -> None:
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
