"""Hostile traces against the bench's promises: honest figures, skipped impossible usage, a
refused request told to the session, and the JSON written whatever happens to the table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from benchmarks.importers import load_dir
from budget.cli import app

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _structlog_restored(structlog_restored: None) -> None:
    """The CLI configures structlog on the runner's stderr, closed after the call: undo it."""


def _bench(traces: Path, out: Path, *extra: str) -> dict[str, Any]:
    result = CliRunner().invoke(
        app,
        [
            "bench",
            "--traces",
            str(traces),
            "--strategies",
            "none,toolbudget",
            "--json",
            str(out),
            *extra,
        ],
    )
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = orjson.loads(out.read_bytes())
    return doc


def _small_anthropic(tmp_path: Path) -> Path:
    """A two-request Anthropic list whose requests stay under the 1,024-token cache minimum."""
    listing = "\n".join(f"line {i} of the file with some words" for i in range(50))
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {"cmd": "cat"}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": listing}],
        },
        {"role": "assistant", "content": "done"},
    ]
    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "small.json").write_text(json.dumps(messages), encoding="utf-8")
    return traces


def _billed(doc: dict[str, Any], trace: str, strategy: str) -> float:
    return float(
        next(
            r["billed_tokens"]
            for r in doc["traces"]
            if r["trace"] == trace and r["strategy"] == strategy
        )
    )


def test_the_bound_never_bills_more_than_none(tmp_path: Path) -> None:
    """The bound (the least any strategy can bill) is never above what sending everything bills."""
    doc = _bench(_small_anthropic(tmp_path), tmp_path / "r.json")
    bound = doc["bound"]["traces"]["anthropic/small"]
    assert bound <= _billed(doc, "anthropic/small", "none")


def test_the_oracle_never_bills_less_than_the_bound(tmp_path: Path) -> None:
    """The oracle, which keeps the protected rounds, never bills under the bound."""
    doc = _bench(_small_anthropic(tmp_path), tmp_path / "r.json")
    oracle = doc["oracle"]["traces"]["anthropic/small"]["billed_tokens"]
    assert oracle >= doc["bound"]["traces"]["anthropic/small"]


def _gemini(tmp_path: Path, first_input: Any) -> Path:
    """A three-call Gemini CLI session whose first response records ``first_input`` prompt tokens."""
    messages: list[dict[str, Any]] = [{"type": "user", "content": "go"}]
    for i in range(3):
        messages.append(
            {
                "type": "gemini",
                "id": f"g{i}",
                "content": "",
                "model": "gemini-2.5-pro",
                "toolCalls": [
                    {
                        "id": f"c{i}",
                        "name": "run_shell_command",
                        "args": {"command": f"ls {i}"},
                        "result": [{"functionResponse": {"response": {"output": f"out {i}"}}}],
                    }
                ],
                "tokens": {
                    "input": first_input if i == 0 else 5000 + 100 * i,
                    "output": 5,
                    "cached": 0,
                },
            }
        )
    messages.append(
        {
            "type": "gemini",
            "id": "end",
            "content": "done",
            "model": "gemini-2.5-pro",
            "tokens": {"input": 5400, "output": 5, "cached": 0},
        }
    )
    path = tmp_path / "session.json"
    path.write_text(json.dumps({"sessionId": "5e551000-0000", "messages": messages}))
    return path


@pytest.mark.parametrize("first_input", [-4000, 4000.5, "4000"])
def test_an_impossible_gemini_prompt_count_is_skipped(tmp_path: Path, first_input: Any) -> None:
    """A negative, fractional or non-numeric recorded prompt count is skipped, not scored."""
    _gemini(tmp_path, first_input)
    traces, skipped = load_dir(tmp_path)
    assert traces == [], [t.requests[0].usage for t in traces]
    assert [s.path for s in skipped] == ["session.json"]


def test_the_replay_tells_toolbudget_when_the_provider_refused_its_request(
    tmp_path: Path,
) -> None:
    """A request over the window is refused and told to the session (``on_overflow``), which
    then trims under the stale floor too: toolbudget recovers where, never told, it sent every
    later request over the window with results too short for the floor."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(100):
        use = {"type": "tool_use", "id": f"t{i}", "name": "bash", "input": {"cmd": f"c{i}"}}
        messages.append({"role": "assistant", "content": [use]})
        text = "".join(f"out {i} line {k} of the listing\n" for k in range(50))[:1_500]
        result = {"type": "tool_result", "tool_use_id": f"t{i}", "content": text}
        messages.append({"role": "user", "content": [result]})
    messages.append({"role": "assistant", "content": "done"})
    traces = tmp_path / "traces"
    traces.mkdir()
    body = {"model": "claude-sonnet-4-5", "messages": messages}
    (traces / "small_results.json").write_text(json.dumps(body))
    doc = _bench(traces, tmp_path / "r.json", "--window", "20000")
    ours = next(r for r in doc["summary"] if r["strategy"] == "toolbudget")
    none = next(r for r in doc["summary"] if r["strategy"] == "none")
    assert none["overflows"] > 30
    assert ours["overflows"] <= 5, ours


def test_the_json_is_written_when_stdout_is_closed(tmp_path: Path) -> None:
    """`toolbudget bench --json F | head` still writes F: the table's reader leaving early does
    not lose the figures."""
    traces = _small_anthropic(tmp_path)
    out = tmp_path / "r.json"
    script = Path(sys.executable).parent / "toolbudget"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = ["bench", "--traces", str(traces), "--strategies", "none,toolbudget", "--json", str(out)]
    proc = subprocess.Popen(
        [str(script), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert proc.stdout is not None
    proc.stdout.close()  # the reader (head) is gone before the table is printed
    _, err = proc.communicate(timeout=120)
    assert out.is_file(), (proc.returncode, err.decode()[-500:])
    orjson.loads(out.read_bytes())
