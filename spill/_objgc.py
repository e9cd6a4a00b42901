"""Removing idle sessions under a URL: :meth:`spill.FsspecStore.gc_sessions`'s work."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from spill._errors import StoreError
from spill._gc import gc_session_dir
from spill._objfs import BODIES_NAME, LOG_DIR, META_NAME, checked_url, delete_exact, filesystem
from spill._sessiondir import LOCK_NAME
from spill._store import events

__all__ = ["gc_url_sessions", "ignore_skip"]


def gc_url_sessions(
    root: str,
    *,
    older_than_s: float,
    now: float,
    on_skip: Callable[[str, str], None],
    storage_options: Mapping[str, Any],
) -> list[str]:
    """:meth:`FsspecStore.gc_sessions`: remove the sessions under ``root`` idle for
    ``older_than_s`` seconds.

    A prefix directly under ``root`` is a session if it holds a ``session.json`` object and
    nothing but what an :class:`FsspecStore` writes (``session.json``, ``bodies/``, ``log/``):
    anything else is left alone with a warning. Its age is that of its newest object. Object
    stores have no lock to say a session is open: a session is kept while any of its objects is
    younger than ``older_than_s``, so choose it longer than any pause of a live agent. The log
    objects are deleted first and ``session.json`` last: a gc that dies midway leaves a prefix
    that is still recognised (and finished) by the next gc. On a local filesystem, a directory
    holding a ``lock`` file is a LocalStore's session, collected as :func:`spill.gc_sessions`
    collects it (its lock honoured).
    """
    root = checked_url(root, "gc_sessions")
    fs, base = filesystem(root, storage_options)
    try:
        entries = fs.ls(base, detail=True)
    except FileNotFoundError:
        return []
    except Exception as exc:
        raise StoreError(f"cannot list gc root {root}: {exc}") from exc
    removed: list[str] = []
    prefixes = sorted(str(e["name"]).rstrip("/") for e in entries if e.get("type") == "directory")
    for prefix in prefixes:
        url = f"{root}/{prefix.rsplit('/', 1)[-1]}"
        try:
            if _collect_url(fs, prefix, url, now, older_than_s, on_skip):
                removed.append(url)
        except Exception as exc:
            events().warning("toolbudget.gc.failed", session=url, error=str(exc))
            on_skip(url, str(exc))
    return removed


def ignore_skip(url: str, why: str) -> None:
    """The default ``on_skip``: the events already say why."""


def _collect_url(
    fs: Any,
    prefix: str,
    url: str,
    now: float,
    older_than_s: float,
    skip: Callable[[str, str], None],
) -> bool:
    """Remove one candidate session prefix if it qualifies; True if it was removed."""
    if getattr(fs, "local_file", False) and _holds_lock(prefix):
        # A LocalStore's session directory (an FsspecStore writes no lock): collected as
        # gc_sessions collects it, its lock honoured, where its files read as foreign here.
        return gc_session_dir(
            Path(prefix),
            older_than_s=older_than_s,
            now=now,
            on_skip=lambda _path, why: skip(url, why),
        )
    found: dict[str, dict[str, Any]] = fs.find(prefix, detail=True)
    rels = {str(name)[len(prefix) + 1 :]: info for name, info in found.items()}
    if META_NAME not in rels:
        return False
    foreign = sorted(
        rel
        for rel in rels
        if rel != META_NAME and rel.split("/", 1)[0] not in (BODIES_NAME, LOG_DIR)
    )
    if foreign:
        events().warning(
            "toolbudget.gc.skipped",
            session=url,
            reason=f"holds objects a session does not: {foreign[:5]}",
        )
        skip(url, f"holds objects a session does not: {', '.join(foreign[:5])}")
        return False
    newest = max(_modified(info) for info in rels.values())
    if now - newest <= older_than_s:
        skip(url, f"used {now - newest:.0f}s ago")
        return False
    logs = sorted(f"{prefix}/{rel}" for rel in rels if rel.startswith(LOG_DIR + "/"))
    bodies = sorted(f"{prefix}/{rel}" for rel in rels if rel.startswith(BODIES_NAME + "/"))
    # By exact name: fsspec's rm would read ``run[1]`` or ``a?`` as a pattern and delete the
    # objects of the live sessions it matches (issue 31).
    for batch in (logs, bodies, [f"{prefix}/{META_NAME}"]):
        if batch:
            delete_exact(fs, batch)
    if getattr(fs, "local_file", False):  # fsspec's LocalFileSystem (file:// URLs)
        _remove_empty_dirs(prefix)
    events().info("toolbudget.gc.removed", session=url, idle_s=round(now - newest, 1))
    return True


def _holds_lock(prefix: str) -> bool:
    """Whether a local directory holds a LocalStore's lock file (an unreadable one raises)."""
    try:
        os.lstat(os.path.join(prefix, LOCK_NAME))
    except FileNotFoundError:
        return False
    return True


def _remove_empty_dirs(path: str) -> None:
    """A local filesystem keeps the directories an object store has none of: the session's,
    emptied, go too (one that something else still holds stays)."""
    for root, _dirs, _files in os.walk(path, topdown=False):
        with contextlib.suppress(OSError):
            os.rmdir(root)


def _modified(info: Mapping[str, Any]) -> float:
    """An object's last-modified time in seconds since the epoch (s3fs, local and memory
    filesystems name it differently)."""
    for key in ("LastModified", "mtime", "last_modified", "created"):
        value = info.get(key)
        if value is None:
            continue
        if isinstance(value, int | float):
            return float(value)
        if hasattr(value, "timestamp"):
            return float(value.timestamp())
    raise StoreError(f"{info.get('name')} has no modification time the gc can read")
