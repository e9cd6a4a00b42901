"""Text the bench did not write (file names, recorded session ids, ``--set`` values, output
paths) is shown as text: no rich markup in it and no undecodable byte of a file name stops the
run after the replay; a file skipped is named for what it is."""

from __future__ import annotations

import io
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from rich.console import Console
from typer.testing import CliRunner

from benchmarks.importers import load_dir
from benchmarks.report import run_bench
from budget.cli import app

GEMINI = (
    "gemini-cli/codemie-ai__codemie-code/tests/integration/metrics/fixtures/gemini/"
    "session-2025-12-01T21-45-5b959dae.json"
)
CLAUDE = (
    "claude-code/handgemacht-ai__claude-code-log/test/test_data/real_projects/"
    "-Users-dain-workspace-coderabbit-review-helper/agent-9fa17969.jsonl"
)


@pytest.fixture(autouse=True)
def _structlog_restored(structlog_restored: None) -> None:
    """The CLI configures structlog on the runner's stderr, closed after the call: undo it."""


def _gemini_with_session_id(shared_traces: Path, traces: Path, session_id: str) -> Path:
    """The public Gemini CLI session, its recorded session id replaced, under ``traces``."""
    doc = json.loads((shared_traces / GEMINI).read_text(encoding="utf-8"))
    doc["sessionId"] = session_id
    traces.mkdir(exist_ok=True)
    path = traces / "session.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_a_session_id_that_reads_as_markup_is_printed_as_text(
    shared_traces: Path, tmp_path: Path
) -> None:
    """A recorded session id like ``[/x]…`` names its trace in the calibration table as it is."""
    traces = tmp_path / "traces"
    _gemini_with_session_id(shared_traces, traces, "[/x]abcdef-0001")
    result = CliRunner().invoke(
        app, ["bench", "--traces", str(traces), "--strategies", "none,toolbudget", "--wide"]
    )
    assert result.exit_code == 0, result.output
    assert "gemini-cli/[/x]abcd" in result.output


def test_the_progress_bar_shows_a_markup_session_id_as_text(
    shared_traces: Path, tmp_path: Path
) -> None:
    """On a terminal the progress bar names the trace replayed, markup characters and all."""
    traces = tmp_path / "traces"
    _gemini_with_session_id(shared_traces, traces, "[/x]abcdef-0001")
    found, _ = load_dir(traces)
    out = io.StringIO()
    terminal = Console(file=out, force_terminal=True, width=200)
    result = run_bench(found, ["none"], console=terminal)
    assert [r.trace for r in result.replays] == ["gemini-cli/[/x]abcd"]


def _bench_claude(shared_traces: Path, tmp_path: Path, *extra: str) -> str:
    """The bench's output on the public Claude Code subagent session, copied under tmp_path."""
    traces = tmp_path / "traces"
    traces.mkdir()
    shutil.copy(shared_traces / CLAUDE, traces / "agent.jsonl")
    args = ["bench", "--traces", str(traces), "--strategies", "none,toolbudget", *extra]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return result.output


def test_a_set_value_that_reads_as_markup_is_printed_as_text(
    shared_traces: Path, tmp_path: Path
) -> None:
    """``--set model=[/x]`` is said in the table's header as it was typed."""
    output = _bench_claude(shared_traces, tmp_path, "--set", "model=[/x]")
    assert "model=[/x] (--set)" in output


def test_a_json_path_that_reads_as_markup_is_printed_as_text(
    shared_traces: Path, tmp_path: Path
) -> None:
    """A ``--json`` path holding ``[/b]`` is named whole in the line saying it was written."""
    out = tmp_path / "a[" / "b]" / "r.json"
    out.parent.mkdir(parents=True)
    output = _bench_claude(shared_traces, tmp_path, "--json", str(out))
    assert f"wrote {out}" in output.replace("\n", "")


def test_a_file_name_that_is_not_utf8_is_named_in_the_json(
    shared_traces: Path, tmp_path: Path
) -> None:
    """A trace and a bad file whose names hold a byte that is not UTF-8 are scored and skipped,
    named with the byte escaped, and the JSON report is written."""
    traces = tmp_path / "traces"
    traces.mkdir()
    shutil.copy(shared_traces / CLAUDE, traces / os.fsdecode(b"agent-\xff.jsonl"))
    (traces / os.fsdecode(b"broken-\xfe.json")).write_bytes(b"not json")
    out = tmp_path / "r.json"
    result = CliRunner().invoke(
        app,
        ["bench", "--traces", str(traces), "--strategies", "none,toolbudget", "--json", str(out)],
    )
    assert result.exit_code == 0, result.output
    doc = orjson.loads(out.read_bytes())
    assert {r["file"] for r in doc["traces"]} == {"agent-\\xff.jsonl"}
    assert [s["path"] for s in doc["skipped"]] == ["broken-\\xfe.json"]
    assert "skipped broken-\\xfe.json: " in result.output


