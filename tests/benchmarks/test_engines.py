"""The bench's engines: the Ray engine gives the local engine's figures, on a 2-CPU local cluster.

One Ray cluster (2 CPUs, no dashboard) is started for the whole module and shut down after it;
the engines replay a few public traces and a few generated sessions, and their JSON documents must
be equal but for the timings (``ms_median``, ``ms_p99``).
"""

from __future__ import annotations

import dataclasses
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from benchmarks import strategies
from benchmarks.importers import load_dir
from benchmarks.ray_engine import RayEngine, import_ray
from benchmarks.replay import LocalEngine, Replay, build_strategies, jobs_for, replay_trace
from benchmarks.report import as_json, run_bench
from benchmarks.strategies._base import Messages, StrategySession
from benchmarks.synthetic import generate
from benchmarks.trace import Request, Trace, Usage
from budget._errors import BudgetError, ConfigError
from budget.cli import app
from tests._ci import require_module

# One worker runs this module (make test passes --dist loadgroup): one Ray cluster per run, not
# one per xdist worker competing for the machine's two CPUs.
# Starting a Ray cluster costs seconds: the whole module is in the slow lane (make test, CI).
pytestmark = [pytest.mark.xdist_group("ray"), pytest.mark.slow]

TIMINGS = frozenset({"ms_median", "ms_p99"})
"""The JSON fields that are timings: the only ones allowed to differ between engines."""
CHOSEN = ["toolbudget", "claude-code", "codex", "observation-masking", "gemini-cli"]
"""Strategies that spill files, trim, truncate and re-trim (the heavy SDK peers left out)."""


def without_timings(doc: Any) -> Any:
    """``doc`` with every timing field removed, at any depth."""
    if isinstance(doc, dict):
        return {k: without_timings(v) for k, v in doc.items() if k not in TIMINGS}
    if isinstance(doc, list):
        return [without_timings(v) for v in doc]
    return doc


def _ray_module() -> ModuleType:
    """``ray`` (skipped when missing, a failure under CI), the process's log records left alone."""
    factory = logging.getLogRecordFactory()  # as import_ray keeps it: see its docstring
    try:
        require_module("ray", "ray")
    finally:
        logging.setLogRecordFactory(factory)
    return import_ray()


@pytest.fixture(scope="module")
def ray() -> Iterator[ModuleType]:
    """A local Ray cluster of 2 CPUs for this module, shut down (its processes ended) afterwards."""
    module = _ray_module()
    if module.is_initialized():
        module.shutdown()
    module.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        logging_level=logging.ERROR,
        log_to_driver=False,
    )
    try:
        yield module
    finally:
        module.shutdown()
    assert not module.is_initialized()


@pytest.fixture(autouse=True)
def _structlog_restored(structlog_restored: None) -> None:
    """The CLI configures structlog on the runner's stderr, closed after the call: undo it."""


def _small_public(shared_traces: Path, n: int) -> list[Trace]:
    """The ``n`` public traces with the fewest requests, one per format first."""
    found, _ = load_dir(shared_traces)
    found.sort(key=lambda t: (len(t.requests), t.name))
    picked: list[Trace] = []
    for trace in found:
        if trace.format not in {t.format for t in picked}:
            picked.append(trace)
    return picked[:n]


def test_ray_engine_json_equals_the_local_engines_on_public_and_generated_traces(
    ray: ModuleType, shared_traces: Path, tmp_path: Path
) -> None:
    """On public and generated traces the Ray engine's JSON equals the local one's but timings."""
    traces = [*_small_public(shared_traces, 4), *generate(3, seed=7)]
    assert len({t.format for t in traces}) >= 5
    local = run_bench(traces, CHOSEN, workdir=tmp_path / "local")
    # A workdir of another length and other characters: the figures must not depend on it.
    remote = run_bench(traces, CHOSEN, workdir=tmp_path / "ray-run-2", engine=RayEngine())
    a, b = as_json(local), as_json(remote)
    assert len(a["traces"]) == len(traces) * (1 + len(CHOSEN))
    ours = [r for r in a["traces"] if r["strategy"] == "toolbudget"]
    assert any(r["recoverable_share"] is not None for r in ours), "nothing was spilled or trimmed"
    assert without_timings(a) == without_timings(b)
    assert a != b or a["summary"][0]["ms_median"] is None  # timings are really measured per run


def test_ray_engine_calls_done_for_every_job_and_returns_jobs_in_order(
    ray: ModuleType, tmp_path: Path
) -> None:
    """Every job is reported once as it finishes, and the replays come back in the jobs' order."""
    traces = generate(4, seed=11)
    jobs = jobs_for(traces, build_strategies(["toolbudget"]), tmp_path)
    seen: list[tuple[str, str]] = []
    got = RayEngine().replay(jobs, lambda job, rep: seen.append((rep.trace, rep.strategy)))
    expected = [(j.trace.name, j.strategy.name) for j in jobs]
    assert [(r.trace, r.strategy) for r in got] == expected
    assert sorted(seen) == sorted(expected)
    assert not any(j.workdir.exists() for j in jobs), "a task left its replay directory behind"


class _Mutating:
    """A strategy that appends to the history it is given (which the replay forbids)."""

    name = "mutating"

    def open(self, trace: Trace, workdir: Path) -> StrategySession:
        return self

    def prepare(self, messages: Messages, *, usage: Usage | None, now: float | None) -> Messages:
        messages[0]["content"] = "changed"
        return messages

    def recover(self, call_id: str) -> str | None:
        return None


