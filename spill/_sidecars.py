"""A session directory's sidecars: small files beside the log that their readers validate.

A sidecar (one of ``SIDECAR_NAMES``) is never a decision's dependency: a torn, empty or stale
one costs its reader time, never a wrong copy, so none is fsync'd. Two ways to write one:

- :meth:`Sidecars.replace`: a temp file renamed over the name (the reader sees the old bytes or
  the new ones), under the store's mutex like every other call;
- :meth:`Sidecars.overwrite`: the new bytes written over the old in place, one ``write()``, no
  temp file, rename or fsync, and not under the store's mutex, which a deferred sync holds for
  its fsyncs: ``toolbudget proxy`` keeps each answer's usage this way from its event loop
  (``budget.proxy._pool``), where a rename stalled for ms behind other jobs' disk I/O and the
  mutex for the whole of a request's fsyncs (issue 33). The reader must tell where the data
  ends (bytes shorter than the file's leave its tail) and whether it is whole (a power loss can
  tear a write in place).
"""

from __future__ import annotations

import os
import threading

from spill import _fs
from spill._errors import StoreError
from spill._sessiondir import READ_FLAGS, SIDECAR_NAMES, SessionDir

__all__ = ["Sidecars"]

_OVERWRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK
"""O_NONBLOCK: a FIFO planted under a sidecar's name fails the open (ENXIO), never blocks it."""


class Sidecars:
    """The sidecars of an open session directory (a part of :class:`spill.LocalStore`)."""

    def __init__(self, directory: SessionDir) -> None:
        self._dir = directory
        self._lock = threading.Lock()
        """Held by :meth:`overwrite` and :meth:`close` only: the store's mutex is not taken."""
        self._closed = False

    def read(self, name: str) -> bytes | None:
        """The bytes of sidecar ``name``; None if there is none (under the store's mutex)."""
        _check(name)
        try:
            fd = _fs.open_fd(name, READ_FLAGS, dir_fd=self._dir.dir_fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self._dir.store_error(
                f"open {name}", exc, name=name, parent_fd=self._dir.dir_fd
            ) from exc
        return self._dir.read_regular(fd, name)

    def replace(self, name: str, data: bytes) -> None:
        """Replace sidecar ``name`` by ``data``: a temp file renamed over it, no fsync (under
        the store's mutex)."""
        _check(name, data)
        self._dir.write_atomic(self._dir.dir_fd, name, data, name, sync=False)

    def overwrite(self, name: str, data: bytes) -> None:
        """Write ``data`` over the first bytes of sidecar ``name`` (created if missing), in one
        ``write()``: no temp file, rename or fsync, and not under the store's mutex."""
        _check(name, data)
        with self._lock:
            if self._closed:
                raise StoreError(f"the store for session {self._dir.path} is closed")
            fd = self._dir.open_file(name, _OVERWRITE_FLAGS)
            try:
                _fs.write(fd, data)
            except OSError as exc:
                raise self._dir.store_error(f"write {name}", exc) from exc
            finally:
                self._dir.close_quietly(fd)

    def close(self) -> None:
        """No overwrite after this one returns (the store closes its descriptors next)."""
        with self._lock:
            self._closed = True


def _check(name: str, data: object = b"") -> None:
    if name not in SIDECAR_NAMES:
        raise StoreError(f"{name!r} is not a sidecar name; known: {sorted(SIDECAR_NAMES)}")
    if not isinstance(data, bytes):
        raise StoreError(f"a sidecar is bytes, got {type(data).__name__}")
