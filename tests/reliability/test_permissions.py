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


@pytest.mark.parametrize("mask", [0o277, 0o377, 0o777])
def test_modes_are_exact_when_the_umask_removes_the_owners_own_bits(
    tmp_path: Path, mask: int
) -> None:
    """Under a umask that takes away the owner's write (or every) bit, directories still come
    out 0700 and files 0600: the modes are set after creating, not left to the umask."""
    msgs, steps = conversation(6, 12)
    path = tmp_path / "parent" / "s"
    old = os.umask(mask)
    try:
        with Budget.open(path, CONFIG) as session:
            for step in steps:
                session.prepare(msgs[: step.length], usage=step.usage, now=step.now)
    finally:
        os.umask(old)
    found = modes(tmp_path / "parent")
    assert any(name.startswith("s/bodies/") for name in found)
    for name, mode in found.items():
        want = 0o700 if (tmp_path / "parent" / name).is_dir() else 0o600
        assert mode == want, (name, oct(mode))


_AS_NOBODY = """
import os, sys
from benchmarks.soak import CONFIG, conversation
from budget import Budget
msgs, steps = conversation(6, 12)
path = sys.argv[1] + "/s"
with Budget.open(path, CONFIG) as session:
    for step in steps:
        session.prepare(msgs[: step.length], usage=step.usage, now=step.now)
with Budget.open(path, CONFIG) as session:
    d = session.prepare(msgs, now=steps[-1].now + 1)
    refs = [r.ref for r in d.report.decisions if r.ref]
print("ok")
"""


def test_a_user_without_root_opens_and_resumes_a_session_under_umask_0o277(
    tmp_path: Path,
) -> None:
    """Without root's power to ignore modes and umask 0o277 (the owner may not write what it
    creates), a session opens, spills, resumes and reads back: no EACCES from its own modes."""
    import shutil
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    command = [sys.executable, "-c", _AS_NOBODY, str(tmp_path)]
    if os.geteuid() == 0:
        # The suite runs as root here. Dropping every capability (CAP_DAC_OVERRIDE among them)
        # makes the kernel check mode bits as for any user; the interpreter under /root stays
        # reachable, which it is not for "nobody".
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv(1): cannot drop CAP_DAC_OVERRIDE")
        command = [setpriv, "--bounding-set=-all", "--inh-caps=-all", *command]
    done = subprocess.run(
        command,
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo), "PYTHONDONTWRITEBYTECODE": "1"},
        umask=0o277,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2_000:]
    assert done.stdout.strip() == "ok"
    for name, mode in modes(tmp_path / "s").items():
        want = 0o700 if (tmp_path / "s" / name).is_dir() else 0o600
        assert mode == want, (name, oct(mode))
