"""The bodies on disk: their total against the quota, the packs, and ``put_many``'s group commit.

The total is counted on first need (resuming a session must stay fast with 10,000 bodies on
disk), and each new body is checked against the quota before anything is written. A group
commit writes its new bodies into one pack (``spill._packs``) when there are at least
``PACK_MIN`` of them, else (and for a body whose file path an envelope names) one file each,
the shards concurrently (``spill._group``), in :meth:`spill.LocalStore.put`'s steps and order.
"""

from __future__ import annotations

import re
import stat
from collections.abc import Sequence
from functools import partial
from typing import Final, TypeVar

from spill import _fs
from spill._errors import QuotaExceeded, StoreError
from spill._group import NewBody, commit_shard, run_all
from spill._packs import PackIndex, encode_pack, pack_chunks, read_copies, read_located
from spill._sessiondir import (
    BODIES_NAME,
    BODY_SUFFIX,
    DIR_FLAGS,
    SessionDir,
)
from spill._store import REF_RE, PutResult, events

__all__ = ["PACK_MIN", "Bodies"]

_R = TypeVar("_R")

_SHARD_RE: Final = re.compile(r"\A[0-9a-f]{2}\Z")
PACK_MIN: Final = 2
"""Fewest new bodies a group commit packs into one file: two already save a create and an
fsync, and a lone body stays a file of its own, as :meth:`spill.LocalStore.put` writes it."""


