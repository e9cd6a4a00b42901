"""Damaged and unusual recordings as users' machines write them, and misused bench options.

Each trace here is small and hand-made under ``tmp_path``: the rule under test is that the bench
scores every trace it can, names each one it cannot and why, and never scores a recording as a
shorter or different session than the one it holds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.importers import load_dir, load_file


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
