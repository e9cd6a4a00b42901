"""The headline table (docs/benchmark.md, quoted by README) is what the bench measures now."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _toolbudget_row() -> dict[str, str]:
    """docs/benchmark.md's headline row for toolbudget, by column, without bold marks."""
    lines = (ROOT / "docs" / "benchmark.md").read_text(encoding="utf-8").splitlines()
    header = next(line for line in lines if line.startswith("| strategy | billed × none |"))
    row = next(line for line in lines if line.startswith("| **toolbudget** |"))
    cells = [c.strip().strip("*") for c in row.strip("|").split("|")]
    return dict(zip([c.strip() for c in header.strip("|").split("|")], cells, strict=True))


@pytest.mark.slow
def test_the_documented_toolbudget_row_is_what_the_bench_measures(
    shared_traces: Path, tmp_path: Path
) -> None:
    """``toolbudget bench --traces`` on the public traces gives toolbudget's documented row:
    a policy change that moves a figure (62 prefix breaks had become 65) must update the docs."""
    out = tmp_path / "r.json"
    args = ["bench", "--traces", str(shared_traces), "--strategies", "toolbudget"]
    done = subprocess.run(
        [sys.executable, "-c", "from budget.cli import main; main()", *args, "--json", str(out)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    ours = next(
        s for s in orjson.loads(out.read_bytes())["summary"] if s["strategy"] == "toolbudget"
    )
    measured = {
        "billed × none": f"{ours['billed_ratio']:.3f}",
        "cached": f"{ours['cached_share']:.1%}",
        "peak tokens": f"{ours['peak_tokens']:,}",
        "over the window": f"{ours['overflows']:,}",
        "prefix breaks": f"{ours['prefix_breaks']:,}",
        "read-backs": f"{ours['readbacks']:,}",
        "quoted lines visible": f"{ours['quoted_visibility']:.1%}",
    }
    documented = _toolbudget_row()
    assert {k: documented[k] for k in measured} == measured
