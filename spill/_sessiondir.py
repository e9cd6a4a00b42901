"""The session directory a LocalStore holds open: its names, its descriptors, its lock.

Every path below the session directory is a single name opened relative to a directory
descriptor with ``O_NOFOLLOW``, and the only names ever built are fixed ones and those derived
from a validated ref: a symlink anywhere inside the session is refused, never followed. Bodies
and the metadata are written to a ``.tmp-*`` file, fsync'd and renamed into place
(:meth:`SessionDir.write_atomic`). The layout is in ``spill._local``'s docstring.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import time
from collections.abc import Mapping
from typing import Any, Final

import orjson

from spill import _fs
from spill._deferred import Deferred, fsync
from spill._errors import RefError, SessionLocked, StoreError
from spill._store import events

__all__ = [
    "BODIES_NAME",
    "BODY_SUFFIX",
    "LOCK_NAME",
    "LOG_NAME",
    "META_NAME",
    "SIDECAR_NAMES",
    "TMP_PREFIX",
    "SessionDir",
    "decode_meta",
]

LOCK_NAME: Final = "lock"
META_NAME: Final = "session.json"
LOG_NAME: Final = "decisions.jsonl"
BODIES_NAME: Final = "bodies"
TMP_PREFIX: Final = ".tmp-"
BODY_SUFFIX: Final = ".txt"
SIDECAR_NAMES: Final = frozenset({"estimates.bin", "proxy_usage.json"})
"""The only names :meth:`LocalStore.write_sidecar` and ``overwrite_sidecar`` write, each checked
by its reader, so a torn or stale one costs time only: caches derived from the history
(``budget.tokens._estimates_cache``) and the usage the last response reported, kept by
``toolbudget proxy`` for the session's next request (``budget.proxy._pool``; a torn one is read
as no usage)."""

DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY
READ_FLAGS: Final = os.O_RDONLY | os.O_NONBLOCK  # a FIFO planted as a body must not block us
_OPEN_ATTEMPTS: Final = 3
_LOCK_POLL_S: Final = 0.02


class SessionDir:
    """The open session directory: descriptors, the lock, and the single-name file operations.

    A part of :class:`spill.LocalStore` (which serializes the calls under its mutex and knows
    whether it is closed); :class:`spill._bodies.Bodies` writes and reads through it.
    """

    def __init__(self, path: str, fsync: bool) -> None:
        self.path = path
        self.fsync = fsync
        self.dir_fd = -1
        self.lock_fd = -1
        self.bodies_fd = -1
        self.log_fd = -1
        self.deferred: Deferred | None = None  # bodies' fsyncs put off (spill._deferred)
        # Whether every shard's entry in bodies/ is known durable: not yet on open (a process
        # killed between a mkdir and its fsync leaves an entry that only the kernel holds).
        self._bodies_synced = False

    # -- opening --------------------------------------------------------------------------

    def open(self, lock_timeout: float) -> None:
        for _ in range(_OPEN_ATTEMPTS):
            created = self._ensure_session_dir()
            self.dir_fd = self.open_dir(self.path, None, self.path)
            self.lock_fd = self.open_file(LOCK_NAME, os.O_RDWR | os.O_CREAT)
            self._acquire_lock(lock_timeout)
            if self._still_in_place():
                break
            # gc removed the directory between our open and our lock: start again.
            self.close_fds()
        else:
            raise StoreError(f"session directory {self.path} kept being replaced while opening")
        try:
            mode = _fs.stat(self.dir_fd).st_mode
            _fs.truncate(self.lock_fd, 0)
            _fs.write(self.lock_fd, f"{os.getpid()}\n".encode())
        except OSError as exc:
            raise self.store_error(f"write {LOCK_NAME}", exc) from exc
        if not created and mode & 0o077:
            events().warning(
                "toolbudget.spill.permissive_mode", path=self.path, mode=oct(mode & 0o777)
            )
        self.bodies_fd = self.open_subdir(self.dir_fd, BODIES_NAME, BODIES_NAME)
        self.clean_temps(self.dir_fd, "")
        self.log_fd = self.open_file(LOG_NAME, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        if self.lstat(self.dir_fd, META_NAME, META_NAME) is None:
            self.write_atomic(self.dir_fd, META_NAME, encode_meta({}), META_NAME)
        elif self.fsync:
            self.fsync_dir(self.dir_fd, "the session directory")

    def _ensure_session_dir(self) -> bool:
        """Create the session directory and missing parents; True if the session dir was new."""
        missing: list[str] = []
        probe = self.path
        while True:
            try:
                st = _fs.stat(probe)
            except FileNotFoundError:
                missing.append(probe)
                parent = os.path.dirname(probe)
                if parent == probe:
                    raise StoreError(f"cannot create session directory {self.path}") from None
                probe = parent
                continue
            except OSError as exc:
                raise self.store_error(f"inspect {probe}", exc) from exc
            if probe == self.path:
                if stat.S_ISLNK(st.st_mode):
                    raise StoreError(
                        f"session directory {self.path} is a symbolic link; refusing to follow it"
                    )
                if not stat.S_ISDIR(st.st_mode):
                    raise StoreError(f"session path {self.path} exists and is not a directory")
            break
        for directory in reversed(missing):
            try:
                _fs.mkdir(directory, 0o700)
            except FileExistsError:
                continue
            except OSError as exc:
                raise self.store_error(f"create directory {directory}", exc) from exc
        return bool(missing)

    def _acquire_lock(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                _fs.lock(self.lock_fd)
                return
            except BlockingIOError:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                time.sleep(min(_LOCK_POLL_S, remaining))
            except OSError as exc:
                raise self.store_error(f"lock {LOCK_NAME}", exc) from exc
        try:
            holder = _fs.read(self.lock_fd, 0, 32).decode("ascii", "replace").strip()
        except OSError:
            holder = ""
        raise SessionLocked.held(self.path, holder, timeout)

    def _still_in_place(self) -> bool:
        """Whether the locked file and directory are still the ones at our path."""
        try:
            here = _fs.stat(self.path)
            lock_here = _fs.stat(LOCK_NAME, dir_fd=self.dir_fd)
            mine = _fs.stat(self.dir_fd)
            mine_lock = _fs.stat(self.lock_fd)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise self.store_error("check the session directory", exc) from exc
        return (here.st_dev, here.st_ino) == (mine.st_dev, mine.st_ino) and (
            lock_here.st_dev,
            lock_here.st_ino,
        ) == (mine_lock.st_dev, mine_lock.st_ino)

    def clean_temps(self, dir_fd: int, rel: str) -> list[str]:
        """The names in directory ``rel``, less the temp files a crash left there (removed)."""
        try:
            names = _fs.listdir(dir_fd)
        except OSError as exc:
            raise self.store_error(f"list {rel or 'the session directory'}", exc) from exc
        kept = []
        for name in names:
            if name.startswith(TMP_PREFIX):
                self.discard(dir_fd, name)
            else:
                kept.append(name)
        return kept

    # -- helpers --------------------------------------------------------------------------

    def body_rel(self, ref: str) -> str:
        return f"{BODIES_NAME}/{ref[:2]}/{ref}{BODY_SUFFIX}"

    def open_dir(self, path: str, dir_fd: int | None, what: str) -> int:
        try:
            return _fs.open_fd(path, DIR_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            raise self.store_error(f"open {what}", exc, name=path, parent_fd=dir_fd) from exc

    def open_subdir(self, parent_fd: int, name: str, what: str, *, sync: bool = True) -> int:
        """Open (creating if missing) a directory ``name`` inside ``parent_fd``.

        ``sync=False`` leaves the fsync of ``parent_fd`` after a mkdir to the caller.
        """
        try:
            return _fs.open_fd(name, DIR_FLAGS, dir_fd=parent_fd)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise self.store_error(f"open {what}", exc, name=name, parent_fd=parent_fd) from exc
        try:
            _fs.mkdir(name, 0o700, dir_fd=parent_fd)
        except FileExistsError:
            pass
        except OSError as exc:
            raise self.store_error(f"create {what}", exc) from exc
        fd = self.open_dir(name, parent_fd, what)
        if self.fsync and sync:
            try:
                _fs.fsync(parent_fd)
            except OSError as exc:
                self.close_quietly(fd)
                raise self.store_error(f"fsync the directory holding {what}", exc) from exc
        return fd

    def open_shard(self, shard: str, *, create: bool) -> int | None:
        what = f"{BODIES_NAME}/{shard}"
        if create:
            # bodies/ is fsync'd once the body is (see _sync_bodies): on a journaling
            # filesystem the body's own fsync has made the new entry durable by then.
            self._bodies_synced = False
            return self.open_subdir(self.bodies_fd, shard, what, sync=False)
        try:
            return _fs.open_fd(shard, DIR_FLAGS, dir_fd=self.bodies_fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self.store_error(
                f"open {what}", exc, name=shard, parent_fd=self.bodies_fd
            ) from exc

    def open_file(self, name: str, flags: int) -> int:
        try:
            fd = _fs.open_fd(name, flags, 0o600, dir_fd=self.dir_fd)
        except OSError as exc:
            raise self.store_error(f"open {name}", exc, name=name, parent_fd=self.dir_fd) from exc
        try:
            if not stat.S_ISREG(_fs.stat(fd).st_mode):
                raise StoreError(f"{name} in session {self.path} is not a regular file")
        except OSError as exc:
            self.close_quietly(fd)
            raise self.store_error(f"inspect {name}", exc) from exc
        except StoreError:
            self.close_quietly(fd)
            raise
        return fd

    def lstat(self, dir_fd: int, name: str, what: str) -> os.stat_result | None:
        try:
            st = _fs.stat(name, dir_fd=dir_fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self.store_error(f"inspect {what}", exc) from exc
        if stat.S_ISLNK(st.st_mode):
            raise StoreError(
                f"{what} in session {self.path} is a symbolic link; refusing to follow it"
            )
        return st

    def stat_body(self, shard_fd: int, ref: str) -> os.stat_result | None:
        what = self.body_rel(ref)
        st = self.lstat(shard_fd, ref + BODY_SUFFIX, what)
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise StoreError(f"{what} in session {self.path} is not a regular file")
        return st

    def size_or_zero(self, shard_fd: int, name: str) -> int:
        try:
            st = _fs.stat(name, dir_fd=shard_fd)
        except OSError:
            return 0
        return st.st_size if stat.S_ISREG(st.st_mode) else 0

    def read_body(self, shard_fd: int, ref: str) -> bytes:
        what = self.body_rel(ref)
        try:
            fd = _fs.open_fd(ref + BODY_SUFFIX, READ_FLAGS, dir_fd=shard_fd)
        except FileNotFoundError:
            raise RefError(f"no body is stored for ref {ref} in session {self.path}") from None
        except OSError as exc:
            raise self.store_error(
                f"open {what}", exc, name=ref + BODY_SUFFIX, parent_fd=shard_fd
            ) from exc
        return self.read_regular(fd, what)

    def read_regular(self, fd: int, what: str) -> bytes:
        """The whole of open file ``fd`` (then closed), which must be a regular file: a FIFO or
        device planted under a session name would block or never end."""
        try:
            if not stat.S_ISREG(_fs.stat(fd).st_mode):
                raise StoreError(f"{what} in session {self.path} is not a regular file")
            return _fs.read(fd)
        except OSError as exc:
            raise self.store_error(f"read {what}", exc) from exc
        finally:
            self.close_quietly(fd)

    def write_atomic(
        self,
        dir_fd: int,
        name: str,
        data: bytes | memoryview,
        what: str,
        *,
        sync_dir: bool = True,
        sync: bool = True,
    ) -> None:
        """Write ``data`` to a temp file next to ``name``, fsync it, rename it over ``name``.

        Then fsync the directory, unless ``sync_dir`` is False (a group commit syncs it once).
        ``sync=False`` skips both fsyncs (a sidecar, validated by its reader).
        """
        sync = sync and self.fsync
        tmp = f"{TMP_PREFIX}{name}-{secrets.token_hex(6)}"
        try:
            fd = _fs.open_fd(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dir_fd)
        except OSError as exc:
            raise self.store_error(f"create a temp file for {what}", exc) from exc
        try:
            try:
                _fs.write(fd, data)
                if sync:
                    fsync(fd, self.deferred if dir_fd != self.dir_fd else None)
            finally:
                _fs.close(fd)
            _fs.rename(tmp, name, dir_fd=dir_fd)
        except OSError as exc:
            self.discard(dir_fd, tmp)
            raise self.store_error(f"write {what}", exc) from exc
        except BaseException:
            self.discard(dir_fd, tmp)
            raise
        if sync and sync_dir:
            self.fsync_dir(dir_fd, f"the directory holding {what}")

    def entry_added(self) -> None:
        """A new entry (a shard, a pack) is in bodies/: fsync it at the next :meth:`sync_bodies`."""
        self._bodies_synced = False

    def sync_bodies(self) -> None:
        """fsync bodies/ unless every shard's entry in it is known durable already.

        Called before put returns, so no decision is logged before its shard's entry is
        durable: the first put of each store (shards a killed process may have left unsynced)
        and the put that created a shard. Its shard directory is fsync'd by _write_atomic.
        """
        if self.fsync and not self._bodies_synced:
            self.fsync_dir(self.bodies_fd, BODIES_NAME)
            self._bodies_synced = True

    def sync_entries(self, shard_fd: int, ref: str) -> None:
        """Make an existing body's directory entries durable (shard, then bodies/)."""
        if self.fsync:
            self.fsync_dir(shard_fd, f"the directory holding body {self.body_rel(ref)}")
            self.sync_bodies()

    def fsync_dir(self, dir_fd: int, what: str) -> None:
        try:
            fsync(dir_fd, self.deferred if dir_fd != self.dir_fd else None)
        except OSError as exc:
            raise self.store_error(f"fsync {what}", exc) from exc

    def discard(self, dir_fd: int, name: str) -> None:
        """Best-effort removal of a temp file; one left behind is removed on a later open."""
        try:
            _fs.unlink(name, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        except OSError as exc:
            events().warning(
                "toolbudget.spill.temp_left", path=self.path, file=name, error=str(exc)
            )

    def close_quietly(self, fd: int) -> None:
        try:
            _fs.close(fd)
        except OSError as exc:
            events().warning("toolbudget.spill.close_failed", path=self.path, error=str(exc))

    def close_fds(self) -> OSError | None:
        """Close every descriptor, the lock last; return the first error."""
        first: OSError | None = None
        if self.deferred is not None:
            self.deferred.close()
        for attr in ("log_fd", "bodies_fd", "dir_fd", "lock_fd"):
            fd = getattr(self, attr, -1)
            if fd < 0:
                continue
            setattr(self, attr, -1)
            try:
                _fs.close(fd)
            except OSError as exc:
                first = first or exc
        return first

    def store_error(
        self, action: str, exc: OSError, *, name: str | None = None, parent_fd: int | None = None
    ) -> StoreError:
        """A StoreError naming the action, the session and the cause."""
        code = errno.errorcode.get(exc.errno or 0, "")
        reason = exc.strerror or str(exc)
        if name is not None and exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            try:
                if stat.S_ISLNK(_fs.stat(name, dir_fd=parent_fd).st_mode):
                    reason = "it is a symbolic link; refusing to follow it"
            except OSError:
                pass
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            reason += " (disk full)"
        suffix = f" [{code}]" if code else ""
        return StoreError(f"cannot {action} in session {self.path}: {reason}{suffix}")


def decode_meta(data: bytes, path: str) -> dict[str, Any]:
    """The session metadata in ``data`` (``session.json`` of session ``path``); StoreError when it
    is not a JSON object."""
    try:
        meta = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise StoreError(f"{META_NAME} in session {path} is not valid JSON: {exc}") from None
    if not isinstance(meta, dict):
        raise StoreError(f"{META_NAME} in session {path} does not hold a JSON object")
    return meta


def encode_meta(meta: Mapping[str, Any]) -> bytes:
    if not isinstance(meta, Mapping):
        raise StoreError(f"session metadata must be a mapping, got {type(meta).__name__}")
    try:
        return orjson.dumps(dict(meta), option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2)
    except TypeError as exc:
        raise StoreError(f"session metadata is not JSON-serializable: {exc}") from exc
