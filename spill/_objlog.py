"""An fsspec session's decision log: a sequence of immutable objects, each created once.

``append_log`` creates the next sequence number with a conditional create (``If-None-Match:
*``); a writer that loses the race is refused from then on (see :mod:`spill._fsspec`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from spill._errors import SessionLocked, StoreError
from spill._log import decode_log, encode_records
from spill._objfs import LOG_DIR, ObjectSession, fetch_exact, missing_bucket
from spill._store import LogRecord, events

_LOG_NAME_RE: Final = re.compile(r"\A([0-9]{12})\.jsonl\Z")


class ObjectLog(ObjectSession):
    """The log layer of :class:`spill.FsspecStore`: append, read back, and the next number."""

    _locked_out: bool
    _next_seq: int
    _tried: list[bytes]
    """Every payload a failed create at ``_next_seq`` sent: one of them may have landed."""

    def append_log(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Create the next log object with these records (a conditional create; see module)."""
        payload = encode_records(records)
        if not payload:
            return
        with self._mutex:
            self._check_open()
            if self._locked_out:
                raise self._locked(self._next_seq)
            self._create_next(payload)

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
            key = self._log_key(seq)
            try:
                self._fs.pipe_file(key, payload, mode="create")
            except FileExistsError:
                existing = self._existing(key)
                if existing is None or (existing != payload and existing not in self._tried):
                    self._locked_out = True
                    raise self._locked(seq) from None
                payload = _lines_not_in(payload, existing)
            except Exception as exc:
                self._tried.append(payload)
                raise self._error(f"create log object {self._log_rel(seq)}", exc) from exc
            else:
                payload = b""
            self._tried = []
            self._next_seq = seq + 1

    def read_log(self) -> list[LogRecord]:
        """Every valid record in order: the log objects listed, fetched and read in sequence.

        A missing sequence number (an object deleted, or a writer that died between choosing
        the number and its PUT) and an unreadable object are skipped with a warning; damaged
        lines inside an object are skipped as in a local log.
        """
        with self._mutex:
            self._check_open()
            seqs, _ = self._scan_log_names()
            keys = [self._log_key(seq) for seq in seqs]
            try:
                fetched = dict(zip(keys, fetch_exact(self._fs, keys), strict=True))
            except Exception as exc:
                raise self._error("read the log objects", exc) from exc
        parts: list[bytes] = []
        expected = 0
        for seq, key in zip(seqs, keys, strict=True):
            if seq != expected:
                events().warning(
                    "toolbudget.log.object_missing",
                    source=self._url,
                    first=self._log_rel(expected),
                    count=seq - expected,
                )
            expected = seq + 1
            data = fetched.get(key)
            if not isinstance(data, bytes | bytearray):
                events().warning(
                    "toolbudget.log.object_skipped",
                    source=self._url,
                    object=self._log_rel(seq),
                    reason=str(data) if data is not None else "not returned",
                )
                continue
            parts.append(bytes(data) if data.endswith(b"\n") else bytes(data) + b"\n")
        return decode_log(b"".join(parts), source=f"{self._url}/{LOG_DIR}")

    def _locked(self, seq: int) -> SessionLocked:
        return SessionLocked(
            f"session {self._url} has another writer: log object {self._log_rel(seq)} was "
            "created by it first. A session can be written from one place at a time; reopen "
            "the session to continue from what the other writer logged."
        )

    def _scan_log_names(self) -> tuple[list[int], int]:
        """The sequence numbers present in log/, sorted, and the next one to create."""
        try:
            names = self._fs.ls(self._key(LOG_DIR), detail=False)
        except FileNotFoundError as exc:
            if missing_bucket(exc):
                # A session that could persist nothing must not open (issue 31).
                raise StoreError(
                    f"cannot open session {self._url}: its bucket does not exist "
                    f"({exc}); create the bucket or correct the URL"
                ) from None
            return [], 0
        except Exception as exc:
            raise self._error(f"list {LOG_DIR}/", exc) from exc
        seqs = sorted(
            int(match.group(1))
            for name in names
            if (match := _LOG_NAME_RE.match(str(name).rstrip("/").rsplit("/", 1)[-1]))
        )
        return seqs, (seqs[-1] + 1 if seqs else 0)


def _lines_not_in(payload: bytes, existing: bytes) -> bytes:
    """The lines of ``payload`` that ``existing`` does not hold, in order."""
    have = set(existing.split(b"\n"))
    return b"".join(line + b"\n" for line in payload.split(b"\n") if line and line not in have)
