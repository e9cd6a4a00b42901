"""SessionReader: a session opened read-only from the Python API, as ``toolbudget read`` opens it
(issue 34, item 3): on a directory the user may read but not write, and beside a live session."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from budget import Budget, SessionReader, StoreError
from spill import ref_for
from tests.strategies import conversation

REPO = Path(__file__).resolve().parents[2]


def _spilled_session(path: Path) -> str:
    """A closed session at ``path`` that spilled one ~200 KB output; that output."""
    text = "".join(f"row {i}\n" for i in range(20_000))
    with Budget.open(path) as session:
        session.prepare(conversation([[text]]), now=0)
    return text


def _tree(path: Path) -> dict[str, tuple[int, int, int]]:
    """Every entry below ``path`` (itself too) with its mode, size and modification time: what
    changes if anything is created, written, renamed or removed."""
    out = {".": _entry(path)}
    for root, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            entry = Path(root) / name
            out[str(entry.relative_to(path))] = _entry(entry)
    return out


def _entry(path: Path) -> tuple[int, int, int]:
    st = path.lstat()
    return st.st_mode, st.st_size, st.st_mtime_ns


def _set_modes(path: Path, *, writable: bool) -> None:
    """Directories 0o555 and files 0o444 (or back to the session's 0o700/0o600)."""
    for root, dirs, files in os.walk(path):
        for name in files:
            os.chmod(Path(root) / name, 0o600 if writable else 0o444)
        for name in dirs:
            os.chmod(Path(root) / name, 0o700 if writable else 0o555)
    os.chmod(path, 0o700 if writable else 0o555)


_AS_READER = """
import json, os, sys
from budget import Budget, SessionReader, StoreError
path, ref = sys.argv[1], sys.argv[2]
out = {}
try:
    open(os.path.join(path, "probe"), "x").close()
    out["can_create"] = True
except PermissionError:
    out["can_create"] = False
try:
    Budget.open(path).close()
    out["budget_open"] = "opened"
except StoreError as exc:
    out["budget_open"] = str(exc)
with SessionReader(path) as reader:
    out["whole"] = reader.read(ref)
    out["page"] = reader.handle_read_tool({"ref": ref, "grep": "^row 1999$"})
    out["records"] = len(reader.log())
    try:
        reader.store.put("x")
        out["put"] = "stored"
    except StoreError as exc:
        out["put"] = str(exc)
print(json.dumps(out))
"""


def test_a_session_the_user_may_read_but_not_write_is_read_back_and_left_unchanged(
    tmp_path: Path,
) -> None:
    """On a session whose directories and files deny writing (enforced: as root the child drops
    CAP_DAC_OVERRIDE), Budget.open fails, while SessionReader reads the output byte for byte,
    runs the read-back tool and the log, refuses to store, and changes no entry of the tree."""
    path = tmp_path / "s"
    text = _spilled_session(path)
    _set_modes(path, writable=False)
    command = [sys.executable, "-c", _AS_READER, str(path), ref_for(text)]
    if os.geteuid() == 0:
        # Root ignores mode bits through CAP_DAC_OVERRIDE: without every capability the kernel
        # checks them as for any user (as tests/reliability/test_permissions.py does).
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv(1): cannot drop CAP_DAC_OVERRIDE")
        command = [setpriv, "--bounding-set=-all", "--inh-caps=-all", *command]
    before = _tree(path)
    try:
        done = subprocess.run(
            command,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        after = _tree(path)
    finally:
        _set_modes(path, writable=True)
    assert done.returncode == 0, done.stderr[-2_000:]
    out = json.loads(done.stdout)
    assert out["can_create"] is False  # the directory really is read-only for the reader
    assert "Permission denied" in out["budget_open"]
    assert out["whole"] == text
    assert out["page"].splitlines()[1] == "  2000\trow 1999"
    assert out["records"] > 0
    assert "is open read-only" in out["put"]
    assert after == before


def test_a_reader_beside_the_live_session_reads_without_its_lock_and_writes_nothing(
    tmp_path: Path,
) -> None:
    """While a Budget session holds the directory's lock, a SessionReader opens it at once,
    reads the spilled output, and leaves every entry as it found it."""
    path = tmp_path / "s"
    text = _spilled_session(path)
    with Budget.open(path) as live:
        before = _tree(path)
        with SessionReader(path) as reader:
            assert reader.path == str(path)
            assert reader.read(ref_for(text), offset=3, limit=2) == "row 3\nrow 4\n"
            result = reader.read_tool_result({"ref": "0" * 32})
            assert result.is_error
        assert _tree(path) == before
        assert live.read(ref_for(text)) == text


def test_a_reader_refuses_a_directory_that_is_no_session(tmp_path: Path) -> None:
    """SessionReader on a directory without a decision log is a StoreError naming what is
    missing, and creates nothing there."""
    (tmp_path / "empty").mkdir()
    with pytest.raises(StoreError, match="not a toolbudget session directory"):
        SessionReader(tmp_path / "empty")
    assert list((tmp_path / "empty").iterdir()) == []


def test_a_closed_reader_says_it_is_closed(tmp_path: Path) -> None:
    """Reading through a closed SessionReader is a StoreError saying it is closed, where it named
    EBADF ("Bad file descriptor"); the session itself still reads back."""
    path = tmp_path / "s"
    text = _spilled_session(path)
    reader = SessionReader(path)
    reader.close()
    for read in (lambda: reader.read(ref_for(text)), reader.log):
        with pytest.raises(StoreError, match="is closed"):
            read()
    assert "is closed" in reader.read_tool_result({"ref": ref_for(text)}).text
    with SessionReader(path) as again:
        assert again.read(ref_for(text)) == text
