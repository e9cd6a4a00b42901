"""LocalStore: a session directory on a local filesystem.

Layout::

    <session>/            0700
      lock                0600  flock'd while a LocalStore has the session open; holds its pid
      session.json        0600  small metadata, replaced atomically
      decisions.jsonl     0600  the checksummed, append-only decision log (see spill._log)
      bodies/<ab>/<ref>.txt     spilled bodies by content hash (dirs 0700, files 0600)
      bodies/pack-<hash>.pack   the bodies of one group commit in one file (see spill._packs)
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

import os
import stat
import threading
import warnings
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, ClassVar, Final

import xxhash

from spill import _fs
from spill._bodies import PACK_MIN, Bodies
from spill._deferred import Deferred
from spill._errors import ConfigError, RefError, StoreError
from spill._log import decode_log, encode_records
from spill._packs import file_or_packed
from spill._paths import checked_path
from spill._sessiondir import (
    BODIES_NAME,
    BODY_SUFFIX,
    LOG_NAME,
    META_NAME,
    READ_FLAGS,
    SIDECAR_NAMES,
    SessionDir,
    decode_meta,
    encode_meta,
)
from spill._sidecars import Sidecars
from spill._store import (
    LogRecord,
    PutResult,
    StoreBase,
    check_quota,
    check_seconds,
    encode_text,
    events,
    validate_ref,
)

__all__ = ["DEFAULT_QUOTA_BYTES", "SIDECAR_NAMES", "LocalStore", "decode_meta"]

DEFAULT_QUOTA_BYTES: Final = 1 << 30


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

    The store holds its parts: the open session directory (:class:`spill._sessiondir.SessionDir`:
    names, descriptors, lock, single-name file operations) and the bodies
    (:class:`spill._bodies.Bodies`: their total against the quota, the packs, the group commit)
    and the sidecars (:class:`spill._sidecars.Sidecars`);
    its own state is the mutex every call takes (but :meth:`overwrite_sidecar`) and whether it
    is closed.

    Args:
        path: the session directory.
        quota_bytes: the most bytes of bodies the session may hold (None: no limit).
        fsync: fsync bodies, the log and directories (turn off only for throwaway sessions).
        lock_timeout: seconds to wait for another holder of the session to close it.
        defer_sync: puts and :meth:`append_log` write at once (a killed process loses
            nothing: the kernel holds it) and leave their fsyncs (what a power loss or an OS
            crash could take) to the next :meth:`sync` or :meth:`close`, which makes the bodies'
            first (``spill._deferred``), then the log's. For a caller that syncs off its request
            path (``toolbudget proxy``: while the upstream answers, docs/proxy.md).
    """

    _pack_min: ClassVar[int] = PACK_MIN
    """Fewest new bodies a group commit packs into one file (``spill._bodies``)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        quota_bytes: int | None = DEFAULT_QUOTA_BYTES,
        fsync: bool = True,
        lock_timeout: float = 0.0,
        defer_sync: bool = False,
    ) -> None:
        raw = checked_path(path, "session path")
        check_quota(quota_bytes)
        timeout = check_seconds(lock_timeout, "lock_timeout")
        if os.path.abspath(raw) == os.getcwd():
            # Path("") is Path("."): an unset variable wrapped in a Path names the current
            # directory, whose files a session would lock, write and clean up.
            raise ConfigError(
                f"session path {raw!r} is the current directory; a session needs a directory "
                "of its own (e.g. sessions/<id>)"
            )
        self._mutex = threading.Lock()
        self._closed = True
        self._log_unsynced = False  # an append's records written, their fsync put off
        self._dir = SessionDir(os.path.abspath(raw), bool(fsync))
        self._bodies = Bodies(self._dir, quota_bytes, self._pack_min)
        self._sidecars = Sidecars(self._dir)
        try:
            self._dir.open(timeout)
        except BaseException:
            self._dir.close_fds()
            raise
        self._dir.deferred = Deferred() if defer_sync and fsync else None
        self.defers_sync = self._dir.deferred is not None
        self._closed = False
        events().debug("toolbudget.spill.opened", path=self._dir.path)

    @property
    def path(self) -> str:
        """The session directory (absolute)."""
        return self._dir.path

    @property
    def bodies_bytes(self) -> int:
        """Total size of the stored bodies, as counted against the quota."""
        with self._mutex:
            if not self._bodies.counted:
                self._check_open()
            return self._bodies.total()

    def put(self, text: str) -> str:
        """Store ``text`` once by content hash; return its ref once the body is durable (with
        ``defer_sync``: once it is written, durable at the next :meth:`sync`).

        An existing body with the same ref and size is left untouched. Raises
        :class:`QuotaExceeded` before writing anything if the body would not fit, and
        :class:`StoreError` on any other failure, leaving no partial body visible.
        """
        if not isinstance(text, str):
            raise StoreError(f"put takes a str body, got {type(text).__name__}")
        # Encoded once, for the hash and the write.
        return self._put(encode_text(text))

    def put_many(self, texts: Sequence[str]) -> list[PutResult]:
        """Store several bodies as one group commit; for each, its ref or the StoreError it met.

        The steps and their order are :meth:`put`'s: each new body is written to a temp file
        and fsync'd, renamed into place, its shard directory fsync'd (once per shard, after all
        of its bodies), then ``bodies/`` once. The shards are worked on concurrently (see
        ``spill._group.GROUP_THREADS``). A ref is returned only for a body durable under its final name; a
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
            self._bodies.group_commit(slots, datas, out)
        return out

    def _put(self, data: bytes | memoryview) -> str:
        ref = xxhash.xxh3_128_hexdigest(data)
        with self._mutex:
            self._check_open()
            self._bodies.put(ref, data)
        return ref

    def get(self, ref: str) -> str:
        """Return the exact text stored under ``ref``, after checking its content hash."""
        ref = validate_ref(ref)
        refused: StoreError | None = None
        with self._mutex:
            self._check_open()
            try:
                data = self._read_file_body(ref)
            except StoreError as exc:
                # A symlink, FIFO or directory planted where the file goes (never followed),
                # or an unreadable file: a pack holding the body still serves it, since put
                # reports a packed body stored whatever its file path holds.
                data, refused = None, exc
            data = file_or_packed(
                ref,
                data,
                refused,
                partial(self._bodies.read_packed, ref),
                what=self._dir.body_rel(ref),
                session=self._dir.path,
            )
        try:
            return data.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError as exc:  # pragma: no cover - the hash matched our own bytes
            raise StoreError(f"body {self._dir.body_rel(ref)} is not valid UTF-8: {exc}") from exc

    def _read_file_body(self, ref: str) -> bytes | None:
        """The bytes of ``ref``'s body file, None if it has none."""
        shard_fd = self._dir.open_shard(ref[:2], create=False)
        if shard_fd is None:
            return None
        try:
            return self._dir.read_body(shard_fd, ref)
        except RefError:
            return None
        finally:
            self._dir.close_quietly(shard_fd)

    def has(self, ref: str) -> bool:
        """Whether a body is stored under ``ref``; RefError if ``ref`` is malformed."""
        ref = validate_ref(ref)
        with self._mutex:
            self._check_open()
            try:
                if self._has_file(ref):
                    return True
            except StoreError:
                # Something planted where the file goes: a pack may still hold the body (get).
                if not self._bodies.packed(ref):
                    raise
                return True
            return self._bodies.packed(ref)

    def _has_file(self, ref: str) -> bool:
        """Whether ``ref`` has a body file; StoreError if its shard or file is not a plain one."""
        shard_fd = self._dir.open_shard(ref[:2], create=False)
        if shard_fd is None:
            return False
        try:
            return self._dir.stat_body(shard_fd, ref) is not None
        finally:
            self._dir.close_quietly(shard_fd)

    def path_of(self, ref: str) -> str:
        """The absolute path the body of ``ref`` has, or will have once put.

        Envelopes name the file before the body is written: a body must be durable before the
        decision that points to it is logged, and the envelope is part of that decision. A ref
        whose path was given out is stored as its own file from then on, never only in a pack;
        a body already stored only in a pack is written to its file here (so the path holds it
        even when no put follows), or, if that fails, a warning says so and it stays readable."""
        ref = validate_ref(ref)
        self._bodies.name(ref)
        with self._mutex:
            if not self._closed:
                self._unpack(ref)
        return os.path.join(self._dir.path, BODIES_NAME, ref[:2], ref + BODY_SUFFIX)

    def _unpack(self, ref: str) -> None:
        """Write packed ``ref``'s body to its own file if it has none (under the mutex)."""
        try:
            if not self._bodies.packed(ref):
                return
            shard_fd = self._dir.open_shard(ref[:2], create=True)
            assert shard_fd is not None
            try:
                if self._dir.stat_body(shard_fd, ref) is not None:
                    return
                packed = self._bodies.read_packed(ref)
                if packed is None or xxhash.xxh3_128_hexdigest(packed[0]) != ref:
                    raise StoreError(f"packed body {ref} in session {self._dir.path} is damaged")
                data = packed[0]
                # On disk twice from here on, and counted twice: the quota holds for the copy
                # too (over it, the group commit that follows keeps the text inline).
                new_total = self._bodies.total() + len(data)
                self._bodies.check_quota(len(data), new_total)
                self._dir.write_atomic(shard_fd, ref + BODY_SUFFIX, data, self._dir.body_rel(ref))
                self._bodies.set_total(new_total)
                self._dir.sync_bodies()
            finally:
                self._dir.close_quietly(shard_fd)
        except StoreError as exc:
            events().warning(
                "toolbudget.spill.path_unavailable", path=self._dir.path, ref=ref, error=str(exc)
            )

    def append_log(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Append ``records`` to the log in one write() and flush (fsync) before returning."""
        payload = encode_records(records)
        if not payload:
            return
        with self._mutex:
            self._check_open()
            try:
                size = _fs.stat(self._dir.log_fd).st_size
                # A torn last line (crash mid-append) must not swallow the first new record.
                if size and _fs.read(self._dir.log_fd, size - 1, 1) != b"\n":
                    payload = b"\n" + payload
                _fs.write(self._dir.log_fd, payload)
                if self._dir.deferred is not None:
                    self._log_unsynced = True
                elif self._dir.fsync:
                    _fs.fsync(self._dir.log_fd)
            except OSError as exc:
                raise self._dir.store_error(f"append to {LOG_NAME}", exc) from exc

    def sync(self) -> None:
        """fsync what puts and appends left unsynced (``defer_sync``): bodies, then the log."""
        with self._mutex:
            self._check_open()
            self._sync()

    def _sync(self) -> None:
        try:
            if self._dir.deferred is not None:
                self._dir.deferred.run()
            if self._log_unsynced:
                _fs.fsync(self._dir.log_fd)
        except OSError as exc:
            raise self._dir.store_error(f"fsync deferred writes ({LOG_NAME}, bodies)", exc) from exc
        self._log_unsynced = False

    def read_log(self) -> list[LogRecord]:
        """Every valid log record in order, read in one pass without touching any body."""
        with self._mutex:
            self._check_open()
            try:
                data = _fs.read(self._dir.log_fd)
            except OSError as exc:
                raise self._dir.store_error(f"read {LOG_NAME}", exc) from exc
        return decode_log(data, source=os.path.join(self._dir.path, LOG_NAME))

    def read_meta(self) -> dict[str, Any]:
        """The session metadata; ``{}`` if none was written."""
        with self._mutex:
            self._check_open()
            try:
                fd = _fs.open_fd(META_NAME, READ_FLAGS, dir_fd=self._dir.dir_fd)
            except FileNotFoundError:
                return {}
            except OSError as exc:
                raise self._dir.store_error(f"open {META_NAME}", exc, name=META_NAME) from exc
            try:
                if not stat.S_ISREG(_fs.stat(fd).st_mode):
                    raise StoreError(
                        f"{META_NAME} in session {self._dir.path} is not a regular file"
                    )
                data = _fs.read(fd)
            except OSError as exc:
                raise self._dir.store_error(f"read {META_NAME}", exc) from exc
            finally:
                self._dir.close_quietly(fd)
        return decode_meta(data, self._dir.path)

    def read_sidecar(self, name: str) -> bytes | None:
        """The bytes of sidecar ``name`` (one of ``SIDECAR_NAMES``); None if there is none.

        The reader validates what it gets: a sidecar is written without fsync, so after a crash
        it may be torn, empty or older than the log (``spill._sidecars``).
        """
        with self._mutex:
            self._check_open()
            return self._sidecars.read(name)

    def write_sidecar(self, name: str, data: bytes) -> None:
        """Replace sidecar ``name`` (one of ``SIDECAR_NAMES``) by ``data`` (temp file, rename).

        Not fsync'd: a sidecar is a cache its reader checks, never a decision's dependency, so
        it is not worth a journal commit on the request path.
        """
        with self._mutex:
            self._check_open()
            self._sidecars.replace(name, data)

    def overwrite_sidecar(self, name: str, data: bytes) -> None:
        """Write ``data`` over the first bytes of sidecar ``name`` in place, in one ``write()``:
        no rename, no fsync, and without the store's mutex, so a :meth:`sync` holding it for its
        fsyncs in another thread does not hold this up. Bytes shorter than the file leave its
        tail, and a power loss may tear them: the reader's format must tell (``spill._sidecars``).
        """
        self._sidecars.overwrite(name, data)

    def write_meta(self, meta: Mapping[str, Any]) -> None:
        """Replace the session metadata atomically (temp file, fsync, rename)."""
        data = encode_meta(meta)
        with self._mutex:
            self._check_open()
            self._dir.write_atomic(self._dir.dir_fd, META_NAME, data, META_NAME)

    def close(self) -> None:
        """Release the lock and every descriptor; idempotent."""
        with self._mutex:
            if self._closed:
                return
            self._closed = True
            self._sidecars.close()
            try:
                self._sync()
            finally:
                error = self._dir.close_fds()
        if error is not None:
            raise self._dir.store_error("close the session", error) from error
        events().debug("toolbudget.spill.closed", path=self._dir.path)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"the store for session {self._dir.path} is closed")

    def __del__(self) -> None:
        if getattr(self, "_closed", True):
            return
        warnings.warn(
            f"LocalStore for {self._dir.path} was not closed", ResourceWarning, stacklevel=2
        )
        self._closed = True
        self._dir.close_fds()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"LocalStore({self._dir.path!r}, {state})"
