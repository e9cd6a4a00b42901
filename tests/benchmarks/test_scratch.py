"""The bench's scratch directory: figures that do not depend on its random name."""

from __future__ import annotations

import re

from benchmarks.report import run_bench, scratch_dir
from tests.benchmarks.test_replay import build


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
