"""``toolbudget bench`` end to end: the built-in set, a traces directory, and bad arguments."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from benchmarks.replay import ROW_KEYS
from budget.cli import app
from tests._entry import run_toolbudget

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CHOSEN = "toolbudget,claude-code,codex"
"""A few strategies keep the test fast (the heavy peers import large SDKs)."""


@pytest.fixture(autouse=True)
def _structlog_restored(structlog_restored: None) -> None:
    """The CLI configures structlog on the runner's stderr, closed after the call: undo it."""


@pytest.mark.slow
def test_bench_on_the_builtin_set_writes_json_and_charts(tmp_path: Path) -> None:
    """With no --traces the built-in sessions run; the JSON has exactly the keys, charts exist."""
    out, plots = tmp_path / "r.json", tmp_path / "p"
    result = CliRunner().invoke(
        app, ["bench", "--strategies", CHOSEN, "--json", str(out), "--plots", str(plots)]
    )
    assert result.exit_code == 0, result.output
    assert "All traces (3)" in result.output
    assert "staleness batches" in result.output
    doc = orjson.loads(out.read_bytes())
    assert set(doc) == {
        "summary",
        "traces",
        "skipped",
        "calibration",
        "bound",
        "settings",
        "attribution",
        "oracle",
        "previews",
    }
    assert set(doc["attribution"]) == {"none", "toolbudget"}
    assert [r["strategy"] for r in doc["summary"]] == ["none", *CHOSEN.split(",")]
    for row in doc["summary"]:
        assert tuple(row) == ROW_KEYS
    assert len(doc["traces"]) == 3 * 4
    for row in doc["traces"]:
        assert set(row) == {"trace", "file", "format", "window", *ROW_KEYS}
        assert row["trace"].startswith("builtin/")
    assert doc["skipped"] == []
    ours = next(r for r in doc["summary"] if r["strategy"] == "toolbudget")
    assert ours["overflows"] == 0
    assert ours["recoverable_share"] == 1.0
    assert ours["billed_ratio"] < 1.0
    # The bound: every trace's, their sum over none's, and each strategy's share of the saving.
    bound = doc["bound"]
    keys = {"protect_rounds", "protect_turns", "billed_tokens", "billed_ratio", "shares", "traces"}
    assert set(bound) == keys
    assert (bound["protect_rounds"], bound["protect_turns"]) == (5, 2)
    assert len(bound["traces"]) == 3
    assert bound["billed_tokens"] == pytest.approx(sum(bound["traces"].values()))
    base = next(r for r in doc["summary"] if r["strategy"] == "none")["billed_tokens"]
    assert bound["billed_ratio"] == pytest.approx(bound["billed_tokens"] / base)
    assert bound["shares"]["toolbudget"] == pytest.approx(
        (1 - ours["billed_ratio"]) / (1 - bound["billed_ratio"])
    )
    assert "bound: " in result.output and "toolbudget reaches" in result.output
    # The oracle: between the bound and none on every trace, its share computed the same way.
    oracle = doc["oracle"]
    assert set(oracle["traces"]) == set(bound["traces"])
    for name, entry in oracle["traces"].items():
        assert bound["traces"][name] <= entry["billed_tokens"] + 1e-6
        assert entry["billed_ratio"] <= 1.0
    assert oracle["shares"]["toolbudget"] == pytest.approx(
        (1 - ours["billed_ratio"]) / (1 - oracle["billed_ratio"])
    )
    assert "oracle: " in result.output
    pngs = sorted(plots.glob("*.png"))
    assert [p.name for p in pngs] == [
        "billed_tokens.png",
        "cost_vs_visibility.png",
        "request_sizes.png",
    ]
    for png in pngs:
        data = png.read_bytes()
        assert len(data) > 1000
        assert data.startswith(PNG_MAGIC)