def test_a_link_to_a_special_file_is_not_called_broken(shared_traces: Path, tmp_path: Path) -> None:
    """A link to a FIFO or to the null device is skipped as a link to a special file, not as a
    broken link, and the trace beside it is scored."""
    traces = tmp_path / "traces"
    traces.mkdir()
    shutil.copy(shared_traces / CLAUDE, traces / "agent.jsonl")
    os.mkfifo(tmp_path / "fifo")
    (traces / "fifo.json").symlink_to(tmp_path / "fifo")
    (traces / "null.jsonl").symlink_to(os.devnull)
    found, skipped = load_dir(traces)
    assert [t.path for t in found] == ["agent.jsonl"]
    reasons = {s.path: s.reason for s in skipped}
    assert set(reasons) == {"fifo.json", "null.jsonl"}
    assert all("a symbolic link to a special file" in why for why in reasons.values())


SUBAGENT = (
    "claude-code/handgemacht-ai__claude-code-log/test/test_data/real_projects/"
    "-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1/subagents/"
    "agent-a4ca7529859c158c2.jsonl"
)


def test_a_torn_subagent_sidecar_costs_its_note_not_the_session(
    shared_traces: Path, tmp_path: Path
) -> None:
    """A subagent's ``.meta.json`` cut mid-write leaves the subagent's session scored, its note
    saying the sidecar was not read."""
    traces = tmp_path / "traces"
    traces.mkdir()
    trace = traces / "agent-a4ca7529859c158c2.jsonl"
    shutil.copy(shared_traces / SUBAGENT, trace)
    sidecar = (shared_traces / SUBAGENT).with_suffix(".meta.json").read_bytes()
    trace.with_suffix(".meta.json").write_bytes(sidecar[: len(sidecar) // 2])
    found, skipped = load_dir(traces)
    assert skipped == []
    assert [t.name for t in found] == ["claude-code/agent-a4ca7529"]
    assert "not valid JSON" in found[0].meta["agent_sidecar"]


OPENHANDS_EVAL = (
    "openhands/All-Hands-AI__OpenHands/evaluation/benchmarks/multi_swe_bench/examples/output.jsonl"
)


def _negative_usage(line: bytes) -> bytes:
    """An instance whose every recorded response says -5 prompt tokens."""
    doc = json.loads(line)
    for event in doc["history"]:
        response = (event.get("tool_call_metadata") or {}).get("model_response")
        if isinstance(response, dict) and isinstance(response.get("usage"), dict):
            response["usage"]["prompt_tokens"] = -5
    return json.dumps(doc).encode()


def _no_history(line: bytes) -> bytes:
    """An instance without its event history."""
    doc = json.loads(line)
    del doc["history"]
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda line: line[:500], "instance 2: line 2 is not valid JSON"),
        (_no_history, "instance 2 has no 'history' list"),
        (_negative_usage, "recorded usage input_tokens is -5"),
    ],
)
def test_one_bad_instance_of_an_evaluation_output_costs_only_itself(
    shared_traces: Path, tmp_path: Path, damage: Callable[[bytes], bytes], why: str
) -> None:
    """An OpenHands ``output.jsonl`` whose second instance is torn, has no history or an
    impossible usage is named as skipped for that instance, and its other two are scored."""
    lines = (shared_traces / OPENHANDS_EVAL).read_bytes().splitlines()
    assert len(lines) == 3
    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "output.jsonl").write_bytes(
        b"\n".join([lines[0], damage(lines[1]), lines[2]]) + b"\n"
    )
    found, skipped = load_dir(traces)
    expected = {json.loads(line)["instance_id"] for line in (lines[0], lines[2])}
    assert {t.name.removeprefix("openhands/") for t in found} == expected
    assert [s.path for s in skipped] == ["output.jsonl"]
    assert why in skipped[0].reason


@pytest.mark.parametrize("third", ["scored", "refused"])
def test_every_bad_instance_is_named_when_the_loader_and_the_check_each_refuse_one(
    shared_traces: Path, tmp_path: Path, third: str
) -> None:
    """An ``output.jsonl`` whose first instance has an impossible usage and whose second is torn
    names both in its skip reason (whether its third is scored or refused too), where the check's
    refusal replaced the loader's and the torn instance went unnamed."""
    lines = (shared_traces / OPENHANDS_EVAL).read_bytes().splitlines()
    traces = tmp_path / "traces"
    traces.mkdir()
    last = lines[2] if third == "scored" else _negative_usage(lines[2])
    (traces / "output.jsonl").write_bytes(
        b"\n".join([_negative_usage(lines[0]), lines[1][:500], last]) + b"\n"
    )
    found, skipped = load_dir(traces)
    expected = [json.loads(lines[2])["instance_id"]] if third == "scored" else []
    assert [t.name.removeprefix("openhands/") for t in found] == expected
    assert [s.path for s in skipped] == ["output.jsonl"]
    assert "recorded usage input_tokens is -5" in skipped[0].reason
    assert "instance 2: line 2 is not valid JSON" in skipped[0].reason
