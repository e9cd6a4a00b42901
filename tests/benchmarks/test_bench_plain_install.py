"""``toolbudget bench`` on a plain ``pip install`` (no extras) in a fresh virtualenv."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.benchmarks.test_bench_cli import _anthropic_file

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_bench_runs_on_a_plain_install_and_names_the_extra_of_each_missing_peer(
    tmp_path: Path,
) -> None:
    """In a fresh venv with ``pip install .`` only, bench skips the langchain and openai-agents
    peers with one line naming their extra, runs the rest, and refuses --plots up front."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    bin_dir = venv / "bin"
    # Only this checkout's own files: the venv and caches beside it are not part of the package.
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    install = subprocess.run(
        [str(bin_dir / "pip"), "install", "-q", str(ROOT)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    probe = subprocess.run(
        [str(bin_dir / "python"), "-c", "import langchain"], capture_output=True, env=env
    )
    assert probe.returncode != 0, "a plain install must not bring langchain"
    traces = tmp_path / "traces"
    traces.mkdir()
    _anthropic_file(traces / "a.json", 4)
    out = tmp_path / "r.json"
    args = [str(bin_dir / "toolbudget"), "bench", "--traces", str(traces)]
    args += ["--strategies", "toolbudget,langchain,openai-agents,claude-code"]
    run = subprocess.run(
        [*args, "--json", str(out)], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    skipped = [line for line in run.stderr.splitlines() if line.startswith("skipping ")]
    assert skipped == [
        "skipping langchain: needs the 'langchain' package: pip install 'toolbudget[langchain]' "
        "(or 'toolbudget[bench]' for every peer)",
        "skipping openai-agents: needs the 'agents' package: pip install "
        "'toolbudget[openai-agents]' (or 'toolbudget[bench]' for every peer)",
    ]
    summary = orjson.loads(out.read_bytes())["summary"]
    assert [r["strategy"] for r in summary] == ["none", "toolbudget", "claude-code"]
    plots = subprocess.run(
        [*args, "--plots", str(tmp_path / "p")], capture_output=True, text=True, env=env
    )
    assert plots.returncode == 2
    assert plots.stderr.strip().splitlines()[-1].startswith("error: --plots needs matplotlib")
    assert "All traces" not in plots.stdout
