"""Findings of a hostile review of compaction's attachments: each a test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from budget import Budget, summarizers
from tests.compaction import build_log, compaction_config

_FILE = "def parse(text):\n    return text.split()  # the parser's source\n"


def _call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": call_id, "name": name, "input": args},
        ],
    }


def _result(call_id: str, text: str) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": call_id, "content": text},
        ],
    }


def _summary(tmp_path: Path, messages: list[dict[str, Any]]) -> str:
    config = compaction_config("manual")
    with Budget.open(tmp_path / "s", config, summarizer=summarizers.extractive()) as session:
        assert session.compact(messages)
        text = session.prepare(messages).messages[0]["content"]
    assert isinstance(text, str)
    return text


def test_a_file_snapshot_is_the_read_s_output_when_later_calls_repeat_its_id(
    tmp_path: Path,
) -> None:
    """With a server that names every call call_0, the file a compaction re-attaches shows what
    the read returned, never the output of a later bash call that reused the read's id."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Fix the parser.\nNever edit tests/."},
        _call("call_0", "read_file", {"path": "src/parser.py"}),
        _result("call_0", _FILE),
    ]
    for step in range(12):
        call_id = "call_0" if step < 9 else f"call_{step}"  # the tail's calls have ids of their own
        messages += [_call(call_id, "bash", {"cmd": "make"}), _result(call_id, build_log(step))]
    summary = _summary(tmp_path, messages)
    snapshot = summary.split('<file path="src/parser.py"', 1)[1].split("</file>", 1)[0]
    assert "the parser's source" in snapshot
    assert "compiling" not in snapshot


def test_a_rule_the_user_states_after_a_compaction_is_carried_by_the_next_one(
    tmp_path: Path,
) -> None:
    """The user's second message, sent after a first compaction, states a rule: the second
    compaction carries it verbatim, as one compaction over the same history would (it kept
    only the first checkpoint's constraints, so the rule was left to the summary's wording)."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Fix the parser.\nNever edit tests/."},
    ]
    for step in range(12):
        messages += [_call(f"a{step}", "bash", {}), _result(f"a{step}", build_log(step))]
    config = compaction_config("manual")
    path = tmp_path / "s"
    with Budget.open(path, config, summarizer=summarizers.extractive()) as session:
        assert session.compact(messages)
        messages.append({"role": "user", "content": "Also: always indent with tabs."})
        for step in range(12, 24):
            messages += [_call(f"a{step}", "bash", {}), _result(f"a{step}", build_log(step))]
        assert session.compact(messages)
        summary = session.prepare(messages).messages[0]["content"]
    constraints = summary.split("<user-constraints", 1)[1].split("</user-constraints>", 1)[0]
    assert "Never edit tests/." in constraints
    assert "Also: always indent with tabs." in constraints
    assert "compacted" not in constraints
    with Budget.open(path, config) as resumed:  # the checkpoint's record, not a recomputation
        assert resumed.prepare(messages).messages[0]["content"] == summary


def test_a_history_rebuilt_each_turn_is_summarized_as_it_was_sent(tmp_path: Path) -> None:
    """A caller that rebuilds its history from JSON every turn (equal messages, new objects)
    has its prefix summarized as the requests sent it, a spilled output as its envelope, as a
    caller keeping its objects does and as a resumed session does; the raw output was sent."""
    big = "".join(
        f"row {i}: a long line of the dump nobody needs in a summary\n" for i in range(900)
    )
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Fix the parser.\nNever edit tests/."},
        _call("dump", "bash", {}),
        _result("dump", big),
    ]
    for step in range(12):
        messages += [_call(f"a{step}", "bash", {}), _result(f"a{step}", build_log(step))]
    seen: list[str] = []

    def summarize(part: Any) -> str:
        seen.append(json.dumps(part))
        text = summarizers.extractive()(part)
        assert isinstance(text, str)
        return text

    config = compaction_config("manual").model_copy(update={"window": 32_000})
    with Budget.open(tmp_path / "s", config, summarizer=summarize) as session:
        session.prepare(json.loads(json.dumps(messages)))
        rebuilt = json.loads(json.dumps(messages))  # the next turn's history, read back
        session.prepare(rebuilt)
        assert session.compact(rebuilt)
    assert "[toolbudget] Output of bash" in seen[0]
    assert "row 450:" not in seen[0]  # the middle of the dump: no preview shows it
