"""The bench's scratch directory: figures that do not depend on its random name."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.report import SCRATCH_PREFIX, run_bench, scratch_dir
from tests.benchmarks.test_bench_cli import _anthropic_file
from tests.benchmarks.test_replay import build

ROOT = Path(__file__).resolve().parents[2]
TOOLBUDGET = Path(sys.executable).parent / "toolbudget"
"""The console script the package installs: the real entry point."""


def test_scratch_dir_is_letters_only_and_removed_afterwards() -> None:
    """The directory's random part is ten lowercase letters; it is private and gone afterwards."""
    with scratch_dir() as path, scratch_dir() as other:
        assert re.fullmatch(r"toolbudget-bench-[a-z]{10}", path.name), path.name
        assert path != other
        assert path.stat().st_mode & 0o777 == 0o700
        (path / "session").mkdir()
    assert not path.exists() and not other.exists()


def test_the_same_replay_bills_the_same_tokens_every_run() -> None:
    """toolbudget's envelopes name the spilled file, yet three runs bill exactly the same."""
    trace = build([120_000, 300, 300, 90_000, 300, 300], name="hand/paths")
    billed = set()
    for _ in range(3):
        result = run_bench([trace], ["toolbudget"])
        ours = [r for r in result.replays if r.strategy == "toolbudget"]
        assert sum(int(r.notes.get("spilled", 0)) for r in ours) == 2  # two envelopes with paths
        billed.add(sum(r.billed_tokens for r in ours))
    assert len(billed) == 1, billed


def test_a_bench_stopped_by_sigterm_removes_its_scratch_directory(tmp_path: Path) -> None:
    """``kill`` (SIGTERM) of a running ``toolbudget bench`` exits non-zero and leaves no
    ``toolbudget-bench-*`` directory, with its spilled bodies, under the temporary directory."""
    traces = tmp_path / "traces"
    traces.mkdir()
    _anthropic_file(traces / "long.json", 600)  # long enough to be caught mid-replay
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(ROOT)}
    args = [str(TOOLBUDGET), "bench", "--traces", str(traces), "--strategies", "toolbudget"]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not list(tmp.glob(f"{SCRATCH_PREFIX}*")):
            assert proc.poll() is None, "the bench ended before its replay could be stopped"
            assert time.monotonic() < deadline, "no scratch directory appeared"
            time.sleep(0.02)
        time.sleep(0.5)  # inside the replay: sessions and bodies written
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code != 0
    assert list(tmp.glob(f"{SCRATCH_PREFIX}*")) == []
