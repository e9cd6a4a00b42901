"""Permissions: the session directory is 0700 and every file in it 0600, whatever the umask.

(Sessions killed mid-write are checked the same way in test_crash.)
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from budget import Budget
from tests.conversations import CONFIG, conversation


@pytest.fixture(params=[0o000, 0o022, 0o077])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    """Run under this umask (0: the modes cannot come from the umask)."""
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def modes(path: Path) -> dict[str, int]:
    """Every entry under ``path`` (itself included) and its permission bits."""
    out = {".": stat.S_IMODE(path.lstat().st_mode)}
    for root, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            entry = Path(root) / name
            out[str(entry.relative_to(path))] = stat.S_IMODE(entry.lstat().st_mode)
    return out


def test_every_directory_is_0700_and_every_file_0600(
    tmp_path: Path, umask: int, record_property: Any
) -> None:
    """After a session that spilled into many shards, wrote its metadata and log, and was
    resumed, directories are 0700 and files 0600; no other kind of entry exists."""
    msgs, steps = conversation(6, 12)
    path = tmp_path / "parent" / "s"  # missing parents are created private too
    with Budget.open(path, CONFIG) as session:
        for step in steps:
            session.prepare(msgs[: step.length], usage=step.usage, now=step.now)
    with Budget.open(path, CONFIG) as session:
        session.prepare(msgs, now=steps[-1].now + 1)
    found = modes(path)
    shards = [name for name in found if name.startswith("bodies/") and name.count("/") == 1]
    assert len(shards) >= 5
    for name, mode in found.items():
        entry = path / name
        if entry.is_dir():
            assert mode == 0o700, (name, oct(mode))
        else:
            assert entry.is_file() and not entry.is_symlink(), name
            assert mode == 0o600, (name, oct(mode))
    assert stat.S_IMODE((tmp_path / "parent").stat().st_mode) == 0o700
    record_property(f"reliability.permissions.entries_umask_{umask:03o}", len(found))