def _anthropic_file(path: Path, n: int) -> None:
    """A plain Anthropic message list with ``n`` rounds of a 3,000-character result, each its
    own, from a call of its own (a repeat or a re-run would be shown as a pointer to the first)."""
    messages: list[dict[str, object]] = [{"role": "user", "content": "list the files"}]
    for k in range(n):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": f"t{k}", "name": "ls", "input": {"dir": f"d{k}"}}
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"t{k}",
                        "content": (f"{k:04d}\n" + "f\n" * 1500)[:3000],
                    }
                ],
            }
        )
    path.write_bytes(orjson.dumps({"system": "be brief", "messages": messages}))


def test_bench_on_a_traces_directory_lists_skipped_files(tmp_path: Path) -> None:
    """--traces loads every file, --limit keeps the first traces, unreadable files are listed."""
    traces = tmp_path / "traces"
    traces.mkdir()
    _anthropic_file(traces / "a.json", 4)
    _anthropic_file(traces / "b.json", 6)
    (traces / "broken.json").write_text("{not json")
    out = tmp_path / "r.json"
    result = CliRunner().invoke(
        app,
        [
            "bench",
            *("--traces", str(traces), "--strategies", "toolbudget"),
            *("--limit", "1", "--window", "2000", "--json", str(out)),
        ],
    )
    assert result.exit_code == 0, result.output
    doc = orjson.loads(out.read_bytes())
    assert [(r["trace"], r["strategy"]) for r in doc["traces"]] == [
        ("anthropic/a", "none"),
        ("anthropic/a", "toolbudget"),
    ]
    assert doc["traces"][0]["requests"] == 5
    assert doc["traces"][0]["file"] == "a.json"
    assert doc["traces"][0]["overflows"] > 0  # 4 results of about 750 tokens pass 2,000
    assert [s["path"] for s in doc["skipped"]] == ["broken.json"]
    assert "not valid JSON" in doc["skipped"][0]["reason"]


def test_bench_refuses_unknown_strategies_and_missing_traces(tmp_path: Path) -> None:
    """An unknown strategy or a missing traces directory is an error naming it, exit code 2."""
    result = CliRunner().invoke(app, ["bench", "--strategies", "toolbudget,nope"])
    assert result.exit_code == 2
    assert "unknown strategy nope" in result.output
    result = CliRunner().invoke(app, ["bench", "--traces", str(tmp_path / "absent")])
    assert result.exit_code == 2
    assert "absent" in result.output


def test_bench_limit_takes_the_first_generated_traces() -> None:
    """``--generate 2 --limit 1`` replays one trace, where --limit was ignored and both ran."""
    result = CliRunner().invoke(
        app, ["bench", "--generate", "2", "--limit", "1", "--strategies", "none"]
    )
    assert result.exit_code == 0, result.output
    assert "All traces (1)" in result.stdout


def _traces(tmp_path: Path) -> Path:
    """A traces directory with two small Anthropic traces."""
    traces = tmp_path / "traces"
    traces.mkdir()
    _anthropic_file(traces / "a.json", 4)
    _anthropic_file(traces / "b.json", 6)
    return traces


def test_bench_refuses_a_json_path_that_is_one_of_its_traces(tmp_path: Path) -> None:
    """``--json`` naming a trace file under ``--traces`` exits 2 before the replay and leaves the
    trace as it was, where the figures overwrote the recording."""
    traces = _traces(tmp_path)
    before = (traces / "b.json").read_bytes()
    args = ["bench", "--traces", str(traces), "--strategies", "none"]
    result = CliRunner().invoke(app, [*args, "--json", str(traces / "b.json")])
    assert result.exit_code == 2, result.output
    assert f"error: --json {traces / 'b.json'} is the trace b.json under --traces" in result.stderr
    assert (traces / "b.json").read_bytes() == before


