"""A session opened for reading only: no lock, nothing created or changed.

``toolbudget read`` uses it to print a stored body beside a live session (which holds the
exclusive lock) and on a directory it must not turn into a session. Bodies are immutable once
renamed into place, so reading one needs no lock. Every name is opened relative to the session
directory's descriptor with ``O_NOFOLLOW``, as in :class:`spill.LocalStore`. A session on object
storage (an fsspec URL, as ``Budget.open`` takes) is read through :class:`spill.FsspecStore`,
whose every write is refused here (:class:`ReadOnlyObjects`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, Final

from spill import _fs
from spill._errors import RefError, StoreError
from spill._fsspec import FsspecStore
from spill._log import decode_log
from spill._objfs import local_dir
from spill._packs import PackIndex, file_or_packed, read_copies
from spill._sessiondir import BODIES_NAME, BODY_SUFFIX, LOG_NAME, META_NAME, decode_meta
from spill._store import LogRecord, PutResult, StoreBase, validate_ref

__all__ = ["ReadOnlyObjects", "ReadOnlyStore", "open_read_only"]

_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY
_READ_FLAGS: Final = os.O_RDONLY | os.O_NONBLOCK  # a FIFO planted as a body must not block us


class ReadOnlyStore(StoreBase):
    """A session directory read without its lock; every write is a StoreError.

    Raises StoreError at once if ``path`` is not a directory holding a session (its decision
    log), naming what is missing.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        raw = os.fspath(path) if isinstance(path, str | os.PathLike) else None
        if not isinstance(raw, str) or not raw or "\0" in raw:
            got = repr(raw) if isinstance(raw, str) else type(path).__name__
            raise StoreError(f"session path must be a non-empty str path, got {got}")
        self._path = os.path.abspath(raw)
        try:
            self._dir_fd = _fs.open_fd(self._path, _DIR_FLAGS)
        except OSError as exc:
            raise StoreError(
                f"cannot open session directory {self._path}: {exc.strerror or exc}"
            ) from None
        try:
            st = _fs.stat(LOG_NAME, dir_fd=self._dir_fd)
        except OSError:
            st = None
        if st is None or not stat.S_ISREG(st.st_mode):
            _fs.close(self._dir_fd)
            raise StoreError(
                f"{self._path} is not a toolbudget session directory (it has no {LOG_NAME})"
            )
        self._packs = PackIndex()

    def _read_packed(self, ref: str) -> tuple[bytes, str] | None:
        """The packed bytes of ``ref`` and their pack's name, None if no pack holds it; the live
        session may have written a pack since we last looked, so a miss lists ``bodies/`` again."""
        dir_fd = self._open_dir()
        try:
            bodies_fd = _fs.open_fd(BODIES_NAME, _DIR_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError(
                f"cannot open {BODIES_NAME} in session {self._path}: {exc.strerror or exc}"
            ) from None
        try:
            if self._packs.get(ref) is None:
                self._packs.load(bodies_fd, self._path)
            copies = self._packs.copies(ref)
            return read_copies(bodies_fd, copies, ref) if copies else None
        except (OSError, ValueError) as exc:
            raise StoreError(f"cannot read body {ref} in session {self._path}: {exc}") from None
        finally:
            _fs.close(bodies_fd)

    @property
    def path(self) -> str:
        """The session directory (absolute)."""
        return self._path

    def _open_dir(self) -> int:
        """The session directory's descriptor; after close, a StoreError saying so (else EBADF)."""
        if self._dir_fd < 0:
            raise StoreError(f"the reader of session {self._path} is closed")
        return self._dir_fd

    def _read(self, parts: Sequence[str], what: str) -> bytes:
        """The bytes of the regular file at ``parts`` below the session; FileNotFoundError."""
        fds: list[int] = []
        parent = self._open_dir()
        try:
            for name in parts[:-1]:
                parent = _fs.open_fd(name, _DIR_FLAGS, dir_fd=parent)
                fds.append(parent)
            fd = _fs.open_fd(parts[-1], _READ_FLAGS, dir_fd=parent)
            fds.append(fd)
            if not stat.S_ISREG(_fs.stat(fd).st_mode):
                raise StoreError(f"{what} in session {self._path} is not a regular file")
            return _fs.read(fd)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise StoreError(
                f"cannot read {what} in session {self._path}: {exc.strerror or exc}"
            ) from None
        finally:
            for fd in fds:
                _fs.close(fd)

    def get(self, ref: str) -> str:
        """The exact text stored under ``ref``, after checking its content hash."""
        ref = validate_ref(ref)
        rel = f"{BODIES_NAME}/{ref[:2]}/{ref}{BODY_SUFFIX}"
        refused: StoreError | None = None
        try:
            data: bytes | None = self._read((BODIES_NAME, ref[:2], ref + BODY_SUFFIX), rel)
        except FileNotFoundError:
            data = None
        except StoreError as exc:  # something planted where the file goes: a pack may hold it
            data, refused = None, exc
        data = file_or_packed(
            ref, data, refused, partial(self._read_packed, ref), what=rel, session=self._path
        )
        return data.decode("utf-8", "surrogatepass")

    def has(self, ref: str) -> bool:
        """Whether a body is stored under ``ref`` (RefError if ``ref`` is malformed)."""
        ref = validate_ref(ref)
        try:
            self.get(ref)
        except RefError:
            return False
        return True

    def path_of(self, ref: str) -> str:
        """Where the body of ``ref`` is or would be as a file of its own (no file access; a
        packed body has no file of its own)."""
        ref = validate_ref(ref)
        return os.path.join(self._path, BODIES_NAME, ref[:2], ref + BODY_SUFFIX)

    def read_log(self) -> list[LogRecord]:
        """Every valid log record in order."""
        try:
            data = self._read((LOG_NAME,), LOG_NAME)
        except FileNotFoundError:
            return []
        return decode_log(data, source=os.path.join(self._path, LOG_NAME))

    def read_meta(self) -> dict[str, Any]:
        """The session metadata; ``{}`` if none was written."""
        try:
            data = self._read((META_NAME,), META_NAME)
        except FileNotFoundError:
            return {}
        return decode_meta(data, self._path)

    def _refuse(self, what: str) -> StoreError:
        return StoreError(f"session {self._path} is open read-only: cannot {what}")

    def put(self, text: str) -> str:
        """Refused: the store is read-only."""
        raise self._refuse("store a body")

    def put_many(self, texts: Sequence[str]) -> list[PutResult]:
        """Refused: the store is read-only."""
        raise self._refuse("store bodies")

    def append_log(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Refused: the store is read-only."""
        raise self._refuse("append to the log")

    def write_meta(self, meta: Mapping[str, Any]) -> None:
        """Refused: the store is read-only."""
        raise self._refuse("write the metadata")

    def close(self) -> None:
        """Release the directory's descriptor; idempotent."""
        fd, self._dir_fd = self._dir_fd, -1
        if fd >= 0:
            _fs.close(fd)


class ReadOnlyObjects(StoreBase):
    """A session at an fsspec URL read without writing: its bodies, log and metadata.

    Raises StoreError at once if nothing at ``url`` is a session (no log object, no metadata).
    Bodies fetched are cached in a private temporary directory, removed on close.
    """

    def __init__(self, url: str) -> None:
        # FsspecStore makes a local session's missing directory (0700): reading makes none.
        root = local_dir(url)
        if root is not None and not os.path.isdir(root):
            raise StoreError(f"{url} is not a toolbudget session (no directory at {root})")
        self._objects = FsspecStore(url)  # opening lists the log and writes nothing
        if not self._objects.read_meta() and not self._objects.read_log():
            self._objects.close()
            raise StoreError(f"{url} is not a toolbudget session (it has no log objects)")

    @property
    def path(self) -> str:
        """The session's URL."""
        return self._objects.url

    def get(self, ref: str) -> str:
        """The exact text stored under ``ref``, after checking its content hash."""
        return self._objects.get(ref)

    def has(self, ref: str) -> bool:
        """Whether a body is stored under ``ref`` (RefError if ``ref`` is malformed)."""
        return self._objects.has(ref)

    def path_of(self, ref: str) -> None:
        """None: the bodies are objects, not local files (after checking ``ref``)."""
        self._objects.path_of(ref)

    def read_log(self) -> list[LogRecord]:
        """Every valid log record in order."""
        return self._objects.read_log()

    def read_meta(self) -> dict[str, Any]:
        """The session metadata; ``{}`` if none was written."""
        return self._objects.read_meta()

    def _refuse(self, what: str) -> StoreError:
        return StoreError(f"session {self.path} is open read-only: cannot {what}")

    def put(self, text: str) -> str:
        """Refused: the store is read-only."""
        raise self._refuse("store a body")

    def put_many(self, texts: Sequence[str]) -> list[PutResult]:
        """Refused: the store is read-only."""
        raise self._refuse("store bodies")

    def append_log(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Refused: the store is read-only."""
        raise self._refuse("append to the log")

    def write_meta(self, meta: Mapping[str, Any]) -> None:
        """Refused: the store is read-only."""
        raise self._refuse("write the metadata")

    def close(self) -> None:
        """Remove the local cache of fetched bodies; idempotent."""
        self._objects.close()


def open_read_only(path: str | os.PathLike[str]) -> ReadOnlyStore | ReadOnlyObjects:
    """The session at ``path`` opened read-only: an fsspec URL (``s3://bucket/sessions/abc``)
    as ``Budget.open`` takes one, else a session directory."""
    if isinstance(path, str) and "://" in path:
        return ReadOnlyObjects(path)
    return ReadOnlyStore(path)