class Bodies:
    """The session's bodies: counted, checked against the quota, written as one group.

    A part of :class:`spill.LocalStore`, which calls it under its mutex once it knows the store
    is open; the files are the session directory's (:class:`spill._sessiondir.SessionDir`).
    """

    def __init__(self, directory: SessionDir, quota: int | None, pack_min: int) -> None:
        self._dir = directory
        self._quota = quota
        self._pack_min = pack_min
        self._total: int | None = None  # bodies' bytes, counted on first need
        self._packs = PackIndex()
        self._packs_loaded = False
        self._named: set[str] = set()
        """Refs stored as files of their own, never packed: those whose file path
        :meth:`spill.LocalStore.path_of` has given out (an envelope may name it, so the path
        holds the body once it is stored), and those whose packed copy is damaged (see
        :meth:`in_pack`)."""

    @property
    def quota(self) -> int | None:
        """The most bytes of bodies the session may hold (None: no limit)."""
        return self._quota

    @property
    def counted(self) -> bool:
        """Whether the bodies' total is counted yet (it is on first need)."""
        return self._total is not None

    def set_total(self, total: int) -> None:
        """The bodies' running total is now ``total`` (a body written or failed by the store)."""
        self._total = total

    def recount(self) -> None:
        """Count the bodies again (one changed behind our back: the running total is stale)."""
        self._total = self._scan_bodies()

    def packed(self, ref: str) -> bool:
        """Whether a pack lists ``ref`` (its bytes unchecked: see :meth:`in_pack`)."""
        return self._pack_index().get(ref) is not None

    def name(self, ref: str) -> None:
        """``ref``'s file path was given out: store it as a file of its own from now on."""
        self._named.add(ref)

    def _pack_index(self, names: list[str] | None = None) -> PackIndex:
        """The packs' index, read on first need (from ``names``, bodies/'s listing, if given)."""
        if not self._packs_loaded:
            try:
                self._packs.load(self._dir.bodies_fd, self._dir.path, names)
            except OSError as exc:
                raise self._dir.store_error(f"list {BODIES_NAME}", exc) from exc
            self._packs_loaded = True
        return self._packs

    def in_pack(self, ref: str, data: bytes | memoryview) -> bool:
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
                if where.length == len(data) and read_located(self._dir.bodies_fd, where) == data:
                    return True
            except (OSError, ValueError) as exc:
                reason = str(exc)
        events().warning(
            "toolbudget.spill.packed_damaged",
            path=self._dir.path,
            ref=ref,
            pack=copies[0].pack,
            reason=reason,
        )
        self._named.add(ref)
        return False

    def read_packed(self, ref: str) -> tuple[bytes, str] | None:
        """The packed bytes of ``ref`` (checked by the caller against it) and the name of their
        pack, None if not packed."""
        copies = self._pack_index().copies(ref)
        if not copies:
            return None
        try:
            return read_copies(self._dir.bodies_fd, copies, ref)
        except OSError as exc:
            raise self._dir.store_error(f"read {ref}'s pack in {BODIES_NAME}", exc) from exc
        except ValueError as exc:
            raise StoreError(f"cannot read body {ref} in session {self._dir.path}: {exc}") from None

    def total(self) -> int:
        """The running total of body bytes, scanning the bodies the first time it is needed.

        Not scanned on open: resuming a session (open + read_log) must stay fast with 10,000
        bodies on disk, and only put() and the quota need the figure.
        """
        if self._total is None:
            self._total = self._scan_bodies()
        return self._total

    def _scan_bodies(self) -> int:
        """Total size of the stored bodies; removes temp files left by a crash."""
        names = self._dir.clean_temps(self._dir.bodies_fd, BODIES_NAME)
        total = self._pack_index(names).body_bytes()
        for shard in names:
            if not _SHARD_RE.match(shard):
                continue
            try:
                shard_fd = _fs.open_fd(shard, DIR_FLAGS, dir_fd=self._dir.bodies_fd)
            except OSError as exc:
                events().warning(
                    "toolbudget.spill.shard_skipped",
                    path=self._dir.path,
                    shard=shard,
                    reason=self._dir.store_error(
                        "open", exc, name=shard, parent_fd=self._dir.bodies_fd
                    ).args[0],
                )
                continue
            try:
                total += self._scan_shard(shard_fd, shard)
            finally:
                self._dir.close_quietly(shard_fd)
        return total

    def _scan_shard(self, shard_fd: int, shard: str) -> int:
        total = 0
        for name in self._dir.clean_temps(shard_fd, f"{BODIES_NAME}/{shard}"):
            if not (name.endswith(BODY_SUFFIX) and name.startswith(shard)):
                continue
            if not REF_RE.match(name[: -len(BODY_SUFFIX)]):
                continue
            try:
                st = _fs.stat(name, dir_fd=shard_fd)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise self._dir.store_error(f"inspect {BODIES_NAME}/{shard}/{name}", exc) from exc
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
        return total

    def size_mismatch(self, ref: str, size: int, expected: int) -> None:
        events().warning(
            "toolbudget.spill.size_mismatch",
            path=self._dir.path,
            ref=ref,
            size=size,
            expected=expected,
        )

    def check_quota(self, size: int, new_total: int) -> None:
        """QuotaExceeded when storing ``size`` more bytes brings the bodies to ``new_total``."""
        if self._quota is not None and new_total > self._quota:
            raise QuotaExceeded(
                f"storing a body of {size} bytes would bring session {self._dir.path} "
                f"to {new_total} bytes of bodies, above its quota of {self._quota} bytes"
            )

    def put(self, ref: str, data: bytes | memoryview) -> None:
        """Store body ``ref`` (``data``) as its own file, durable on return (``LocalStore.put``,
        under the store's mutex); a body packed or stored already is only made durable again."""
        name = ref + BODY_SUFFIX
        if self.in_pack(ref, data):
            self._dir.sync_bodies()  # a pack renamed by a process killed before its fsync
            return
        shard = ref[:2]
        shard_fd = self._dir.open_shard(shard, create=False)
        try:
            existing = None
            if shard_fd is not None:
                existing = self._dir.stat_body(shard_fd, ref)
                if existing is not None and existing.st_size == len(data):
                    # Maybe renamed into place by a process killed before its fsyncs: the
                    # decision about to be logged must not outlive its directory entry.
                    self._dir.sync_entries(shard_fd, ref)
                    return
                if existing is not None:
                    self.size_mismatch(ref, existing.st_size, len(data))
                    # Changed behind our back, so our running total is stale too.
                    self.recount()
            old_size = existing.st_size if existing is not None else 0
            new_total = self.total() - old_size + len(data)
            self.check_quota(len(data), new_total)
            if shard_fd is None:
                shard_fd = self._dir.open_shard(shard, create=True)
                assert shard_fd is not None
            try:
                self._dir.write_atomic(shard_fd, name, data, f"body {self._dir.body_rel(ref)}")
            except BaseException:
                # A failed final directory fsync leaves the (complete) body in place.
                self._total = new_total - len(data) + self._dir.size_or_zero(shard_fd, name)
                raise
            self._total = new_total
            self._dir.sync_bodies()
        finally:
            if shard_fd is not None:
                self._dir.close_quietly(shard_fd)

    def group_commit(
        self, slots: dict[str, list[int]], datas: list[bytes], out: list[PutResult]
    ) -> None:
        """:meth:`spill.LocalStore.put_many`'s work, under the store's mutex: each new body
        of ``datas`` stored (``slots``: where each ref is in ``out``) or its StoreError in ``out``.
        """
        shards: dict[str, int] = {}
        try:
            self._group_commit(slots, datas, out, shards)
        finally:
            for fd in shards.values():
                self._dir.close_quietly(fd)

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
            self.total()
        except StoreError as exc:
            for ref in slots:
                fail(ref, exc)
            return
        new: dict[str, list[NewBody]] = {}
        found: dict[str, list[str]] = {}  # already stored: their entries are synced again
        for ref, where in slots.items():
            if self.in_pack(ref, datas[where[0]]):
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
        if not self._dir.fsync:
            work = list(new)
        if any(shard not in shards for shard in work):
            self._dir.entry_added()  # a new shard's entry in bodies/ is synced below
        tasks = [
            partial(commit_shard, self._dir, shard, shards.get(shard), new.get(shard, []))
            for shard in work
        ]
        dir_errors = run_all(tasks, concurrent=self._dir.fsync and self._dir.deferred is None)
        for shard, dir_error in zip(work, dir_errors, strict=True):
            for body in new.get(shard, []):
                if not body.placed:
                    self._total = self.total() - len(body.data) + body.old_size
                if body.error is not None:
                    fail(body.ref, body.error)
            if dir_error is not None:
                for ref in found.get(shard, []):
                    fail(ref, dir_error)
        if self._dir.fsync and any(isinstance(r, str) for r in out):
            try:
                self._dir.sync_bodies()
            except StoreError as exc:
                for ref in slots:
                    fail(ref, exc)

    def _commit_pack(self, new: dict[str, list[NewBody]]) -> None:
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

    def _write_pack(self, bodies: Sequence[NewBody], new: dict[str, list[NewBody]]) -> None:
        """Write ``bodies`` as one pack; on failure put them back in ``new`` (one file each)."""
        name, data, where = encode_pack([(b.ref, b.data) for b in bodies])
        try:
            self._dir.write_atomic(
                self._dir.bodies_fd, name, data, f"pack {BODIES_NAME}/{name}", sync_dir=False
            )
        except StoreError as exc:
            events().warning(
                "toolbudget.spill.pack_failed",
                path=self._dir.path,
                bodies=len(bodies),
                error=str(exc),
            )
            for body in bodies:
                new.setdefault(body.ref[:2], []).append(body)
            return
        self._dir.entry_added()  # the pack's entry in bodies/: synced before we return
        self._packs.add(name, where)
        for body in bodies:
            body.placed = True

    def _group_check(
        self, ref: str, data: bytes, shards: dict[str, int], new: dict[str, list[NewBody]]
    ) -> NewBody | None:
        """Check one body of a group against the quota; None if it is stored already.

        Its size counts toward the running total from here on, so the next bodies of the group
        are checked against the quota with it.
        """
        shard = ref[:2]
        shard_fd = shards.get(shard)
        if shard_fd is None and shard not in new:
            shard_fd = self._dir.open_shard(shard, create=False)
            if shard_fd is not None:
                shards[shard] = shard_fd
        existing = self._dir.stat_body(shard_fd, ref) if shard_fd is not None else None
        if existing is not None and existing.st_size == len(data):
            return None
        if existing is not None:
            self.size_mismatch(ref, existing.st_size, len(data))
            # Changed behind our back: recounted (no temp file of this group exists yet), plus
            # the group's bodies checked so far.
            waiting = sum(len(b.data) - b.old_size for bodies in new.values() for b in bodies)
            self._total = self._scan_bodies() + waiting
        old_size = existing.st_size if existing is not None else 0
        new_total = self.total() - old_size + len(data)
        self.check_quota(len(data), new_total)
        self._total = new_total
        return NewBody(ref, data, old_size)
