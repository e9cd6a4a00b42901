"""gc_sessions: remove old, unused session directories.

A directory directly under ``root`` is a session if it holds a regular ``session.json`` and a
regular ``lock`` file and nothing but the names a LocalStore creates; anything else is left
alone (with a warning if it looks like a damaged session), so pointing gc at the wrong folder
cannot delete someone else's files. A session is removed when the newest mtime of anything in
it is older than the threshold and no LocalStore holds its lock. gc takes that lock itself
while deleting, and deletes the log first and ``session.json`` and the lock last: a gc that dies
midway leaves a directory that is still recognised (and finished) by the next gc.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from spill import _fs
from spill._errors import ConfigError, StoreError
from spill._paths import checked_path, refuse_current_dir
from spill._sessiondir import (
    BODIES_NAME,
    LOCK_NAME,
    LOG_NAME,
    META_NAME,
    SIDECAR_NAMES,
    TMP_PREFIX,
)
from spill._store import events

__all__ = ["gc_session_dir", "gc_sessions"]

_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY
_KNOWN: Final = frozenset({BODIES_NAME, LOCK_NAME, LOG_NAME, META_NAME, *SIDECAR_NAMES})


def gc_sessions(
    root: Path,
    *,
    older_than_s: float,
    now: float | None = None,
    on_skip: Callable[[Path, str], None] | None = None,
) -> list[Path]:
    """Remove the sessions under ``root`` untouched for more than ``older_than_s`` seconds.

    Sessions held open by a LocalStore are skipped. Symlinks are never followed (a symlinked
    ``root`` is refused). Returns the removed directories, in name order. ``on_skip`` is called
    with each session left in place and why (open, recently used, holding foreign files, no lock
    file, or an OS error); directories that are no session at all are not reported.
    """
    skip = on_skip if on_skip is not None else _ignore
    if isinstance(older_than_s, bool) or not isinstance(older_than_s, int | float):
        raise ConfigError(f"older_than_s must be a number of seconds, got {older_than_s!r}")
    if not older_than_s >= 0:
        raise ConfigError(f"older_than_s must be >= 0 seconds, got {older_than_s!r}")
    raw = checked_path(root, "gc root")
    refuse_current_dir(raw, "gc root", "holding the sessions", "sessions")
    current = time.time() if now is None else now
    root = Path(raw)
    try:
        root_fd = _fs.open_fd(str(root), _DIR_FLAGS)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise StoreError(f"cannot open gc root {root}: {_why(exc, str(root), None)}") from exc
    removed: list[Path] = []
    try:
        try:
            names = sorted(_fs.listdir(root_fd))
        except OSError as exc:
            raise StoreError(f"cannot list gc root {root}: {exc.strerror or exc}") from exc
        for name in names:
            try:
                if _collect(root_fd, name, root / name, current, older_than_s, skip):
                    removed.append(root / name)
            except OSError as exc:
                events().warning(
                    "toolbudget.gc.failed", session=str(root / name), error=exc.strerror or str(exc)
                )
                skip(root / name, exc.strerror or str(exc))
    finally:
        _fs.close(root_fd)
    return removed


def gc_session_dir(
    path: Path, *, older_than_s: float, now: float, on_skip: Callable[[Path, str], None]
) -> bool:
    """Remove the one directory ``path`` as :func:`gc_sessions` removes each under its root (a
    session untouched for ``older_than_s`` seconds and not held open); True if it was removed.

    For :meth:`spill.FsspecStore.gc_sessions` on a ``file://`` URL, whose directories may be
    LocalStore sessions: their lock must be honoured there too."""
    root_fd = _fs.open_fd(str(path.parent), _DIR_FLAGS)
    try:
        return _collect(root_fd, path.name, path, now, older_than_s, on_skip)
    finally:
        _fs.close(root_fd)


def _ignore(path: Path, why: str) -> None:
    """The default ``on_skip``: the events already say why."""


def _collect(
    root_fd: int,
    name: str,
    path: Path,
    now: float,
    older_than_s: float,
    skip: Callable[[Path, str], None],
) -> bool:
    """Remove one candidate session if it qualifies; True if it was removed."""
    st = _fs.stat(name, dir_fd=root_fd)
    if not stat.S_ISDIR(st.st_mode):  # symlinks included: never followed
        return False
    dir_fd = _fs.open_fd(name, _DIR_FLAGS, dir_fd=root_fd)
    try:
        if not _is_regular(dir_fd, META_NAME):
            return False
        if not _is_regular(dir_fd, LOCK_NAME):
            events().warning("toolbudget.gc.skipped", session=str(path), reason="no lock file")
            skip(path, "no lock file (a damaged session?)")
            return False
        foreign = [
            n for n in _fs.listdir(dir_fd) if n not in _KNOWN and not n.startswith(TMP_PREFIX)
        ]
        if foreign:
            events().warning(
                "toolbudget.gc.skipped",
                session=str(path),
                reason=f"holds files a session does not: {sorted(foreign)[:5]}",
            )
            skip(path, f"holds files a session does not: {', '.join(sorted(foreign)[:5])}")
            return False
        lock_fd = _fs.open_fd(LOCK_NAME, os.O_RDWR, dir_fd=dir_fd)
        try:
            try:
                _fs.lock(lock_fd)
            except BlockingIOError:
                events().info("toolbudget.gc.skipped", session=str(path), reason="open (locked)")
                skip(path, "open in another process (locked)")
                return False
            # Measured under the lock, so a store that wrote just before closing counts.
            newest = max(st.st_mtime, _newest_mtime(dir_fd))
            if now - newest <= older_than_s:
                skip(path, f"used {_age(now - newest)} ago")
                return False
            for entry in (LOG_NAME, BODIES_NAME, *sorted(SIDECAR_NAMES)):
                _remove(dir_fd, entry)
            for entry in _fs.listdir(dir_fd):
                if entry.startswith(TMP_PREFIX):
                    _remove(dir_fd, entry)
            _remove(dir_fd, META_NAME)
            _remove(dir_fd, LOCK_NAME)
        finally:
            _fs.close(lock_fd)
    finally:
        _fs.close(dir_fd)
    _fs.rmdir(name, dir_fd=root_fd)
    events().info("toolbudget.gc.removed", session=str(path), idle_s=round(now - newest, 1))
    return True


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{max(seconds, 0):.0f}s"


def _is_regular(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISREG(_fs.stat(name, dir_fd=dir_fd).st_mode)
    except FileNotFoundError:
        return False


def _newest_mtime(dir_fd: int) -> float:
    """The newest mtime of anything below an open directory, never following symlinks."""
    newest = 0.0
    for name in _fs.listdir(dir_fd):
        st = _fs.stat(name, dir_fd=dir_fd)
        newest = max(newest, st.st_mtime)
        if stat.S_ISDIR(st.st_mode):
            sub_fd = _fs.open_fd(name, _DIR_FLAGS, dir_fd=dir_fd)
            try:
                newest = max(newest, _newest_mtime(sub_fd))
            finally:
                _fs.close(sub_fd)
    return newest


def _remove(dir_fd: int, name: str) -> None:
    """Remove a file, symlink or directory tree below ``dir_fd``; a missing name is fine."""
    try:
        st = _fs.stat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        sub_fd = _fs.open_fd(name, _DIR_FLAGS, dir_fd=dir_fd)
        try:
            for entry in _fs.listdir(sub_fd):
                _remove(sub_fd, entry)
        finally:
            _fs.close(sub_fd)
        _fs.rmdir(name, dir_fd=dir_fd)
    else:
        _fs.unlink(name, dir_fd=dir_fd)


def _why(exc: OSError, name: str, dir_fd: int | None) -> str:
    try:
        if stat.S_ISLNK(_fs.stat(name, dir_fd=dir_fd).st_mode):
            return "it is a symbolic link; refusing to follow it"
    except OSError:
        pass
    return exc.strerror or str(exc)
