"""Crash: sessions SIGKILLed at random points resume with byte-identical request copies.

The soak harness (``benchmarks/soak.py``) runs as its own process; it forks one child per run of
the conversation, so each trial is real processes killed with SIGKILL on a real filesystem. The
kill points are numbered filesystem calls of the store (drawn per seed across every phase: open,
log reads, body writes, log appends, read-back, close), or, in timer mode, random instants.
Here the figures it reports are checked, and the session directories it kept are inspected
independently: permissions, and every logged body against its hash.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.soak import verify_session
from tests.conversations import conversation

pytestmark = pytest.mark.slow  # the crash soak: forks and SIGKILLs hundreds of sessions

REPO = Path(__file__).resolve().parents[2]
ROUNDS = 40
# The sidecar's read and write (budget/tokens/_estimates_cache.py) are phases too: a kill inside either
# must still give byte-identical resumes (a torn estimates.bin is ignored, never trusted).
PHASES = {
    "open",
    "read_log",
    "read_meta",
    "put_many",
    "append_log",
    "get",
    "close",
    "read_sidecar",
    "write_sidecar",
}


def soak(tmp_path: Path, *args: str) -> dict[str, Any]:
    """Run ``python -m benchmarks.soak`` with ``args``; its figures as a dict."""
    out = tmp_path / "figures.json"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.soak", *args, "--json", str(out), "--quiet"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=300,
    )
    assert out.exists(), done.stderr[-3000:]
    figures: dict[str, Any] = json.loads(out.read_text())
    assert done.returncode == 0, (figures["errors"][:10], done.stderr[-3000:])
    return figures


def check_private(path: Path) -> int:
    """Assert the session is 0700 dirs and 0600 files throughout; return the entries checked."""
    checked = 0
    for root, dirs, files in os.walk(path):
        assert stat.S_IMODE(os.stat(root).st_mode) == 0o700, root
        for name in files:
            mode = os.lstat(Path(root) / name).st_mode
            assert stat.S_ISREG(mode) and stat.S_IMODE(mode) == 0o600, (root, name)
        checked += 1 + len(files) + 0 * len(dirs)
    return checked


# Seeds whose stratified first kills (one phase per trial, in turn) cover a torn log line: with
# the sidecar phases added, seeds 11 and 12 missed one. A third of the first kills land in a
# batch request whatever the seed (benchmarks/soak.py's kill_point).
@pytest.mark.parametrize(("seed", "trials"), [(13, 25), (14, 25)])
def test_sessions_killed_at_numbered_filesystem_calls_resume_byte_identical(
    tmp_path: Path, seed: int, trials: int, record_property: Any
) -> None:
    """Killed at random numbered store calls (1-2 kills a trial), every resumed request copy
    equals the unbroken run's, every logged body matches its hash, and nothing is lost."""
    work = tmp_path / "work"
    figures = soak(
        tmp_path,
        *("--trials", str(trials), "--seed", str(seed), "--rounds", str(ROUNDS)),
        *("--max-crashes", "2", "--workdir", str(work), "--keep"),
    )
    assert figures["trials"] == trials
    assert figures["kills"] >= trials  # the first kill of a trial always lands
    assert figures["mismatches"] == 0
    assert figures["final_decision_mismatches"] == 0
    assert figures["partial_files_visible"] == 0
    assert figures["lost"] == 0
    assert figures["errors"] == []
    assert figures["requests_compared"] >= trials * ROUNDS
    assert set(figures["kills_by_phase"]) >= PHASES  # stratified: every phase is hit
    assert figures["kills_by_mode"].get("torn", 0) > 0
    assert figures["damaged_lines_skipped"] > 0  # torn log lines met on resume, and skipped
    assert figures["kills_in_batch_requests"] > 0

    msgs, _ = conversation(seed, ROUNDS)
    verified = entries = 0
    for trial in sorted(work.glob("trial-*")):
        entries += check_private(trial)
        decisions, _results, lost = verify_session(trial, msgs)
        assert lost == 0, trial.name
        verified += decisions
    assert verified == figures["decisions_verified"]
    assert entries > trials
    for key in ("trials", "kills", "decisions_verified", "requests_compared", "lost"):
        record_property(f"reliability.crash.seed_{seed}.{key}", figures[key])
    record_property(f"reliability.crash.seed_{seed}.kills_by_op", figures["kills_by_op"])


def test_sessions_killed_at_random_instants_resume_byte_identical(
    tmp_path: Path, record_property: Any
) -> None:
    """Killed by the parent after a random delay (anywhere, not only at store calls), resumed
    sessions still give the unbroken run's bytes and lose nothing."""
    figures = soak(
        tmp_path,
        *("--trials", "8", "--seed", "13", "--rounds", str(ROUNDS), "--kill", "timer"),
        *("--max-crashes", "2", "--workdir", str(tmp_path / "work")),
    )
    assert figures["trials"] == 8
    assert figures["kills"] > 0
    assert figures["kills_by_mode"] == {"timer": figures["kills"]}
    assert figures["mismatches"] == 0
    assert figures["final_decision_mismatches"] == 0
    assert figures["partial_files_visible"] == 0
    assert figures["lost"] == 0
    assert figures["errors"] == []
    for key in ("trials", "kills", "decisions_verified", "requests_compared", "lost"):
        record_property(f"reliability.crash_timer.{key}", figures[key])


def test_sessions_killed_inside_a_group_commit_resume_byte_identical(
    tmp_path: Path, record_property: Any
) -> None:
    """Killed at calls of put_many (a request's bodies packed into one file or written one file
    each, fsync'd, renamed, their directories synced), before or after the call or mid-write,
    resumed sessions give the unbroken run's bytes, no partial body or pack is visible, and
    nothing is lost."""
    work = tmp_path / "work"
    figures = soak(
        tmp_path,
        *("--trials", "20", "--seed", "14", "--rounds", str(ROUNDS), "--phase", "put_many"),
        *("--max-crashes", "1", "--workdir", str(work), "--keep"),
    )
    assert figures["trials"] == 20
    assert list((work / "reference" / "bodies").glob("pack-*.pack"))  # batches were packed
    assert figures["kills_by_phase"] == {"put_many": figures["kills"]}
    # A kill point past the calls a child makes is rare, but the thread pool changes how many
    # calls a child makes from run to run: most trials must still be killed.
    assert figures["kills"] >= figures["trials"] // 2
    ops = set(figures["kills_by_op"])
    # The bodies' writes and fsyncs run on threads, so which call a kill number lands on varies
    # from run to run: the durability points must be hit, the other kinds are not counted on.
    assert {"write", "fsync"} <= ops
    assert figures["kills_in_batch_requests"] > 0
    assert figures["mismatches"] == 0
    assert figures["final_decision_mismatches"] == 0
    assert figures["partial_files_visible"] == 0
    assert figures["lost"] == 0
    assert figures["errors"] == []
    msgs, _ = conversation(14, ROUNDS)
    for trial in sorted(work.glob("trial-*")):
        check_private(trial)
        assert verify_session(trial, msgs)[2] == 0, trial.name
    for key in ("trials", "kills", "decisions_verified", "requests_compared", "lost"):
        record_property(f"reliability.crash_group.{key}", figures[key])
    record_property("reliability.crash_group.kills_by_op", figures["kills_by_op"])
