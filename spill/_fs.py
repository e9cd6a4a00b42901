"""Every filesystem call the spill package makes, one small function per kind.

The stores and gc call these through the module (``_fs.write(...)``), never ``os`` directly, so
a fault-injection test can replace any one of them and check that each failure surfaces as a
``StoreError`` and leaves the session consistent. The kinds are listed in :data:`OPS`.

Paths are always single names relative to a directory descriptor (``dir_fd``), except for the
session directory and gc root themselves, so no symlink inside a session is ever traversed.
"""

from __future__ import annotations

import errno
import fcntl
import os
from typing import Final

__all__ = [
    "OPS",
    "close",
    "dup",
    "fsync",
    "listdir",
    "lock",
    "make_dirs",
    "mkdir",
    "open_fd",
    "read",
    "rename",
    "rmdir",
    "stat",
    "truncate",
    "unlink",
    "write",
]

OPS: Final = (
    "open_fd",
    "close",
    "dup",
    "read",
    "write",
    "truncate",
    "fsync",
    "rename",
    "mkdir",
    "lock",
    "stat",
    "listdir",
    "unlink",
    "rmdir",
)

_CHUNK: Final = 1 << 30
_TAIL_CHUNK: Final = 1 << 16


def open_fd(path: str, flags: int, mode: int = 0o600, *, dir_fd: int | None = None) -> int:
    """os.open with close-on-exec and no symlink following on the last component.

    A file this call creates gets exactly ``mode`` (fchmod after the create): the umask may
    have removed bits, even the owner's (0o277 gives 0o400). An existing file keeps its mode.
    """
    flags |= os.O_CLOEXEC | os.O_NOFOLLOW
    if not flags & os.O_CREAT:
        return os.open(path, flags, mode, dir_fd=dir_fd)
    try:
        fd = os.open(path, flags | os.O_EXCL, mode, dir_fd=dir_fd)
    except FileExistsError:
        if flags & os.O_EXCL:
            raise
        # Created by someone else in between is fine: opening it is what was asked.
        return os.open(path, flags & ~os.O_CREAT, mode, dir_fd=dir_fd)
    try:
        os.fchmod(fd, mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def close(fd: int) -> None:
    """Close a descriptor (write errors on some filesystems are only reported here)."""
    os.close(fd)


def dup(fd: int) -> int:
    """A second descriptor for ``fd``'s open file (close-on-exec), to fsync it later."""
    return os.dup(fd)


def read(fd: int, offset: int = 0, size: int | None = None) -> bytes:
    """Read ``size`` bytes (to end of file if None) from ``offset`` without moving the fd.

    Reading to the end sizes the first read from fstat: asking pread for more than is there
    would make Python allocate the whole request up front.
    """
    chunks: list[bytes] = []
    if size is None:
        want = max(os.fstat(fd).st_size - offset, 0)
        while True:  # until EOF: the file may have grown, and huge reads come back short
            chunk = os.pread(fd, min(max(want, _TAIL_CHUNK), _CHUNK), offset)
            if not chunk:
                break
            chunks.append(chunk)
            offset += len(chunk)
            want -= len(chunk)
    else:
        while size > 0:
            chunk = os.pread(fd, min(size, _CHUNK), offset)
            if not chunk:
                break
            chunks.append(chunk)
            offset += len(chunk)
            size -= len(chunk)
    if len(chunks) == 1:
        return chunks[0]
    return b"".join(chunks)


def write(fd: int, data: bytes | memoryview) -> None:
    """Write all of ``data``: one write() call for the whole buffer, more only if it was short."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def truncate(fd: int, length: int) -> None:
    """Truncate an open file."""
    os.ftruncate(fd, length)


def fsync(fd: int) -> None:
    """Flush a file or directory to stable storage."""
    os.fsync(fd)


def rename(src: str, dst: str, *, dir_fd: int) -> None:
    """Atomically replace ``dst`` by ``src``, both names in the directory ``dir_fd``."""
    os.replace(src, dst, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def mkdir(path: str, mode: int = 0o700, *, dir_fd: int | None = None) -> None:
    """Create one directory with exactly ``mode``, whatever the umask.

    The chmod follows the name: it was created an instant ago inside a directory only this
    user may write to (or, for the session directory and its parents, a path the author chose).
    """
    os.mkdir(path, mode, dir_fd=dir_fd)
    os.chmod(path, mode, dir_fd=dir_fd)


def make_dirs(path: str) -> None:
    """``path`` and its missing parents, each made 0700 whatever the umask (:func:`mkdir`), as a
    session's directory and its parents are; existing ones are left as they are (one made
    meanwhile by another process too). FileExistsError if something other than a directory is
    there."""
    missing: list[str] = []
    probe = path
    while not os.path.lexists(probe):
        missing.append(probe)
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    for directory in reversed(missing):
        try:
            mkdir(directory)
        except FileExistsError:
            continue
    if not os.path.isdir(path):
        raise FileExistsError(errno.EEXIST, "exists and is not a directory", path)


def lock(fd: int) -> None:
    """Take an exclusive flock without waiting; BlockingIOError if another holder has it."""
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def stat(path: str | int, *, dir_fd: int | None = None) -> os.stat_result:
    """lstat a name (never following a symlink), or fstat a descriptor when given an int."""
    if isinstance(path, int):
        return os.fstat(path)
    return os.stat(path, dir_fd=dir_fd, follow_symlinks=False)


def listdir(fd: int) -> list[str]:
    """Names in an open directory."""
    return os.listdir(fd)


def unlink(path: str, *, dir_fd: int) -> None:
    """Remove a name (a symlink itself, never its target)."""
    os.unlink(path, dir_fd=dir_fd)


def rmdir(path: str, *, dir_fd: int) -> None:
    """Remove an empty directory."""
    os.rmdir(path, dir_fd=dir_fd)
