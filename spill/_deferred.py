"""fsyncs put off: a store that defers them (``LocalStore(defer_sync=True)``) writes and renames
at once, so a killed process loses nothing the kernel holds, and makes it durable later.

Each fsync a put would have made (the body's file, then its directory's entries) is kept as a
duplicate descriptor, in the order put would have made them, and :meth:`Deferred.run` makes them
in that order; the store fsyncs its log only after them, so once a sync is done every body a
logged decision points to is as durable as the decision. Bounded: past ``MAX_PENDING``
descriptors (or if one cannot be duplicated) the fsync is made at once, as without deferring.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Final

from spill import _fs

__all__ = ["MAX_PENDING", "Deferred", "fsync"]

MAX_PENDING: Final = 256
"""Descriptors kept at most: a request spills a few bodies (each a file and a directory); a
caller that never syncs must not run the process out of descriptors."""


class Deferred:
    """The fsyncs a store's puts left to its next sync, as descriptors, in order."""

    def __init__(self) -> None:
        self._fds: list[int] = []

    def __len__(self) -> int:
        return len(self._fds)

    def add(self, fd: int) -> bool:
        """Keep ``fd``'s fsync for :meth:`run`; False if the caller must fsync it now (full, or
        no descriptor left to duplicate it with). Safe from a group commit's threads."""
        if len(self._fds) >= MAX_PENDING:
            return False
        try:
            self._fds.append(_fs.dup(fd))
        except OSError:
            return False
        return True

    def run(self) -> None:
        """Make the kept fsyncs, in order; an OSError leaves the failed one and those after it
        for the next run."""
        while self._fds:
            fd = self._fds[0]
            _fs.fsync(fd)
            del self._fds[0]
            self._close(fd)

    def close(self) -> None:
        """Drop what is left without syncing it (the store is closing after a failed sync, or
        was never closed)."""
        fds, self._fds = self._fds, []
        for fd in fds:
            self._close(fd)

    @staticmethod
    def _close(fd: int) -> None:
        # The kernel frees the descriptor whatever close reports, and its fsync is done or moot.
        with suppress(OSError):
            _fs.close(fd)


def fsync(fd: int, deferred: Deferred | None) -> None:
    """fsync ``fd`` now, or at ``deferred``'s run (the session directory's own fsyncs, for its
    metadata, are never put off: its callers pass None)."""
    if deferred is None or not deferred.add(fd):
        _fs.fsync(fd)