def test_bench_refuses_unwritable_outputs_before_the_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--plots naming a file or under one, --plots without matplotlib, --json into a missing
    directory: one error line and exit 2 before any trace is replayed."""
    traces = _traces(tmp_path)
    a_file = tmp_path / "taken.png"
    a_file.write_bytes(b"x")
    base = ["bench", "--traces", str(traces), "--strategies", "toolbudget"]
    cases = {
        "is a file": [*base, "--plots", str(a_file)],
        "is a file, not a directory": [*base, "--plots", str(a_file / "charts")],
        "no directory": [*base, "--json", str(tmp_path / "nope" / "dir" / "r.json")],
    }
    for expected, args in cases.items():
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        assert result.stderr.count("\n") == 1 and expected in result.stderr
        assert "All traces" not in result.stdout
    assert not (tmp_path / "nope").exists()
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    result = CliRunner().invoke(app, [*base, "--plots", str(tmp_path / "p")])
    assert result.exit_code == 2
    assert "--plots needs matplotlib: pip install 'toolbudget[bench]'" in result.stderr
    assert "All traces" not in result.stdout


def test_bench_skips_a_peer_whose_package_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A peer whose package is not importable is skipped with one line naming its extra."""
    monkeypatch.setitem(sys.modules, "langchain", None)
    out = tmp_path / "r.json"
    result = CliRunner().invoke(
        app,
        [
            "bench",
            *("--traces", str(_traces(tmp_path)), "--strategies", "toolbudget,langchain"),
            *("--json", str(out)),
        ],
    )
    assert result.exit_code == 0, result.output
    assert (
        "skipping langchain: needs the 'langchain' package: pip install 'toolbudget[langchain]'"
        in result.stderr
    )
    assert [r["strategy"] for r in orjson.loads(out.read_bytes())["summary"]] == [
        "none",
        "toolbudget",
    ]


