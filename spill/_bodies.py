"""The bodies on disk: their total against the quota, the packs, and ``put_many``'s group commit.

The total is counted on first need (resuming a session must stay fast with 10,000 bodies on
disk), and each new body is checked against the quota before anything is written. A group
commit writes its new bodies into one pack (``spill._packs``) when there are at least
``_PACK_MIN`` of them, else (and for a body whose file path an envelope names) one file each,
the shards concurrently (``_GROUP_THREADS``), in :meth:`spill.LocalStore.put`'s steps and order.
"""

from __future__ import annotations

import re
import stat
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import ClassVar, Final, TypeVar

import xxhash

from spill import _fs
from spill._errors import QuotaExceeded, StoreError
from spill._packs import PackIndex, encode_pack, pack_chunks, read_copies, read_located
from spill._sessiondir import (
    BODIES_NAME,
    BODY_SUFFIX,
    DIR_FLAGS,
    SessionDir,
)
from spill._store import REF_RE, PutResult, encode_text, events

__all__ = ["Bodies"]

_R = TypeVar("_R")

_SHARD_RE: Final = re.compile(r"\A[0-9a-f]{2}\Z")
_GROUP_THREADS: Final = 16
"""Most shards a group commit works on at once. Each creates, writes and fsyncs its bodies,
renames them and fsyncs its directory in its own thread: concurrent fsyncs on one filesystem
share its journal commits and the device's cache flushes, and the creates' waits on the journal
and on inode-table reads overlap (measured by ``python -m benchmarks perf``: docs/performance.md's
Performance section)."""


_PACK_MIN: Final = 2
"""Fewest new bodies a group commit packs into one file: two already save a create and an
fsync, and a lone body stays a file of its own, as :meth:`spill.LocalStore.put` writes it."""


@dataclass(slots=True)
class _Body:
    """One new body of a group commit: its bytes, the size it replaces, and how it ended."""

    ref: str
    data: bytes
    old_size: int
    placed: bool = False
    """Renamed into place (complete, and counted in the bodies' total whatever happens next)."""
    error: StoreError | None = None


class Bodies(SessionDir):
    """The session's bodies: counted, checked against the quota, written as one group."""

    _pack_min: ClassVar[int] = _PACK_MIN
    _quota: int | None
    _total: int | None
    _packs: PackIndex
    _packs_loaded: bool
    _named: set[str]
    """Refs stored as files of their own, never packed: those whose file path :meth:`path_of`
    has given out (an envelope may name it, so the path holds the body once it is stored), and
    those whose packed copy is damaged (see :meth:`_in_pack`)."""

    def _pack_index(self, names: list[str] | None = None) -> PackIndex:
        """The packs' index, read on first need (from ``names``, bodies/'s listing, if given)."""
        if not self._packs_loaded:
            try:
                self._packs.load(self._bodies_fd, self._path, names)
            except OSError as exc:
                raise self._error(f"list {BODIES_NAME}", exc) from exc
            self._packs_loaded = True
        return self._packs

    def _in_pack(self, ref: str, data: bytes | memoryview) -> bool:
        """Whether ``ref``'s body is packed as exactly ``data`` and no one was given a file path
        for it.

        The packed bytes are read and compared, not only looked up: a pack's name checks its
        index, never its bodies, so a pack planted or changed behind our back could list a ref
        whose bytes are not its text, and a decision must not be logged against it. A copy that
        differs is reported and the ref is stored as a file of its own from then on (a read
        tries the file first).
        """
        if ref in self._named:
            return False
        copies = self._pack_index().copies(ref)
        if not copies:
            return False
        reason = "its bytes are not the body's"
        for where in copies:
            try:
                if where.length == len(data) and read_located(self._bodies_fd, where) == data:
                    return True
            except (OSError, ValueError) as exc:
                reason = str(exc)
        events().warning(
            "toolbudget.spill.packed_damaged",
            path=self._path,
            ref=ref,
            pack=copies[0].pack,
            reason=reason,
        )
        self._named.add(ref)
        return False

    def _read_packed(self, ref: str) -> bytes | None:
        """The packed bytes of ``ref`` (checked by the caller against it), None if not packed."""
        copies = self._pack_index().copies(ref)
        if not copies:
            return None
        try:
            return read_copies(self._bodies_fd, copies, ref)
        except OSError as exc:
            raise self._error(f"read {ref}'s pack in {BODIES_NAME}", exc) from exc
        except ValueError as exc:
            raise StoreError(f"cannot read body {ref} in session {self._path}: {exc}") from None

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
        names = self._clean_temps(self._bodies_fd, BODIES_NAME)
        total = self._pack_index(names).body_bytes()
        for shard in names:
            if not _SHARD_RE.match(shard):
                continue
            try:
                shard_fd = _fs.open_fd(shard, DIR_FLAGS, dir_fd=self._bodies_fd)
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
        for name in self._clean_temps(shard_fd, f"{BODIES_NAME}/{shard}"):
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
            if self._in_pack(ref, datas[where[0]]):
                continue  # durable in a pack already (bodies/ is synced below)
            try:
                body = self._group_check(ref, datas[where[0]], shards, new)
            except StoreError as exc:
                fail(ref, exc)
                continue
            if body is None:
                found.setdefault(ref[:2], []).append(ref)
            else:
                new.setdefault(ref[:2], []).append(body)
        self._commit_pack(new)
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

    def _commit_pack(self, new: dict[str, list[_Body]]) -> None:
        """Write the group's new bodies into one pack, taking them out of ``new``, when there are
        ``_pack_min`` of them; a body replacing a damaged file or whose path was given out stays.
        A group too large for one pack's index (``spill._packs.pack_chunks``) takes several.

        Each pack is written as a body is (temp file, fsync, rename); ``bodies/`` is fsync'd
        before put_many returns. If the pack cannot be written (a full disk, say), its bodies
        go back to ``new`` and are written one file each, so each fails or succeeds on its own.
        """
        bodies = [
            b
            for group in new.values()
            for b in group
            if not b.old_size and b.ref not in self._named
        ]
        if len(bodies) < self._pack_min:
            return
        for shard in list(new):
            new[shard] = [b for b in new[shard] if b.old_size or b.ref in self._named]
            if not new[shard]:
                del new[shard]
        for chunk in pack_chunks(bodies):
            self._write_pack(chunk, new)

    def _write_pack(self, bodies: Sequence[_Body], new: dict[str, list[_Body]]) -> None:
        """Write ``bodies`` as one pack; on failure put them back in ``new`` (one file each)."""
        name, data, where = encode_pack([(b.ref, b.data) for b in bodies])
        try:
            self._write_atomic(
                self._bodies_fd, name, data, f"pack {BODIES_NAME}/{name}", sync_dir=False
            )
        except StoreError as exc:
            events().warning(
                "toolbudget.spill.pack_failed", path=self._path, bodies=len(bodies), error=str(exc)
            )
            for body in bodies:
                new.setdefault(body.ref[:2], []).append(body)
            return
        self._bodies_synced = False  # the pack's entry in bodies/: synced before we return
        self._packs.add(name, where)
        for body in bodies:
            body.placed = True

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
