"""An fsspec session's decision log: a sequence of immutable objects, each created once.

``append_log`` creates the next sequence number with a conditional create (``If-None-Match:
*``); a writer that loses the race is refused from then on (see :mod:`spill._fsspec`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from spill._errors import SessionLocked
from spill._log import decode_log, encode_records
from spill._objfs import LOG_DIR, ObjectSession
from spill._store import LogRecord, events

_LOG_NAME_RE: Final = re.compile(r"\A([0-9]{12})\.jsonl\Z")


class ObjectLog:
    """The log of :class:`spill.FsspecStore`: append, read back; its state is the next sequence
    number and whether another writer locked this one out."""

    def __init__(self, objects: ObjectSession) -> None:
        self._objects = objects
        self._locked_out = False
        self._next_seq = self._scan_log_names()[1]

    def append(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Create the next log object with these records (a conditional create; see module)."""
        payload = encode_records(records)
        if not payload:
            return
        with self._objects.mutex:
            self._objects.check_open()
            if self._locked_out:
                raise self._locked(self._next_seq)
            seq = self._next_seq
            key = self._objects.log_key(seq)
            try:
                self._objects.fs.pipe_file(key, payload, mode="create")
            except FileExistsError:
                if self._objects.existing(key) != payload:
                    self._locked_out = True
                    raise self._locked(seq) from None
                # Our own PUT landed and a retry of it found it there.
            except Exception as exc:
                raise self._objects.store_error(
                    f"create log object {self._objects.log_rel(seq)}", exc
                ) from exc
            self._next_seq = seq + 1

    def read(self) -> list[LogRecord]:
        """Every valid record in order: the log objects listed, fetched and read in sequence.

        A missing sequence number (an object deleted, or a writer that died between choosing
        the number and its PUT) and an unreadable object are skipped with a warning; damaged
        lines inside an object are skipped as in a local log.
        """
        with self._objects.mutex:
            self._objects.check_open()
            seqs, _ = self._scan_log_names()
            keys = [self._objects.log_key(seq) for seq in seqs]
            try:
                fetched = self._objects.fs.cat(keys, on_error="return") if keys else {}
            except Exception as exc:
                raise self._objects.store_error("read the log objects", exc) from exc
        parts: list[bytes] = []
        expected = 0
        for seq, key in zip(seqs, keys, strict=True):
            if seq != expected:
                events().warning(
                    "toolbudget.log.object_missing",
                    source=self._objects.url,
                    first=self._objects.log_rel(expected),
                    count=seq - expected,
                )
            expected = seq + 1
            data = fetched.get(key, fetched.get(self._objects.fs.unstrip_protocol(key)))
            if not isinstance(data, bytes | bytearray):
                events().warning(
                    "toolbudget.log.object_skipped",
                    source=self._objects.url,
                    object=self._objects.log_rel(seq),
                    reason=str(data) if data is not None else "not returned",
                )
                continue
            parts.append(bytes(data) if data.endswith(b"\n") else bytes(data) + b"\n")
        return decode_log(b"".join(parts), source=f"{self._objects.url}/{LOG_DIR}")

    def _locked(self, seq: int) -> SessionLocked:
        return SessionLocked(
            f"session {self._objects.url} has another writer: log object {self._objects.log_rel(seq)} was "
            "created by it first. A session can be written from one place at a time; reopen "
            "the session to continue from what the other writer logged."
        )

    def _scan_log_names(self) -> tuple[list[int], int]:
        """The sequence numbers present in log/, sorted, and the next one to create."""
        try:
            names = self._objects.fs.ls(self._objects.key(LOG_DIR), detail=False)
        except FileNotFoundError:
            return [], 0
        except Exception as exc:
            raise self._objects.store_error(f"list {LOG_DIR}/", exc) from exc
        seqs = sorted(
            int(match.group(1))
            for name in names
            if (match := _LOG_NAME_RE.match(str(name).rstrip("/").rsplit("/", 1)[-1]))
        )
        return seqs, (seqs[-1] + 1 if seqs else 0)
