"""A session opened for reading only, from the Python API: what ``toolbudget read`` does.

``Budget.open`` takes the session's exclusive lock and may write (its log, its metadata, the
estimates it keeps), so it fails on a session the user may read but not write, and it cannot
open a session another process has open. :class:`SessionReader` reads through
:class:`spill._readonly.ReadOnlyStore` instead: no lock, nothing created or changed, beside a live
session or on a directory shared read-only (a colleague's, an archived run's).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self

from budget._config import BudgetConfig, build_config
from budget._readback import ReadBack, ReadToolResult
from spill import LogRecord
from spill._readonly import ReadOnlyObjects, ReadOnlyStore, open_read_only

__all__ = ["SessionReader"]


class SessionReader:
    """A session directory, or a session at an fsspec URL (``s3://bucket/sessions/abc``, as
    ``Budget.open`` takes), opened read-only: read its spilled outputs back, as the model would.

    ``config`` is used only for what reading needs (the read-back tool's page size). StoreError
    at once when ``path`` is not a session (naming what is missing); every body read
    is checked against its content hash, as in a session opened with ``Budget.open``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        config: BudgetConfig | dict[str, Any] | None = None,
    ) -> None:
        cfg = build_config(config)
        self._store = open_read_only(path)
        self._reader = ReadBack(self._store, cfg)

    @property
    def path(self) -> str:
        """The session directory (absolute), or the session's URL."""
        return self._store.path

    @property
    def store(self) -> ReadOnlyStore | ReadOnlyObjects:
        """The read-only store: every write to it is a StoreError."""
        return self._store

    def read(
        self, ref: str, *, offset: int = 0, limit: int | None = None, grep: str | None = None
    ) -> str:
        """The exact text of lines of a spilled output (the whole output when no argument)."""
        return self._reader.read(ref, offset=offset, limit=limit, grep=grep)

    def handle_read_tool(self, tool_input: Mapping[str, Any] | str) -> str:
        """Run the read-back tool on this session, as :meth:`Budget.handle_read_tool` does."""
        return self._reader.handle(tool_input)

    def read_tool_result(self, tool_input: Mapping[str, Any] | str) -> ReadToolResult:
        """:meth:`handle_read_tool`'s text and whether it is an error."""
        return self._reader.result(tool_input)

    def log(self) -> list[LogRecord]:
        """Every valid record of the session's decision log, in order."""
        return self._store.read_log()

    def close(self) -> None:
        """Close the session directory's descriptor (nothing to write, no lock to release)."""
        self._store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
