"""Damaged and unusual recordings as users' machines write them, and misused bench options.

Each trace here is small and hand-made under ``tmp_path``: the rule under test is that the bench
scores every trace it can, names each one it cannot and why, and never scores a recording as a
shorter or different session than the one it holds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from benchmarks.importers import load_dir, load_file
from budget.cli import app
from tests._entry import run_toolbudget


@pytest.fixture(autouse=True)
def _structlog_restored(structlog_restored: None) -> None:
    """The CLI configures structlog on the runner's stderr, closed after the call: undo it."""


def _lines(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def _token_count(prompt: int) -> dict[str, Any]:
    last = {"input_tokens": prompt, "cached_input_tokens": 0, "output_tokens": 5}
    return {
        "type": "event_msg",
        "payload": {"type": "token_count", "info": {"last_token_usage": last}},
    }


def _codex_shell_rollout(path: Path) -> Path:
    """A Codex CLI rollout whose shell calls are ``local_shell_call`` items."""
    lines: list[dict[str, Any]] = [
        {"type": "session_meta", "payload": {"id": "5be11000-0000", "base_instructions": "sys"}},
        {"type": "response_item", "payload": {"type": "message", "role": "user", "content": "go"}},
    ]
    for i in range(3):
        action = {"type": "exec", "command": ["ls", str(i)]}
        call = {"type": "local_shell_call", "call_id": f"c{i}", "action": action}
        output = (
            {"type": "function_call_output", "call_id": f"c{i}", "output": f"out {i}"}
            if i < 2  # Codex CLI answers with a function_call_output; the API with its own item
            else {"type": "local_shell_call_output", "id": f"c{i}", "output": f"out {i}"}
        )
        lines += [
            {"type": "response_item", "payload": call},
            _token_count(100 * (i + 1)),
            {"type": "response_item", "payload": output},
        ]
    done = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "ok"}],
    }
    lines += [{"type": "response_item", "payload": done}, _token_count(400)]
    return _lines(path, lines)


def test_codex_local_shell_calls_are_tool_calls_with_their_results(tmp_path: Path) -> None:
    """A Codex ``local_shell_call`` is a tool call its output answers, not a result for no call."""
    (trace,) = load_file(_codex_shell_rollout(tmp_path / "rollout.jsonl"), tmp_path)
    calls = [b for m in trace.messages for b in m["content"] if b["type"] == "tool_use"]
    results = [b for m in trace.messages for b in m["content"] if b["type"] == "tool_result"]
    assert [(c["id"], c["name"], c["input"]["command"]) for c in calls] == [
        ("c0", "local_shell", ["ls", "0"]),
        ("c1", "local_shell", ["ls", "1"]),
        ("c2", "local_shell", ["ls", "2"]),
    ]
    assert [(r["tool_use_id"], r["content"][0]["text"]) for r in results] == [
        ("c0", "out 0"),
        ("c1", "out 1"),
        ("c2", "out 2"),
    ]
    assert len(trace.requests) == 4
    assert "import_notes" not in trace.meta


