"""An fsspec session's local read-through cache of bodies, by ref.

Content-addressed like the bodies, so it never goes stale: a damaged entry is detected by its
hash and fetched again, and a cache that cannot be written only costs a fetch later.

One ``cache_dir`` may serve several sessions (the documented way to keep the cache across
processes), so an entry says only what a ref's text is, never that this session holds it: the
refs this store has put or fetched are kept (:meth:`ReadCache.held`), and a cached ref outside it is
answered only once the session is asked for the object (one HEAD, no body sent). Before issue
31 a session answered another session's ref from the shared cache.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import tempfile

import xxhash

from spill._objfs import BODY_SUFFIX
from spill._store import events


class ReadCache:
    """The read-through cache of :class:`spill.FsspecStore`, and the refs its session holds.

    A part of the store, called under its mutex; ``path`` is the cache's directory (created
    0700), a private temporary one removed by :meth:`remove` when none is given.
    """

    def __init__(self, url: str, cache_dir: str | os.PathLike[str] | None) -> None:
        self._url = url
        self._own = cache_dir is None
        self.path = (
            tempfile.mkdtemp(prefix="toolbudget-cache-")
            if cache_dir is None
            else os.path.abspath(os.fspath(cache_dir))
        )
        os.makedirs(self.path, mode=0o700, exist_ok=True)
        self._present: set[str] = set()
        """Refs this store stored or fetched from its session: held by the session."""

    def held(self, ref: str) -> bool:
        """Whether this store stored or fetched ``ref`` from its session."""
        return ref in self._present

    def hold(self, ref: str) -> None:
        """The session holds ``ref`` (asked of it): answered from the cache from now on."""
        self._present.add(ref)

    def remove(self) -> None:
        """Remove the cache directory if it is the store's own (a temporary one)."""
        if self._own:
            shutil.rmtree(self.path, ignore_errors=True)

    def _path_of(self, ref: str) -> str:
        return os.path.join(self.path, ref + BODY_SUFFIX)

    def get(self, ref: str) -> bytes | None:
        """The cached text of ``ref`` (its hash checked), None if none or damaged."""
        try:
            with open(self._path_of(ref), "rb") as f:
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
        self._present.add(ref)
        path = self._path_of(ref)
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