def test_a_replay_error_in_a_ray_task_is_still_a_budget_error(
    ray: ModuleType, tmp_path: Path
) -> None:
    """A strategy that modifies its input is named by a BudgetError raised through the Ray task."""
    trace = Trace(
        name="hand/mutated",
        path="m.json",
        format="anthropic",
        provider="anthropic",
        messages=({"role": "user", "content": "go"},),
        requests=(Request(1),),
    )
    jobs = jobs_for([trace], [_Mutating()], tmp_path)
    with pytest.raises(BudgetError, match="'mutating' modified the input messages"):
        RayEngine().replay(jobs)


def test_bench_cli_engine_ray_gives_the_local_json(ray: ModuleType, tmp_path: Path) -> None:
    """``toolbudget bench --engine ray`` writes the JSON ``--engine local`` writes, timings aside."""
    docs = []
    for engine in ("local", "ray"):
        out = tmp_path / f"{engine}.json"
        args = ["bench", "--generate", "3", "--seed", "5", "--strategies", "toolbudget,codex"]
        result = CliRunner().invoke(app, [*args, "--engine", engine, "--json", str(out)])
        assert result.exit_code == 0, result.output
        assert "All traces (3)" in result.output
        docs.append(orjson.loads(out.read_bytes()))
    assert without_timings(docs[0]) == without_timings(docs[1])


def test_bench_cli_refuses_ray_options_without_ray_and_unknown_engines() -> None:
    """--address or --workers with the local engine, an unknown engine, or --generate with
    --traces is a clear error."""
    runner = CliRunner()
    for args, words in (
        (["--workers", "2"], "--address and --workers are options of --engine ray"),
        (["--address", "auto"], "--address and --workers are options of --engine ray"),
        (["--engine", "spark"], "unknown engine 'spark'; known: local, ray"),
        (["--engine", "ray", "--address", "auto", "--workers", "2"], "a cluster at an address"),
        (["--traces", "."], "--generate replaces --traces: give one of them"),
    ):
        result = runner.invoke(app, ["bench", "--generate", "1", *args])
        assert result.exit_code == 2, result.output
        assert words in result.output


def test_bench_cli_names_the_ray_extra_when_ray_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without the ray package, ``--engine ray`` fails in one line naming ``toolbudget[ray]``."""
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    result = CliRunner().invoke(app, ["bench", "--generate", "1", "--engine", "ray"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: --engine ray needs the 'ray' package: pip install 'toolbudget[ray]'"
    ]


def test_importing_ray_for_the_engine_leaves_the_process_log_records_alone() -> None:
    """After the engine imports ray, a log record has no ``_ray_timestamp_ns`` field."""
    script = (
        "import logging\n"
        "from benchmarks.ray_engine import import_ray\n"
        "import_ray()\n"
        "record = logging.getLogger('app').makeRecord('app', 30, 'f', 1, 'm', (), None)\n"
        "print(sorted(k for k in vars(record) if 'ray' in k))\n"
    )
    _ray_module()
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_ray_engine_refuses_nonsense_settings() -> None:
    """A local cluster of no worker, or workers for a remote cluster, is a ConfigError."""
    with pytest.raises(ConfigError, match="at least 1"):
        RayEngine(workers=0)
    with pytest.raises(ConfigError, match="a cluster at an address"):
        RayEngine(address="auto", workers=2)


@pytest.mark.slow
def test_bench_engine_ray_starts_and_stops_its_own_local_cluster(tmp_path: Path) -> None:
    """Without a running cluster, ``--engine ray --workers 1`` starts one, replays, and stops it."""
    _ray_module()
    out = tmp_path / "r.json"
    script = (
        "import sys, ray\n"
        "from budget.cli import app\n"
        "try:\n"
        "    app(sys.argv[1:], standalone_mode=False)\n"
        "finally:\n"
        "    print('initialized after:', ray.is_initialized())\n"
    )
    args = ["bench", "--generate", "2", "--strategies", "toolbudget", "--engine", "ray"]
    done = subprocess.run(
        [sys.executable, "-c", script, *args, "--workers", "1", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    assert "initialized after: False" in done.stdout
    assert "All traces (2)" in done.stdout
    doc = orjson.loads(out.read_bytes())
    assert [r["strategy"] for r in doc["summary"]] == ["none", "toolbudget"]


def test_toolbudget_figures_do_not_depend_on_the_workdir_path(tmp_path: Path) -> None:
    """toolbudget's envelopes name a fixed directory, so two workdirs give the same figures."""
    big = "\n".join(f"line {k}: " + "x" * 70 for k in range(1200))  # ~96 KB: over the 50 KB cap
    trace = Trace(
        name="hand/spill",
        path="s.json",
        format="anthropic",
        provider="anthropic",
        messages=(
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "c1", "name": "Bash", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "c1", "content": big}],
            },
        ),
        requests=(Request(1, timestamp=10.0), Request(3, timestamp=20.0)),
        model="claude-sonnet-4-5",
    )
    toolbudget = strategies.get("toolbudget")
    # Same length, other character classes: a random temporary name differs like this.
    a = replay_trace(trace, toolbudget, tmp_path / "aaaaaaaa")
    b = replay_trace(trace, toolbudget, tmp_path / "12345678" / "deeper")
    assert a.replaced_chars == len(big) == a.recoverable_chars
    assert _figures(a) == _figures(b)


def _figures(replay: Replay) -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(replay).items() if k != "times_s"}


def test_local_engine_is_the_replay_loop(tmp_path: Path) -> None:
    """The local engine's replays equal replay_trace's, one by one, in the jobs' order."""
    traces = generate(2, seed=3)
    jobs = jobs_for(traces, build_strategies(["codex"]), tmp_path / "engine")
    got = LocalEngine().replay(jobs)
    direct = [
        replay_trace(j.trace, j.strategy, tmp_path / "direct" / str(k)) for k, j in enumerate(jobs)
    ]
    assert [_figures(r) for r in got] == [_figures(r) for r in direct]
