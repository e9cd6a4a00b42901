"""The session lock: one LocalStore per session directory, across processes and within one."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from budget._errors import SessionLocked
from spill import LocalStore, gc_sessions

REPO = Path(__file__).resolve().parents[2]
HOLDER = """
import sys
from spill import LocalStore
store = LocalStore(sys.argv[1])
print("held", flush=True)
sys.stdin.readline()
store.close()
print("released", flush=True)
"""


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process that opens tmp_path/s and keeps it open until it reads a line."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    with (tmp_path / "holder.err").open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(tmp_path / "s")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=env,
            cwd=REPO,
        )
    assert proc.stdout is not None
    first = proc.stdout.readline().strip()
    assert first == "held", (tmp_path / "holder.err").read_text()
    yield proc
    proc.kill()
    proc.wait()
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            pipe.close()


def test_session_held_by_another_process_is_refused(
    tmp_path: Path, holder: subprocess.Popen[str]
) -> None:
    """While another process holds the session: SessionLocked naming its pid, also after a
    short lock_timeout, and gc leaves the session alone however old it looks."""
    with pytest.raises(SessionLocked) as info:
        LocalStore(tmp_path / "s")
    message = str(info.value)
    assert f"pid {holder.pid}" in message
    assert str(tmp_path / "s") in message
    assert "lock_timeout" in message
    started = time.monotonic()
    with pytest.raises(SessionLocked, match=r"waited 0\.2 s"):
        LocalStore(tmp_path / "s", lock_timeout=0.2)
    assert time.monotonic() - started >= 0.2
    assert gc_sessions(tmp_path, older_than_s=0, now=time.time() + 10**6) == []
    assert (tmp_path / "s" / "session.json").exists()


def test_lock_timeout_waits_for_the_holder_to_close(
    tmp_path: Path, holder: subprocess.Popen[str]
) -> None:
    """With a lock_timeout, the opener waits and succeeds once the other process closes."""
    assert holder.stdin is not None
    stdin = holder.stdin

    def release_soon() -> None:
        time.sleep(0.3)
        stdin.write("\n")
        stdin.flush()

    threading.Thread(target=release_soon).start()
    started = time.monotonic()
    with LocalStore(tmp_path / "s", lock_timeout=60) as store:
        assert time.monotonic() - started >= 0.25
        store.put("mine now")


def test_lock_is_released_when_the_holder_dies(
    tmp_path: Path, holder: subprocess.Popen[str]
) -> None:
    """A killed holder leaves no stale lock: the session opens right away afterwards."""
    holder.kill()
    holder.wait()
    with LocalStore(tmp_path / "s") as store:
        assert store.read_log() == []


def test_second_store_in_the_same_process_is_refused(tmp_path: Path) -> None:
    """Two LocalStores on one directory conflict within one process too; close frees it."""
    first = LocalStore(tmp_path / "s")
    with pytest.raises(SessionLocked):
        LocalStore(tmp_path / "s")
    first.put("still usable")
    first.close()
    with LocalStore(tmp_path / "s") as second:
        assert second.has(second.put("still usable"))