def test_bench_table_fits_100_columns_with_a_legend(tmp_path: Path) -> None:
    """At COLUMNS=100 every line fits, every strategy name is whole, and a legend explains the
    columns and the batch triggers; --wide shows every column."""
    from benchmarks.strategies import names

    args = ["bench", "--traces", str(_traces(tmp_path)), "--window", "2000"]
    args += ["--strategies", "toolbudget,opencode,openai-agents,anthropic-context-editing"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100
    for name in ("opencode", "openai-agents", "anthropic-context-editing"):
        assert any(f" {name} " in line for line in lines), name
    assert "…" not in result.stdout
    for word in ("visible", "breaks", "recoverable", "×none", "pays", "no_cache", "cold_cache"):
        assert any(line.lstrip().startswith(word + " ") for line in lines), word
    header = next(line for line in lines if line.lstrip().startswith("strategy "))
    assert "ms p99" not in header
    assert "more columns with --wide: " in result.stdout
    wide = CliRunner().invoke(app, [*args, "--wide"], env={"COLUMNS": "100"})
    assert wide.exit_code == 0, wide.output
    assert "ms p99" in wide.stdout and "quoted vis" in wide.stdout
    assert len(names()) >= 12


def test_bench_prints_each_skipped_file_with_its_reason(tmp_path: Path) -> None:
    """Each unreadable file is named on stderr with its reason, once (the reason's own prefix of
    its full path is left out), also when no trace is left."""
    traces = _traces(tmp_path)
    (traces / "broken.json").write_text("{not json")
    result = CliRunner().invoke(
        app, ["bench", "--traces", str(traces), "--strategies", "toolbudget"]
    )
    assert result.exit_code == 0, result.output
    assert "skipped broken.json: unrecognized trace format: not valid JSON" in result.stderr
    assert str(traces / "broken.json") not in result.stderr
    only_bad = tmp_path / "bad"
    only_bad.mkdir()
    (only_bad / "x.json").write_text("{not json")
    (only_bad / "y.json").write_text("[1, 2]")
    result = CliRunner().invoke(app, ["bench", "--traces", str(only_bad)])
    assert result.exit_code == 2
    assert "skipped x.json:" in result.stderr and "not valid JSON" in result.stderr
    assert "skipped y.json:" in result.stderr
    assert "2 file(s) skipped" in result.stderr


def test_calibration_fits_100_columns_with_every_figure_whole(shared_traces: Path) -> None:
    """At COLUMNS=100 the calibration of real traces shows whole figures, never a cut cell."""
    args = ["bench", "--traces", str(shared_traces), "--limit", "3", "--strategies", "toolbudget"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    assert "Calibration:" in result.stdout
    assert max(len(line) for line in result.stdout.splitlines()) <= 100
    assert "…" not in result.stdout, result.stdout
    assert "claude-code (3)" in result.stdout
    lines = result.stdout.splitlines()
    header = next(line for line in lines if line.lstrip().startswith("strategy "))
    hidden = next(line for line in lines if "more columns with --wide: " in line)
    named = hidden.split(": ", 1)[1].split(", ")
    assert "ms p99" in named
    assert not [name for name in named if f" {name} " in f"{header} "]
    # Nothing compacted at the default window: compaction's columns are not even offered.
    assert "compactions" not in result.stdout
    wide = CliRunner().invoke(app, [*args, "--wide"], env={"COLUMNS": "100"})
    assert wide.exit_code == 0, wide.output
    assert "cache rules" in wide.stdout and "claude-code/" in wide.stdout


def test_traces_with_no_later_quotes_are_said_to_flatter(
    tmp_path: Path, shared_traces: Path
) -> None:
    """Where no result line is quoted later, the bench says read-backs cannot be charged; where
    the agent quotes its results (a recorded session), it does not."""
    traces = tmp_path / "traces"
    traces.mkdir()
    _anthropic_file(traces / "a.json", 4)  # "f" lines the assistant never quotes
    flat = CliRunner().invoke(app, ["bench", "--traces", str(traces), "--strategies", "toolbudget"])
    assert flat.exit_code == 0, flat.output
    assert "no result line is quoted later" in " ".join(flat.output.split())
    recorded = CliRunner().invoke(
        app,
        ["bench", "--traces", str(shared_traces / "codex-cli"), "--strategies", "toolbudget"],
    )
    assert recorded.exit_code == 0, recorded.output
    assert "no result line is quoted later" not in " ".join(recorded.output.split())


def test_a_usage_error_comes_before_the_lines_naming_missing_peers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With peers' extras missing, a traces directory that does not exist is the only line said."""
    from benchmarks import strategies as registry

    monkeypatch.setattr(registry, "missing", lambda name: "pip install 'toolbudget[bench]'")
    out = CliRunner().invoke(app, ["bench", "--traces", str(tmp_path / "nowhere")])
    assert out.exit_code == 2
    assert out.stderr.strip().splitlines() == [
        f"error: traces directory {tmp_path / 'nowhere'} does not exist or is not a directory"
    ]


@pytest.mark.parametrize("spelling", ["t", "t/", "other/../t", "link", "."])
def test_bench_names_a_skipped_file_once_however_traces_is_spelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    """``--traces`` given relative, with a trailing slash, through ``..``, through a symbolic
    link or as ``.``: the skipped file is named once, relative to it."""
    traces = tmp_path / "t"
    (traces / "sub").mkdir(parents=True)
    (traces / "sub" / "x.json").write_text("{not json")
    (tmp_path / "other").mkdir()
    (tmp_path / "link").symlink_to(traces)
    monkeypatch.chdir(traces if spelling == "." else tmp_path)
    result = CliRunner().invoke(app, ["bench", "--traces", spelling, "--strategies", "toolbudget"])
    skipped = [line for line in result.stderr.splitlines() if line.startswith("skipped")]
    assert len(skipped) == 1, result.stderr
    assert skipped[0].startswith("skipped sub/x.json: unrecognized trace format: not valid JSON")
    assert skipped[0].count("x.json") == 1


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (a disk always full)")
def test_bench_on_a_full_disk_says_so_in_one_line_after_writing_the_json(tmp_path: Path) -> None:
    """bench with its table going to a full disk exits 2 with one line saying so, where it ended
    on a traceback; the JSON, written first, is whole."""
    out = tmp_path / "r.json"
    args = ["bench", "--generate", "1", "--strategies", "none", "--json", str(out)]
    done = run_toolbudget(args, cwd=tmp_path, stdout=Path("/dev/full"))
    assert done.returncode == 2, done.stderr
    assert done.stderr.endswith("error: cannot write to standard output: No space left on device\n")
    assert "Traceback" not in done.stderr
    assert orjson.loads(out.read_bytes())["summary"]
