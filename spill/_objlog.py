"""An fsspec session's decision log: a sequence of immutable objects, each created once, rolled
up into snapshots.

``append_log`` creates the next sequence number with a conditional create (``If-None-Match:
*``); a writer that loses the race is refused from then on (see :mod:`spill._fsspec`). Every
:data:`~spill._objsnap.ROLLUP_OBJECTS` appends the writer, under its mutex and only after its
own create succeeded (so it holds the tip of the log), writes a snapshot of the log so far
(:mod:`spill._objsnap`), reads it back, and collects what the snapshot *before* it covers: a
reader that listed the log before the new snapshot existed reads the previous snapshot and the
objects after it, and all of those are kept. A reader whose listing is older still (it slept
through a whole roll-up period between listing and fetching) finds an object gone and lists
again. Resume is then one LIST, and one concurrent fetch of the newest snapshot and at most
``ROLLUP_OBJECTS`` appends, whatever the session's age.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from typing import Final

from spill._errors import SessionLocked, StoreError
from spill._objfs import (
    LOG_DIR,
    SEQ_DIGITS,
    ObjectSession,
    delete_exact,
    fetch_exact,
    missing_bucket,
)
from spill._objsnap import (
    ROLLUP_OBJECTS,
    SNAPSHOT_RE,
    SNAPSHOT_SUFFIX,
    encode_snapshot,
    parse_snapshot,
)
from spill._store import events

_LOG_NAME_RE: Final = re.compile(r"\A([0-9]{12})\.jsonl\Z")
_READ_ATTEMPTS: Final = 3
"""Listings a read takes at most: a second one only when an object listed by the first was
collected by a roll-up meanwhile, which a third cannot meet unless the reader stalls again."""


_RETRY_AFTER: Final = ROLLUP_OBJECTS // 4
"""Appends after a failed roll-up before the next try."""


@dataclass(frozen=True, slots=True)
class Listing:
    """What log/ held when listed: log sequence numbers and snapshots (by ``through``), sorted."""

    seqs: tuple[int, ...]
    snapshots: tuple[int, ...]

    @property
    def next_seq(self) -> int:
        """The next sequence number to create."""
        return max((*self.seqs[-1:], *self.snapshots[-1:]), default=-1) + 1


class _Vanished(Exception):
    """An object the listing named was gone when fetched: collected by a roll-up meanwhile."""


class ObjectLog:
    """The log of :class:`spill.FsspecStore`: append, roll up, read back.

    A part of the store, called under its mutex once it knows the store is open; the objects
    are named and read through the session's :class:`spill._objfs.ObjectSession`.
    """

    def __init__(self, objects: ObjectSession) -> None:
        self._objects = objects
        self._locked_out = False
        self._tried: list[bytes] = []
        """Every payload a failed create at ``_next_seq`` sent: one of them may have landed."""
        self._body: bytearray | None = None
        """The log's bytes through ``_through`` as a full read joins them, once read or written."""
        self._through = -1
        # Listed before the store makes its cache: a missing bucket refuses the open.
        listing = self.scan()
        self._next_seq = listing.next_seq
        self._snapshot = listing.snapshots[-1] if listing.snapshots else -1
        """``through`` of the newest valid snapshot this store read or wrote (-1: none)."""
        self._due = self._snapshot + ROLLUP_OBJECTS
        """The sequence number whose append rolls the log up next."""

    @property
    def snapshot(self) -> int:
        """``through`` of the newest valid snapshot this store read or wrote (-1: none)."""
        return self._snapshot

    def append(self, payload: bytes) -> None:
        """Create the next log object with ``payload`` (a conditional create; see module), and
        roll the log up when it is due; SessionLocked once another writer took a number."""
        if self._locked_out:
            raise self._locked(self._next_seq)
        self._create_next(payload)
        if self._next_seq - 1 >= self._due:
            self._roll_up(self._next_seq - 1)

    def read(self) -> bytes:
        """The whole log's bytes: the newest valid snapshot and the log objects after it."""
        self._read_all()
        return bytes(self._body or b"")

    def _create_next(self, payload: bytes) -> None:
        """Create ``payload`` at the next sequence number; SessionLocked if another writer has it.

        A create whose reply was lost may have landed: its payload is remembered, and the next
        create at that number that finds it taken by exactly one of those payloads knows the
        object for its own (a retried PUT meets a 412 the same way). The lines of ours already
        there are then left out and the rest goes to the next number: the caller re-sends what a
        failed append could not confirm, and a line written twice is only a duplicate the reader
        skips, but it is not written twice (issue 31).
        """
        while payload:
            seq = self._next_seq
            key = self._objects.log_key(seq)
            stored = payload
            try:
                self._objects.fs.pipe_file(key, payload, mode="create")
            except FileExistsError:
                existing = self._objects.existing(key)
                if existing is None or (existing != payload and existing not in self._tried):
                    self._locked_out = True
                    raise self._locked(seq) from None
                stored, payload = existing, _lines_not_in(payload, existing)
            except Exception as exc:
                self._tried.append(payload)
                raise self._objects.store_error(
                    f"create log object {self._objects.log_rel(seq)}", exc
                ) from exc
            else:
                payload = b""
            self._tried = []
            self._next_seq = seq + 1
            if self._body is not None and self._through == seq - 1:
                self._body += _closed(stored)
                self._through = seq

    def _read_all(self) -> None:
        """Set ``_body`` to the whole log's bytes (``_through``, ``_snapshot`` with it)."""
        for attempt in range(1, _READ_ATTEMPTS + 1):
            listing = self.scan()
            try:
                self._read_listed(listing, last=attempt == _READ_ATTEMPTS)
            except _Vanished:
                continue
            return

    def _read_listed(self, listing: Listing, *, last: bool) -> None:
        """Read the newest valid snapshot of ``listing`` and the objects after it."""
        fetched: dict[str, bytes | BaseException] = {}
        base, start, newest = b"", 0, -1
        for through in sorted(listing.snapshots, reverse=True):
            wanted = [self.snapshot_key(through)]
            wanted += [self._objects.log_key(s) for s in listing.seqs if s > through]
            self._fetch_into(fetched, wanted)
            data = fetched[wanted[0]]
            found = parse_snapshot(data, through) if isinstance(data, bytes) else None
            if isinstance(found, bytes):
                base, start, newest = found, through + 1, through
                break
            if isinstance(data, FileNotFoundError) and not last:
                raise _Vanished
            reason = found if isinstance(found, str) else "gone when fetched"
            events().warning(
                "toolbudget.log.snapshot_skipped",
                source=self._objects.url,
                object=self._snapshot_rel(through),
                reason=reason,
            )
        tail = [s for s in listing.seqs if s >= start]
        self._fetch_into(fetched, [self._objects.log_key(s) for s in tail])
        parts = [base]
        expected = start
        for seq in tail:
            if seq != expected:
                events().warning(
                    "toolbudget.log.object_missing",
                    source=self._objects.url,
                    first=self._objects.log_rel(expected),
                    count=seq - expected,
                )
            expected = seq + 1
            data = fetched[self._objects.log_key(seq)]
            if isinstance(data, bytes):
                parts.append(_closed(data))
                continue
            if not last:
                raise _Vanished
            events().warning(
                "toolbudget.log.object_skipped",
                source=self._objects.url,
                object=self._objects.log_rel(seq),
                reason="listed but gone when fetched",
            )
        self._body = bytearray(b"".join(parts))
        self._through = max(listing.next_seq - 1, start - 1)
        self._snapshot = newest
        self._due = newest + ROLLUP_OBJECTS

    def _fetch_into(self, fetched: dict[str, bytes | BaseException], keys: list[str]) -> None:
        """Fetch the keys not fetched yet, concurrently; a failure other than a missing object
        (the client's retries used up) is a StoreError."""
        todo = [key for key in keys if key not in fetched]
        try:
            got = fetch_exact(self._objects.fs, todo)
        except Exception as exc:
            raise self._objects.store_error("read the log objects", exc) from exc
        for key, data in zip(todo, got, strict=True):
            if isinstance(data, BaseException) and not isinstance(data, FileNotFoundError):
                raise self._objects.store_error(f"read {key[len(self._objects.root) + 1 :]}", data)
            fetched[key] = data

    def _roll_up(self, through: int) -> None:
        """Write the snapshot through ``through``, verify it, collect what the previous one
        covers. Best effort: the appends are durable already, so a failure only warns (a later
        append tries again) and never collects anything."""
        try:
            if self._body is None or self._through != through:
                self._read_all()
            if self._through != through or self._body is None:
                return  # another writer appended meanwhile: its own roll-ups are its business
            if through < self._due:
                return  # the read found a snapshot this store did not know of
            key = self.snapshot_key(through)
            # Taken already: a retried PUT of ours, or the same bytes from a stale writer; the
            # read-back below tells.
            with contextlib.suppress(FileExistsError):
                self._objects.fs.pipe_file(
                    key, encode_snapshot(through, bytes(self._body)), mode="create"
                )
            [data] = fetch_exact(self._objects.fs, [key])
            found = parse_snapshot(data, through) if isinstance(data, bytes) else str(data)
            if not isinstance(found, bytes):
                raise StoreError(f"snapshot {self._snapshot_rel(through)} is not valid: {found}")
            previous, self._snapshot = self._snapshot, through
            self._due = through + ROLLUP_OBJECTS
            if previous >= 0:
                self._collect(previous)
        except Exception as exc:
            # Tried again a few appends later, not at every one: each try sends the whole log.
            self._due = through + _RETRY_AFTER
            events().warning(
                "toolbudget.log.snapshot_failed",
                source=self._objects.url,
                object=self._snapshot_rel(through),
                error=str(exc),
            )

    def _collect(self, previous: int) -> None:
        """Delete the log objects ``previous`` covers and the snapshots before it; never the
        objects after it, which a reader that listed before the newest snapshot still reads."""
        listing = self.scan()
        keys = [self._objects.log_key(s) for s in listing.seqs if s <= previous]
        keys += [self.snapshot_key(t) for t in listing.snapshots if t < previous]
        if keys:
            delete_exact(self._objects.fs, keys)

    def _snapshot_rel(self, through: int) -> str:
        return f"{LOG_DIR}/{through:0{SEQ_DIGITS}d}{SNAPSHOT_SUFFIX}"

    def snapshot_key(self, through: int) -> str:
        return self._objects.key(self._snapshot_rel(through))

    def _locked(self, seq: int) -> SessionLocked:
        return SessionLocked(
            f"session {self._objects.url} has another writer: log object {self._objects.log_rel(seq)} was "
            "created by it first. A session can be written from one place at a time; reopen "
            "the session to continue from what the other writer logged."
        )

    def scan(self) -> Listing:
        """List log/: its objects and snapshots (one LIST; paginated past 1,000 names)."""
        try:
            names = self._objects.fs.ls(self._objects.key(LOG_DIR), detail=False)
        except FileNotFoundError as exc:
            if missing_bucket(exc):
                # A session that could persist nothing must not open (issue 31).
                raise StoreError(
                    f"cannot open session {self._objects.url}: its bucket does not exist "
                    f"({exc}); create the bucket or correct the URL"
                ) from None
            return Listing((), ())
        except Exception as exc:
            raise self._objects.store_error(f"list {LOG_DIR}/", exc) from exc
        seqs: list[int] = []
        snapshots: list[int] = []
        for name in names:
            base = str(name).rstrip("/").rsplit("/", 1)[-1]
            if match := _LOG_NAME_RE.match(base):
                seqs.append(int(match.group(1)))
            elif match := SNAPSHOT_RE.match(base):
                snapshots.append(int(match.group(1)))
        return Listing(tuple(sorted(seqs)), tuple(sorted(snapshots)))


def _closed(data: bytes) -> bytes:
    """An object's bytes as a full read joins them: a newline closes the last line."""
    return data if data.endswith(b"\n") else data + b"\n"


def _lines_not_in(payload: bytes, existing: bytes) -> bytes:
    """The lines of ``payload`` that ``existing`` does not hold, in order."""
    have = set(existing.split(b"\n"))
    return b"".join(line + b"\n" for line in payload.split(b"\n") if line and line not in have)
