"""A group commit's shards: each shard's new bodies written, fsync'd and renamed, then its
directory fsync'd, the shards concurrently (``GROUP_THREADS``).

:class:`spill._bodies.Bodies` decides which bodies are new and what they count against the
quota; the work here touches no state but the :class:`NewBody` values it is handed and the
session directory's files (:class:`spill._sessiondir.SessionDir`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Final, TypeVar

from spill._errors import StoreError
from spill._sessiondir import BODIES_NAME, BODY_SUFFIX, SessionDir

__all__ = ["GROUP_THREADS", "NewBody", "commit_shard", "run_all"]

_R = TypeVar("_R")

GROUP_THREADS: Final = 16
"""Most shards a group commit works on at once. Each creates, writes and fsyncs its bodies,
renames them and fsyncs its directory in its own thread: concurrent fsyncs on one filesystem
share its journal commits and the device's cache flushes, and the creates' waits on the journal
and on inode-table reads overlap (measured by ``python -m benchmarks perf``: docs/performance.md's
Performance section)."""


@dataclass(slots=True)
class NewBody:
    """One new body of a group commit: its bytes, the size it replaces, and how it ended."""

    ref: str
    data: bytes
    old_size: int
    placed: bool = False
    """Renamed into place (complete, and counted in the bodies' total whatever happens next)."""
    error: StoreError | None = None


def commit_shard(
    directory: SessionDir, shard: str, shard_fd: int | None, bodies: list[NewBody]
) -> StoreError | None:
    """Write, fsync and rename one shard's new bodies, then fsync its directory once.

    Runs in a worker thread: touches no state of the store but ``bodies``, which only this
    call holds. Returns the error of the directory's own open or fsync (bodies get theirs).
    """
    own = shard_fd is None
    if shard_fd is None:
        try:
            shard_fd = directory.open_subdir(
                directory.bodies_fd, shard, f"{BODIES_NAME}/{shard}", sync=False
            )
        except StoreError as exc:
            for body in bodies:
                body.error = exc
            return exc
    try:
        for body in bodies:
            try:
                directory.write_atomic(
                    shard_fd,
                    body.ref + BODY_SUFFIX,
                    body.data,
                    f"body {directory.body_rel(body.ref)}",
                    sync_dir=False,
                )
            except StoreError as exc:
                body.error = exc
                continue
            body.placed = True
        if directory.fsync and (not bodies or any(b.placed for b in bodies)):
            try:
                directory.fsync_dir(shard_fd, f"the directory {BODIES_NAME}/{shard}")
            except StoreError as exc:
                for body in bodies:
                    if body.error is None:
                        body.error = exc
                return exc
        return None
    finally:
        if own:
            directory.close_quietly(shard_fd)


def run_all(tasks: Sequence[Callable[[], _R]], *, concurrent: bool = True) -> list[_R]:
    """Run the tasks, several at a time when there are several and ``concurrent``; results in
    order.

    Threads overlap a commit's fsyncs. With none to make (put off to the store's sync, or off), a
    shard's work is a create and a rename, and starting threads for it costs more than it saves:
    ~0.1 ms a commit, ms at the p99 on a loaded machine (the proxy's requests, issue 33)."""
    if len(tasks) <= 1 or not concurrent:
        return [task() for task in tasks]
    with ThreadPoolExecutor(
        max_workers=min(GROUP_THREADS, len(tasks)), thread_name_prefix="spill-group"
    ) as pool:
        futures = [pool.submit(task) for task in tasks]
    return [future.result() for future in futures]
