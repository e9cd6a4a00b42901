"""LocalStore: a session directory on a local filesystem.

Layout::

    <session>/            0700
      lock                0600  flock'd while a LocalStore has the session open; holds its pid
      session.json        0600  small metadata, replaced atomically
      decisions.jsonl     0600  the checksummed, append-only decision log (see spill._log)
      bodies/<ab>/<ref>.txt     spilled bodies by content hash (dirs 0700, files 0600)
      estimates.bin       0600  optional cache a session keeps beside its log (a *sidecar*:
                                validated by its reader, never needed, see read_sidecar)

Bodies are written to a ``.tmp-*`` file in their final directory, fsync'd, renamed into place
and the directory fsync'd (then ``bodies/``, when the shard is new or at a store's first put)
before :meth:`LocalStore.put` returns, so a decision logged after ``put`` never points to a body
that a crash could lose. Temp files are never read as bodies;
those a crash left behind are removed when the session is next opened (next to the metadata)
or when its bodies are first counted for the quota (next to the bodies: the first ``put``).

Every path below the session directory is a single name opened relative to a directory
descriptor with ``O_NOFOLLOW``, and the only names ever built are fixed ones and those derived
from a validated ref: a symlink anywhere inside the session is refused, never followed.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import stat
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, Final, TypeVar

import orjson
import xxhash

from spill import _fs
from spill._errors import ConfigError, QuotaExceeded, RefError, SessionLocked, StoreError
from spill._log import decode_log, encode_records
from spill._store import (
    REF_RE,
    LogRecord,
    PutResult,
    StoreBase,
    check_quota,
    encode_text,
    events,
    validate_ref,
)

__all__ = ["DEFAULT_QUOTA_BYTES", "SIDECAR_NAMES", "LocalStore", "decode_meta"]

_R = TypeVar("_R")

DEFAULT_QUOTA_BYTES: Final = 1 << 30
LOCK_NAME: Final = "lock"
META_NAME: Final = "session.json"
LOG_NAME: Final = "decisions.jsonl"
BODIES_NAME: Final = "bodies"
TMP_PREFIX: Final = ".tmp-"
BODY_SUFFIX: Final = ".txt"
SIDECAR_NAMES: Final = frozenset({"estimates.bin"})
"""The only names :meth:`LocalStore.write_sidecar` writes: caches derived from the history,
each checked by its reader (``budget._estimates_cache``), so a torn or stale one costs time only."""

_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY
_READ_FLAGS: Final = os.O_RDONLY | os.O_NONBLOCK  # a FIFO planted as a body must not block us
_SHARD_RE: Final = re.compile(r"\A[0-9a-f]{2}\Z")
_OPEN_ATTEMPTS: Final = 3
_LOCK_POLL_S: Final = 0.02
_GROUP_THREADS: Final = 16
"""Most shards a group commit works on at once. Each creates, writes and fsyncs its bodies,
renames them and fsyncs its directory in its own thread: concurrent fsyncs on one filesystem
share its journal commits and the device's cache flushes, and the creates' waits on the journal
and on inode-table reads overlap (measured by ``python -m benchmarks perf``: README's
Performance section)."""


@dataclass(slots=True)
class _Body:
    """One new body of a group commit: its bytes, the size it replaces, and how it ended."""

    ref: str
    data: bytes
    old_size: int
    placed: bool = False
    """Renamed into place (complete, and counted in the bodies' total whatever happens next)."""
    error: StoreError | None = None


class LocalStore(StoreBase):
    """A session directory: bodies by content hash, a decision log, metadata, one lock.

    ``LocalStore(path)`` creates the directory (mode 0700, missing parents too) or opens an
    existing one. Only the session directory and what it contains are protected against
    symlinks; the parents of ``path`` come from the author's configuration and are trusted.

    Locking: while open, the store holds an exclusive ``fcntl.flock`` on ``<session>/lock``.
    flock (rather than POSIX ``fcntl`` record locks) is chosen because it belongs to the open
    file description, not the process: a second ``LocalStore`` on the same directory conflicts
    whether it is in another process or in this one, and closing an unrelated descriptor to the
    file cannot silently drop the lock. A second opener polls for up to ``lock_timeout`` seconds
    (0: try once) and then raises :class:`SessionLocked`. The lock is released by :meth:`close`
    (or when the process exits). It is advisory and local: on network filesystems where flock is
    not shared between machines, two machines can still open the same session.

    Args:
        path: the session directory.
        quota_bytes: the most bytes of bodies the session may hold (None: no limit).
        fsync: fsync bodies, the log and directories (turn off only for throwaway sessions).
        lock_timeout: seconds to wait for another holder of the session to close it.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        quota_bytes: int | None = DEFAULT_QUOTA_BYTES,
        fsync: bool = True,
        lock_timeout: float = 0.0,
    ) -> None:
        if not isinstance(path, str | os.PathLike):
            raise ConfigError(f"session path must be a str or path, not {type(path).__name__}")
        raw = os.fspath(path)
        if not isinstance(raw, str) or not raw:
            # "" would make the current directory a session: an unset variable is enough.
            raise ConfigError(f"session path must be a non-empty str path, got {raw!r}")
        if "\0" in raw:
            raise ConfigError("session path must not contain a NUL character")
        check_quota(quota_bytes)
        if isinstance(lock_timeout, bool) or not isinstance(lock_timeout, int | float):
            raise ConfigError(f"lock_timeout must be a number of seconds, got {lock_timeout!r}")
        if not lock_timeout >= 0:
            raise ConfigError(f"lock_timeout must be >= 0 seconds, got {lock_timeout!r}")
        self._path = os.path.abspath(raw)
        if self._path == os.getcwd():
            # Path("") is Path("."): an unset variable wrapped in a Path names the current
            # directory, whose files a session would lock, write and clean up.
            raise ConfigError(
                f"session path {raw!r} is the current directory; a session needs a directory "
                "of its own (e.g. sessions/<id>)"
            )
        self._quota = quota_bytes
        self._fsync = bool(fsync)
        self._mutex = threading.Lock()
        self._closed = True
        self._dir_fd = -1
        self._lock_fd = -1
        self._bodies_fd = -1
        self._log_fd = -1
        self._total: int | None = None  # bodies' bytes, counted on first need
        # Whether every shard's entry in bodies/ is known durable: not yet on open (a process
        # killed between a mkdir and its fsync leaves an entry that only the kernel holds).
        self._bodies_synced = False
        try:
            self._open(float(lock_timeout))
        except BaseException:
            self._close_fds()
            raise
        self._closed = False
        events().debug("toolbudget.spill.opened", path=self._path)

    # -- public API -----------------------------------------------------------------------

    @property
    def path(self) -> str:
        """The session directory (absolute)."""
        return self._path

    @property
    def bodies_bytes(self) -> int:
        """Total size of the stored bodies, as counted against the quota."""
        with self._mutex:
            if self._total is None:
                self._check_open()
            return self._bodies_total()

    def put(self, text: str) -> str:
        """Store ``text`` once by content hash; return its ref once the body is durable.

        An existing body with the same ref and size is left untouched. Raises
        :class:`QuotaExceeded` before writing anything if the body would not fit, and
        :class:`StoreError` on any other failure, leaving no partial body visible.
        """
        if not isinstance(text, str):
            raise StoreError(f"put takes a str body, got {type(text).__name__}")
        # Encoded once, for the hash and the write.
        return self._put(encode_text(text))

    def _put(self, data: bytes | memoryview) -> str:
        ref = xxhash.xxh3_128_hexdigest(data)
        name = ref + BODY_SUFFIX
        with self._mutex:
            self._check_open()
            shard = ref[:2]
            shard_fd = self._open_shard(shard, create=False)
            try:
                existing = None
                if shard_fd is not None:
                    existing = self._stat_body(shard_fd, ref)
                    if existing is not None and existing.st_size == len(data):
                        # Maybe renamed into place by a process killed before its fsyncs: the
                        # decision about to be logged must not outlive its directory entry.
                        self._sync_entries(shard_fd, ref)
                        return ref
                    if existing is not None:
                        self._size_mismatch(ref, existing.st_size, len(data))
                        # Changed behind our back, so our running total is stale too.
                        self._total = self._scan_bodies()
                old_size = existing.st_size if existing is not None else 0
                new_total = self._bodies_total() - old_size + len(data)
                self._check_quota(len(data), new_total)
                if shard_fd is None:
                    shard_fd = self._open_shard(shard, create=True)
                    assert shard_fd is not None
                try:
                    self._write_atomic(shard_fd, name, data, f"body {self._body_rel(ref)}")
                except BaseException:
                    # A failed final directory fsync leaves the (complete) body in place.
                    self._total = new_total - len(data) + self._size_or_zero(shard_fd, name)
                    raise
                self._total = new_total
                self._sync_bodies()
            finally:
                if shard_fd is not None:
                    self._close_quietly(shard_fd)
        return ref

    def put_many(self, texts: Sequence[str]) -> list[PutResult]:
        """Store several bodies as one group commit; for each, its ref or the StoreError it met.

        The steps and their order are :meth:`put`'s: each new body is written to a temp file
        and fsync'd, renamed into place, its shard directory fsync'd (once per shard, after all
        of its bodies), then ``bodies/`` once. The shards are worked on concurrently (see
        ``_GROUP_THREADS``). A ref is returned only for a body durable under its final name; a
        body that fails (the quota, a full disk, a planted symlink) gets its StoreError and
        leaves no partial file, and the others go on. Raises StoreError for the whole call only
        when nothing can be tried: the store is closed, or a text is not a str.
        """
        if isinstance(texts, str | bytes) or not isinstance(texts, Sequence):
            raise StoreError(f"put_many takes a sequence of str bodies, got {type(texts).__name__}")
        datas: list[bytes] = []
        for text in texts:
            if not isinstance(text, str):
                raise StoreError(f"put_many takes str bodies, got {type(text).__name__}")
            datas.append(encode_text(text))
        refs = [xxhash.xxh3_128_hexdigest(data) for data in datas]
        out: list[PutResult] = list(refs)
        slots: dict[str, list[int]] = {}
        for i, ref in enumerate(refs):
            slots.setdefault(ref, []).append(i)
        with self._mutex:
            self._check_open()
            shards: dict[str, int] = {}
            try:
                self._group_commit(slots, datas, out, shards)
            finally:
                for fd in shards.values():
                    self._close_quietly(fd)
        return out

    def _group_commit(
        self,
        slots: dict[str, list[int]],
        datas: list[bytes],
        out: list[PutResult],
        shards: dict[str, int],
    ) -> None:
        """put_many's work, under the mutex; the caller closes the descriptors in ``shards``."""

        def fail(ref: str, exc: StoreError) -> None:
            for i in slots[ref]:
                out[i] = exc

        try:
            # Counted (and a crash's temp files removed) before this group writes any.
            self._bodies_total()
        except StoreError as exc:
            for ref in slots:
                fail(ref, exc)
            return
        new: dict[str, list[_Body]] = {}
        found: dict[str, list[str]] = {}  # already stored: their entries are synced again
        for ref, where in slots.items():
            try:
                body = self._group_check(ref, datas[where[0]], shards, new)
            except StoreError as exc:
                fail(ref, exc)
                continue
            if body is None:
                found.setdefault(ref[:2], []).append(ref)
            else:
                new.setdefault(ref[:2], []).append(body)
        work = list(new) + [shard for shard in found if shard not in new]
        if not self._fsync:
            work = list(new)
        if any(shard not in shards for shard in work):
            self._bodies_synced = False  # a new shard's entry in bodies/ is synced below
        tasks = [
            partial(self._commit_shard, shard, shards.get(shard), new.get(shard, []))
            for shard in work
        ]
        dir_errors = self._run_all(tasks)
        for shard, dir_error in zip(work, dir_errors, strict=True):
            for body in new.get(shard, []):
                if not body.placed:
                    self._total = self._bodies_total() - len(body.data) + body.old_size
                if body.error is not None:
                    fail(body.ref, body.error)
            if dir_error is not None:
                for ref in found.get(shard, []):
                    fail(ref, dir_error)
        if self._fsync and any(isinstance(r, str) for r in out):
            try:
                self._sync_bodies()
            except StoreError as exc:
                for ref in slots:
                    fail(ref, exc)

    def _size_mismatch(self, ref: str, size: int, expected: int) -> None:
        events().warning(
            "toolbudget.spill.size_mismatch", path=self._path, ref=ref, size=size, expected=expected
        )

    def _check_quota(self, size: int, new_total: int) -> None:
        """QuotaExceeded when storing ``size`` more bytes brings the bodies to ``new_total``."""
        if self._quota is not None and new_total > self._quota:
            raise QuotaExceeded(
                f"storing a body of {size} bytes would bring session {self._path} "
                f"to {new_total} bytes of bodies, above its quota of {self._quota} bytes"
            )

    def _group_check(
        self, ref: str, data: bytes, shards: dict[str, int], new: dict[str, list[_Body]]
    ) -> _Body | None:
        """Check one body of a group against the quota; None if it is stored already.

        Its size counts toward the running total from here on, so the next bodies of the group
        are checked against the quota with it.
        """
        shard = ref[:2]
        shard_fd = shards.get(shard)
        if shard_fd is None and shard not in new:
            shard_fd = self._open_shard(shard, create=False)
            if shard_fd is not None:
                shards[shard] = shard_fd
        existing = self._stat_body(shard_fd, ref) if shard_fd is not None else None
        if existing is not None and existing.st_size == len(data):
            return None
        if existing is not None:
            self._size_mismatch(ref, existing.st_size, len(data))
            # Changed behind our back: recounted (no temp file of this group exists yet), plus
            # the group's bodies checked so far.
            waiting = sum(len(b.data) - b.old_size for bodies in new.values() for b in bodies)
            self._total = self._scan_bodies() + waiting
        old_size = existing.st_size if existing is not None else 0
        new_total = self._bodies_total() - old_size + len(data)
        self._check_quota(len(data), new_total)
        self._total = new_total
        return _Body(ref, data, old_size)

    def _commit_shard(
        self, shard: str, shard_fd: int | None, bodies: list[_Body]
    ) -> StoreError | None:
        """Write, fsync and rename one shard's new bodies, then fsync its directory once.

        Runs in a worker thread: touches no state of the store but ``bodies``, which only this
        call holds. Returns the error of the directory's own open or fsync (bodies get theirs).
        """
        own = shard_fd is None
        if shard_fd is None:
            try:
                shard_fd = self._open_subdir(
                    self._bodies_fd, shard, f"{BODIES_NAME}/{shard}", sync=False
                )
            except StoreError as exc:
                for body in bodies:
                    body.error = exc
                return exc
        try:
            for body in bodies:
                try:
                    self._write_atomic(
                        shard_fd,
                        body.ref + BODY_SUFFIX,
                        body.data,
                        f"body {self._body_rel(body.ref)}",
                        sync_dir=False,
                    )
                except StoreError as exc:
                    body.error = exc
                    continue
                body.placed = True
            if self._fsync and (not bodies or any(b.placed for b in bodies)):
                try:
                    self._fsync_dir(shard_fd, f"the directory {BODIES_NAME}/{shard}")
                except StoreError as exc:
                    for body in bodies:
                        if body.error is None:
                            body.error = exc
                    return exc
            return None
        finally:
            if own:
                self._close_quietly(shard_fd)

    def _run_all(self, tasks: Sequence[Callable[[], _R]]) -> list[_R]:
        """Run the tasks, several at a time when there are several; results in order."""
        if len(tasks) <= 1:
            return [task() for task in tasks]
        with ThreadPoolExecutor(
            max_workers=min(_GROUP_THREADS, len(tasks)), thread_name_prefix="spill-group"
        ) as pool:
            futures = [pool.submit(task) for task in tasks]
        return [future.result() for future in futures]

    def get(self, ref: str) -> str:
        """Return the exact text stored under ``ref``, after checking its content hash."""
        ref = validate_ref(ref)
        with self._mutex:
            self._check_open()
            shard_fd = self._open_shard(ref[:2], create=False)
            if shard_fd is None:
                raise RefError(f"no body is stored for ref {ref} in session {self._path}")
            try:
                data = self._read_body(shard_fd, ref)
            finally:
                self._close_quietly(shard_fd)
        if xxhash.xxh3_128_hexdigest(data) != ref:
            raise StoreError(
                f"body {self._body_rel(ref)} in session {self._path} is corrupt: "
                "its content does not match its ref"
            )
        try:
            return data.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError as exc:  # pragma: no cover - the hash matched our own bytes
            raise StoreError(f"body {self._body_rel(ref)} is not valid UTF-8: {exc}") from exc

    def has(self, ref: str) -> bool:
        """Whether a body is stored under ``ref``; RefError if ``ref`` is malformed."""
        ref = validate_ref(ref)
        with self._mutex:
            self._check_open()
            shard_fd = self._open_shard(ref[:2], create=False)
            if shard_fd is None:
                return False
            try:
                return self._stat_body(shard_fd, ref) is not None
            finally:
                self._close_quietly(shard_fd)

    def path_of(self, ref: str) -> str:
        """The absolute path the body of ``ref`` has, or will have once put (no file access).

        Envelopes name the file before the body is written: a body must be durable before the
        decision that points to it is logged, and the envelope is part of that decision.
        """
        ref = validate_ref(ref)
        return os.path.join(self._path, BODIES_NAME, ref[:2], ref + BODY_SUFFIX)

    def append_log(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Append ``records`` to the log in one write() and flush (fsync) before returning."""
        payload = encode_records(records)
        if not payload:
            return
        with self._mutex:
            self._check_open()
            try:
                size = _fs.stat(self._log_fd).st_size
                # A torn last line (crash mid-append) must not swallow the first new record.
                if size and _fs.read(self._log_fd, size - 1, 1) != b"\n":
                    payload = b"\n" + payload
                _fs.write(self._log_fd, payload)
                if self._fsync:
                    _fs.fsync(self._log_fd)
            except OSError as exc:
                raise self._error(f"append to {LOG_NAME}", exc) from exc

    def read_log(self) -> list[LogRecord]:
        """Every valid log record in order, read in one pass without touching any body."""
        with self._mutex:
            self._check_open()
            try:
                data = _fs.read(self._log_fd)
            except OSError as exc:
                raise self._error(f"read {LOG_NAME}", exc) from exc
        return decode_log(data, source=os.path.join(self._path, LOG_NAME))

    def read_meta(self) -> dict[str, Any]:
        """The session metadata; ``{}`` if none was written."""
        with self._mutex:
            self._check_open()
            try:
                fd = _fs.open_fd(META_NAME, _READ_FLAGS, dir_fd=self._dir_fd)
            except FileNotFoundError:
                return {}
            except OSError as exc:
                raise self._error(f"open {META_NAME}", exc, name=META_NAME) from exc
            try:
                if not stat.S_ISREG(_fs.stat(fd).st_mode):
                    raise StoreError(f"{META_NAME} in session {self._path} is not a regular file")
                data = _fs.read(fd)
            except OSError as exc:
                raise self._error(f"read {META_NAME}", exc) from exc
            finally:
                self._close_quietly(fd)
        return decode_meta(data, self._path)

    def read_sidecar(self, name: str) -> bytes | None:
        """The bytes of sidecar ``name`` (one of ``SIDECAR_NAMES``); None if there is none.

        The reader validates what it gets: a sidecar is written without fsync, so after a crash
        it may be torn, empty or older than the log.
        """
        _check_sidecar(name)
        with self._mutex:
            self._check_open()
            try:
                fd = _fs.open_fd(name, _READ_FLAGS, dir_fd=self._dir_fd)
            except FileNotFoundError:
                return None
            except OSError as exc:
                raise self._error(f"open {name}", exc, name=name, parent_fd=self._dir_fd) from exc
            try:
                if not stat.S_ISREG(_fs.stat(fd).st_mode):
                    raise StoreError(f"{name} in session {self._path} is not a regular file")
                return _fs.read(fd)
            except OSError as exc:
                raise self._error(f"read {name}", exc) from exc
            finally:
                self._close_quietly(fd)

    def write_sidecar(self, name: str, data: bytes) -> None:
        """Replace sidecar ``name`` (one of ``SIDECAR_NAMES``) by ``data`` (temp file, rename).

        Not fsync'd: a sidecar is a cache its reader checks, never a decision's dependency, so
        it is not worth a journal commit on the request path.
        """
        _check_sidecar(name)
        if not isinstance(data, bytes):
            raise StoreError(f"a sidecar is bytes, got {type(data).__name__}")
        with self._mutex:
            self._check_open()
            self._write_atomic(self._dir_fd, name, data, name, sync=False)

    def write_meta(self, meta: Mapping[str, Any]) -> None:
        """Replace the session metadata atomically (temp file, fsync, rename)."""
        data = _encode_meta(meta)
        with self._mutex:
            self._check_open()
            self._write_atomic(self._dir_fd, META_NAME, data, META_NAME)

    def close(self) -> None:
        """Release the lock and every descriptor; idempotent."""
        with self._mutex:
            if self._closed:
                return
            self._closed = True
            error = self._close_fds()
        if error is not None:
            raise self._error("close the session", error) from error
        events().debug("toolbudget.spill.closed", path=self._path)

    def __del__(self) -> None:
        if getattr(self, "_closed", True):
            return
        warnings.warn(f"LocalStore for {self._path} was not closed", ResourceWarning, stacklevel=2)
        self._closed = True
        self._close_fds()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"LocalStore({self._path!r}, {state})"

    # -- opening --------------------------------------------------------------------------

    def _open(self, lock_timeout: float) -> None:
        for _ in range(_OPEN_ATTEMPTS):
            created = self._ensure_session_dir()
            self._dir_fd = self._open_dir(self._path, None, self._path)
            self._lock_fd = self._open_file(LOCK_NAME, os.O_RDWR | os.O_CREAT)
            self._acquire_lock(lock_timeout)
            if self._still_in_place():
                break
            # gc removed the directory between our open and our lock: start again.
            self._close_fds()
        else:
            raise StoreError(f"session directory {self._path} kept being replaced while opening")
        try:
            mode = _fs.stat(self._dir_fd).st_mode
            _fs.truncate(self._lock_fd, 0)
            _fs.write(self._lock_fd, f"{os.getpid()}\n".encode())
        except OSError as exc:
            raise self._error(f"write {LOCK_NAME}", exc) from exc
        if not created and mode & 0o077:
            events().warning(
                "toolbudget.spill.permissive_mode", path=self._path, mode=oct(mode & 0o777)
            )
        self._bodies_fd = self._open_subdir(self._dir_fd, BODIES_NAME, BODIES_NAME)
        self._clean_temps(self._dir_fd, "")
        self._log_fd = self._open_file(LOG_NAME, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        if self._lstat(self._dir_fd, META_NAME, META_NAME) is None:
            self._write_atomic(self._dir_fd, META_NAME, _encode_meta({}), META_NAME)
        elif self._fsync:
            self._fsync_dir(self._dir_fd, "the session directory")

    def _ensure_session_dir(self) -> bool:
        """Create the session directory and missing parents; True if the session dir was new."""
        missing: list[str] = []
        probe = self._path
        while True:
            try:
                st = _fs.stat(probe)
            except FileNotFoundError:
                missing.append(probe)
                parent = os.path.dirname(probe)
                if parent == probe:
                    raise StoreError(f"cannot create session directory {self._path}") from None
                probe = parent
                continue
            except OSError as exc:
                raise self._error(f"inspect {probe}", exc) from exc
            if probe == self._path:
                if stat.S_ISLNK(st.st_mode):
                    raise StoreError(
                        f"session directory {self._path} is a symbolic link; refusing to follow it"
                    )
                if not stat.S_ISDIR(st.st_mode):
                    raise StoreError(f"session path {self._path} exists and is not a directory")
            break
        for directory in reversed(missing):
            try:
                _fs.mkdir(directory, 0o700)
            except FileExistsError:
                continue
            except OSError as exc:
                raise self._error(f"create directory {directory}", exc) from exc
        return bool(missing)

    def _acquire_lock(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                _fs.lock(self._lock_fd)
                return
            except BlockingIOError:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                time.sleep(min(_LOCK_POLL_S, remaining))
            except OSError as exc:
                raise self._error(f"lock {LOCK_NAME}", exc) from exc
        try:
            holder = _fs.read(self._lock_fd, 0, 32).decode("ascii", "replace").strip()
        except OSError:
            holder = ""
        who = f" (pid {holder} per its lock file)" if holder.isdigit() else ""
        raise SessionLocked(
            f"session {self._path} is open in another LocalStore{who}; a session can be open "
            f"in one place at a time. Close the other store first, or pass lock_timeout to "
            f"wait (waited {timeout:g} s)."
        )

    def _still_in_place(self) -> bool:
        """Whether the locked file and directory are still the ones at our path."""
        try:
            here = _fs.stat(self._path)
            lock_here = _fs.stat(LOCK_NAME, dir_fd=self._dir_fd)
            mine = _fs.stat(self._dir_fd)
            mine_lock = _fs.stat(self._lock_fd)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise self._error("check the session directory", exc) from exc
        return (here.st_dev, here.st_ino) == (mine.st_dev, mine.st_ino) and (
            lock_here.st_dev,
            lock_here.st_ino,
        ) == (mine_lock.st_dev, mine_lock.st_ino)

    def _bodies_total(self) -> int:
        """The running total of body bytes, scanning the bodies the first time it is needed.

        Not scanned on open: resuming a session (open + read_log) must stay fast with 10,000
        bodies on disk, and only put() and the quota need the figure.
        """
        if self._total is None:
            self._total = self._scan_bodies()
        return self._total

    def _scan_bodies(self) -> int:
        """Total size of the stored bodies; removes temp files left by a crash."""
        total = 0
        try:
            shards = _fs.listdir(self._bodies_fd)
        except OSError as exc:
            raise self._error(f"list {BODIES_NAME}", exc) from exc
        for shard in shards:
            if shard.startswith(TMP_PREFIX):
                self._discard(self._bodies_fd, shard)
                continue
            if not _SHARD_RE.match(shard):
                continue
            try:
                shard_fd = _fs.open_fd(shard, _DIR_FLAGS, dir_fd=self._bodies_fd)
            except OSError as exc:
                events().warning(
                    "toolbudget.spill.shard_skipped",
                    path=self._path,
                    shard=shard,
                    reason=self._error("open", exc, name=shard, parent_fd=self._bodies_fd).args[0],
                )
                continue
            try:
                total += self._scan_shard(shard_fd, shard)
            finally:
                self._close_quietly(shard_fd)
        return total

    def _scan_shard(self, shard_fd: int, shard: str) -> int:
        total = 0
        try:
            names = _fs.listdir(shard_fd)
        except OSError as exc:
            raise self._error(f"list {BODIES_NAME}/{shard}", exc) from exc
        for name in names:
            if name.startswith(TMP_PREFIX):
                self._discard(shard_fd, name)
                continue
            if not (name.endswith(BODY_SUFFIX) and name.startswith(shard)):
                continue
            if not REF_RE.match(name[: -len(BODY_SUFFIX)]):
                continue
            try:
                st = _fs.stat(name, dir_fd=shard_fd)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise self._error(f"inspect {BODIES_NAME}/{shard}/{name}", exc) from exc
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
        return total

    def _clean_temps(self, dir_fd: int, rel: str) -> None:
        try:
            names = _fs.listdir(dir_fd)
        except OSError as exc:
            raise self._error(f"list {rel or 'the session directory'}", exc) from exc
        for name in names:
            if name.startswith(TMP_PREFIX):
                self._discard(dir_fd, name)

    # -- helpers --------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"the store for session {self._path} is closed")

    def _body_rel(self, ref: str) -> str:
        return f"{BODIES_NAME}/{ref[:2]}/{ref}{BODY_SUFFIX}"

    def _open_dir(self, path: str, dir_fd: int | None, what: str) -> int:
        try:
            return _fs.open_fd(path, _DIR_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            raise self._error(f"open {what}", exc, name=path, parent_fd=dir_fd) from exc

    def _open_subdir(self, parent_fd: int, name: str, what: str, *, sync: bool = True) -> int:
        """Open (creating if missing) a directory ``name`` inside ``parent_fd``.

        ``sync=False`` leaves the fsync of ``parent_fd`` after a mkdir to the caller.
        """
        try:
            return _fs.open_fd(name, _DIR_FLAGS, dir_fd=parent_fd)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise self._error(f"open {what}", exc, name=name, parent_fd=parent_fd) from exc
        try:
            _fs.mkdir(name, 0o700, dir_fd=parent_fd)
        except FileExistsError:
            pass
        except OSError as exc:
            raise self._error(f"create {what}", exc) from exc
        fd = self._open_dir(name, parent_fd, what)
        if self._fsync and sync:
            try:
                _fs.fsync(parent_fd)
            except OSError as exc:
                self._close_quietly(fd)
                raise self._error(f"fsync the directory holding {what}", exc) from exc
        return fd

    def _open_shard(self, shard: str, *, create: bool) -> int | None:
        what = f"{BODIES_NAME}/{shard}"
        if create:
            # bodies/ is fsync'd once the body is (see _sync_bodies): on a journaling
            # filesystem the body's own fsync has made the new entry durable by then.
            self._bodies_synced = False
            return self._open_subdir(self._bodies_fd, shard, what, sync=False)
        try:
            return _fs.open_fd(shard, _DIR_FLAGS, dir_fd=self._bodies_fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self._error(f"open {what}", exc, name=shard, parent_fd=self._bodies_fd) from exc

    def _open_file(self, name: str, flags: int) -> int:
        try:
            fd = _fs.open_fd(name, flags, 0o600, dir_fd=self._dir_fd)
        except OSError as exc:
            raise self._error(f"open {name}", exc, name=name, parent_fd=self._dir_fd) from exc
        try:
            if not stat.S_ISREG(_fs.stat(fd).st_mode):
                raise StoreError(f"{name} in session {self._path} is not a regular file")
        except OSError as exc:
            self._close_quietly(fd)
            raise self._error(f"inspect {name}", exc) from exc
        except StoreError:
            self._close_quietly(fd)
            raise
        return fd

    def _lstat(self, dir_fd: int, name: str, what: str) -> os.stat_result | None:
        try:
            st = _fs.stat(name, dir_fd=dir_fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self._error(f"inspect {what}", exc) from exc
        if stat.S_ISLNK(st.st_mode):
            raise StoreError(
                f"{what} in session {self._path} is a symbolic link; refusing to follow it"
            )
        return st

    def _stat_body(self, shard_fd: int, ref: str) -> os.stat_result | None:
        what = self._body_rel(ref)
        st = self._lstat(shard_fd, ref + BODY_SUFFIX, what)
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise StoreError(f"{what} in session {self._path} is not a regular file")
        return st

    def _size_or_zero(self, shard_fd: int, name: str) -> int:
        try:
            st = _fs.stat(name, dir_fd=shard_fd)
        except OSError:
            return 0
        return st.st_size if stat.S_ISREG(st.st_mode) else 0

    def _read_body(self, shard_fd: int, ref: str) -> bytes:
        what = self._body_rel(ref)
        try:
            fd = _fs.open_fd(ref + BODY_SUFFIX, _READ_FLAGS, dir_fd=shard_fd)
        except FileNotFoundError:
            raise RefError(f"no body is stored for ref {ref} in session {self._path}") from None
        except OSError as exc:
            raise self._error(
                f"open {what}", exc, name=ref + BODY_SUFFIX, parent_fd=shard_fd
            ) from exc
        try:
            st = _fs.stat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise StoreError(f"{what} in session {self._path} is not a regular file")
            return _fs.read(fd)
        except OSError as exc:
            raise self._error(f"read {what}", exc) from exc
        finally:
            self._close_quietly(fd)

    def _write_atomic(
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
        sync = sync and self._fsync
        tmp = f"{TMP_PREFIX}{name}-{secrets.token_hex(6)}"
        try:
            fd = _fs.open_fd(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dir_fd)
        except OSError as exc:
            raise self._error(f"create a temp file for {what}", exc) from exc
        try:
            try:
                _fs.write(fd, data)
                if sync:
                    _fs.fsync(fd)
            finally:
                _fs.close(fd)
            _fs.rename(tmp, name, dir_fd=dir_fd)
        except OSError as exc:
            self._discard(dir_fd, tmp)
            raise self._error(f"write {what}", exc) from exc
        except BaseException:
            self._discard(dir_fd, tmp)
            raise
        if sync and sync_dir:
            self._fsync_dir(dir_fd, f"the directory holding {what}")

    def _sync_bodies(self) -> None:
        """fsync bodies/ unless every shard's entry in it is known durable already.

        Called before put returns, so no decision is logged before its shard's entry is
        durable: the first put of each store (shards a killed process may have left unsynced)
        and the put that created a shard. Its shard directory is fsync'd by _write_atomic.
        """
        if self._fsync and not self._bodies_synced:
            self._fsync_dir(self._bodies_fd, BODIES_NAME)
            self._bodies_synced = True

    def _sync_entries(self, shard_fd: int, ref: str) -> None:
        """Make an existing body's directory entries durable (shard, then bodies/)."""
        if self._fsync:
            self._fsync_dir(shard_fd, f"the directory holding body {self._body_rel(ref)}")
            self._sync_bodies()

    def _fsync_dir(self, dir_fd: int, what: str) -> None:
        try:
            _fs.fsync(dir_fd)
        except OSError as exc:
            raise self._error(f"fsync {what}", exc) from exc

    def _discard(self, dir_fd: int, name: str) -> None:
        """Best-effort removal of a temp file; one left behind is removed on a later open."""
        try:
            _fs.unlink(name, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        except OSError as exc:
            events().warning(
                "toolbudget.spill.temp_left", path=self._path, file=name, error=str(exc)
            )

    def _close_quietly(self, fd: int) -> None:
        try:
            _fs.close(fd)
        except OSError as exc:
            events().warning("toolbudget.spill.close_failed", path=self._path, error=str(exc))

    def _close_fds(self) -> OSError | None:
        """Close every descriptor, the lock last; return the first error."""
        first: OSError | None = None
        for attr in ("_log_fd", "_bodies_fd", "_dir_fd", "_lock_fd"):
            fd = getattr(self, attr, -1)
            if fd < 0:
                continue
            setattr(self, attr, -1)
            try:
                _fs.close(fd)
            except OSError as exc:
                first = first or exc
        return first

    def _error(
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
        return StoreError(f"cannot {action} in session {self._path}: {reason}{suffix}")


def _check_sidecar(name: str) -> None:
    if name not in SIDECAR_NAMES:
        raise StoreError(f"{name!r} is not a sidecar name; known: {sorted(SIDECAR_NAMES)}")


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


def _encode_meta(meta: Mapping[str, Any]) -> bytes:
    if not isinstance(meta, Mapping):
        raise StoreError(f"session metadata must be a mapping, got {type(meta).__name__}")
    try:
        return orjson.dumps(dict(meta), option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2)
    except TypeError as exc:
        raise StoreError(f"session metadata is not JSON-serializable: {exc}") from exc
