"""``toolbudget bench`` end to end: the built-in set, a traces directory, and bad arguments."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import structlog
from typer.testing import CliRunner

from benchmarks.replay import ROW_KEYS
from budget.cli import app

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CHOSEN = "toolbudget,claude-code,codex"
"""A few strategies keep the test fast (the heavy peers import large SDKs)."""


@pytest.fixture(autouse=True)
def _structlog_restored() -> Iterator[None]:
    """The CLI configures structlog on the runner's stderr, closed after the call: undo it."""
    configured, saved = structlog.is_configured(), structlog.get_config()
    yield
    if configured:
        structlog.configure(**saved)
    else:
        structlog.reset_defaults()


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
    assert set(doc) == {"summary", "traces", "skipped", "calibration", "bound"}
    assert [r["strategy"] for r in doc["summary"]] == ["none", *CHOSEN.split(",")]
    for row in doc["summary"]:
        assert tuple(row) == ROW_KEYS
    assert len(doc["traces"]) == 3 * 4
    for row in doc["traces"]:
        assert set(row) == {"trace", "file", "format", *ROW_KEYS}
        assert row["trace"].startswith("builtin/")
    assert doc["skipped"] == []
    ours = next(r for r in doc["summary"] if r["strategy"] == "toolbudget")
    assert ours["overflows"] == 0
    assert ours["recoverable_share"] == 1.0
    assert ours["billed_ratio"] < 1.0
    # The bound: every trace's, their sum over none's, and each strategy's share of the saving.
    bound = doc["bound"]
    assert set(bound) == {"protect_rounds", "billed_tokens", "billed_ratio", "shares", "traces"}
    assert bound["protect_rounds"] == 5
    assert len(bound["traces"]) == 3
    assert bound["billed_tokens"] == pytest.approx(sum(bound["traces"].values()))
    base = next(r for r in doc["summary"] if r["strategy"] == "none")["billed_tokens"]
    assert bound["billed_ratio"] == pytest.approx(bound["billed_tokens"] / base)
    assert bound["shares"]["toolbudget"] == pytest.approx(
        (1 - ours["billed_ratio"]) / (1 - bound["billed_ratio"])
    )
    assert "bound: " in result.output and "toolbudget reaches" in result.output
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
    """A plain Anthropic message list with ``n`` rounds of a 3,000-character result."""
    messages: list[dict[str, object]] = [{"role": "user", "content": "list the files"}]
    for k in range(n):
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{k}", "name": "ls", "input": {}}],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"t{k}", "content": "f\n" * 1500}
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