def _claude_session(
    calls: int, sid: str = "7e570000-0000", usage: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """A Claude Code session of ``calls`` tool calls and a closing answer, one line per turn
    (``usage``: what every response records)."""
    lines: list[dict[str, Any]] = []

    def add(kind: str, message: dict[str, Any]) -> None:
        uuid = f"u{len(lines)}"
        parent = lines[-1]["uuid"] if lines else None
        line = {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": sid}
        lines.append({**line, "isSidechain": False, "message": message})

    if usage is None:
        usage = {"input_tokens": 3, "cache_read_input_tokens": 50, "output_tokens": 2}
    add("user", {"role": "user", "content": "go"})
    for i in range(calls):
        use = {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": "ls"}}
        add("assistant", {"role": "assistant", "id": f"m{i}", "content": [use], "usage": usage})
        result = {"type": "tool_result", "tool_use_id": f"t{i}", "content": f"out {i}"}
        add("user", {"role": "user", "content": [result]})
    end = [{"type": "text", "text": "done"}]
    add("assistant", {"role": "assistant", "id": "m-end", "content": end, "usage": usage})
    return lines


def test_a_short_session_cut_mid_write_is_scored_without_its_torn_line(tmp_path: Path) -> None:
    """A session of fewer lines than the format check reads, its last line torn, still loads."""
    body = "".join(json.dumps(line) + "\n" for line in _claude_session(3))
    (tmp_path / "torn.jsonl").write_text(body + '{"type": "assistant", "mess', encoding="utf-8")
    traces, skipped = load_dir(tmp_path)
    assert skipped == []
    assert [len(t.requests) for t in traces] == [4]


def test_a_corrupt_line_is_named_by_its_line_number_in_the_file(tmp_path: Path) -> None:
    """A bad line among the first ones is named by the number an editor shows, blank lines counted."""
    lines = [json.dumps(line) for line in _claude_session(3)]
    lines[4] = lines[4][:30]
    (tmp_path / "bad.jsonl").write_text("\n\n".join(lines) + "\n", encoding="utf-8")
    traces, skipped = load_dir(tmp_path)
    assert traces == []
    assert [s.path for s in skipped] == ["bad.jsonl"]
    assert f"{tmp_path / 'bad.jsonl'}: line 9 is not valid JSON" in skipped[0].reason


def test_a_session_whose_thread_breaks_is_named_not_scored_as_its_tail(tmp_path: Path) -> None:
    """A line missing mid-session breaks the parent chain: the file is skipped with why, not
    replayed as the few requests after the break."""
    lines = _claude_session(12)
    del lines[10]  # a tool result: the next answer's parent is no longer in the file
    _lines(tmp_path / "broken.jsonl", lines)
    traces, skipped = load_dir(tmp_path)
    assert traces == []
    assert [s.path for s in skipped] == ["broken.jsonl"]
    assert "line 11's parent 'u10' is not in the file" in skipped[0].reason
    assert "the 5 model response(s) before it would be left out" in skipped[0].reason


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_a_json_path_that_takes_no_write_is_refused_before_the_replay(tmp_path: Path) -> None:
    """--json in an existing directory that takes no new file is one error line before the replay."""
    _lines(tmp_path / "traces" / "s.jsonl", _claude_session(3))
    args = ["bench", "--traces", str(tmp_path / "traces"), "--strategies", "none"]
    result = CliRunner().invoke(app, [*args, "--json", "/proc/self/r.json"])
    assert result.exit_code == 2, result.output
    assert result.stderr == "error: --json /proc/self/r.json: cannot write /proc/self\n"
    assert "All traces" not in result.stdout


def test_traces_fetch_into_an_unset_variable_writes_nothing_here(tmp_path: Path) -> None:
    """``toolbudget traces fetch ""`` (an unset variable) is refused, not a download into the
    current directory."""
    done = run_toolbudget(["traces", "fetch", "", "--source", "http://127.0.0.1:9"], cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("error: directory '.' is the current directory as an unset")
    assert done.stderr.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_symbolic_links_that_give_no_trace_are_named(tmp_path: Path) -> None:
    """A broken link, a link loop and a link to a directory are each named as skipped, not
    passed over in silence, and the real trace beside them is scored."""
    root = tmp_path / "traces"
    _lines(root / "real" / "s.jsonl", _claude_session(3))
    (root / "gone.jsonl").symlink_to("nowhere.jsonl")
    (root / "loop.jsonl").symlink_to("loop.jsonl")
    (root / "more").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    _lines(tmp_path / "elsewhere" / "t.jsonl", _claude_session(2))
    traces, skipped = load_dir(root)
    assert [t.path for t in traces] == ["real/s.jsonl"]
    reasons = {s.path: s.reason for s in skipped}
    assert sorted(reasons) == ["gone.jsonl", "loop.jsonl", "more"]
    assert "a broken symbolic link" in reasons["gone.jsonl"]
    assert "a broken symbolic link" in reasons["loop.jsonl"]
    assert "a symbolic link to a directory, not followed" in reasons["more"]


def test_a_fractional_claude_code_token_count_is_skipped(tmp_path: Path) -> None:
    """A Claude Code response recording 3.7 input tokens is skipped, as docs/benchmark.md
    promises of an impossible usage (the importer rounded it to 3 before)."""
    usage = {"input_tokens": 3.7, "cache_read_input_tokens": 50, "output_tokens": 2}
    lines = _claude_session(3, usage=usage)
    (tmp_path / "frac.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    traces, skipped = load_dir(tmp_path)
    assert traces == [], [t.requests[0].usage for t in traces]
    assert [s.path for s in skipped] == ["frac.jsonl"]
