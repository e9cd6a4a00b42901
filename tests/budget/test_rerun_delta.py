"""Re-run deltas in a session (issue 32 item 2): a repeated call's spilled result is previewed
as its diff against the earlier result's stored text, naming that ref; never against a result
whose text the store does not hold."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from budget import Budget
from budget.formats._common import call_key
from budget.previews import PREVIEW_VERSION, apply_delta

RUN = "".join(f"tests/test_mod.py::test_{i:04d} PASSED\n" for i in range(300))
RERUN = RUN.replace("test_0150 PASSED", "test_0150 FAILED")
CONFIG: dict[str, Any] = {"result_cap": 3_000, "preview_chars": 1_000, "fsync": False}


def call(cid: str, command: str, **extra: Any) -> dict[str, Any]:
    """An assistant message running ``command`` with the bash tool."""
    tool_use = {
        "type": "tool_use",
        "id": cid,
        "name": "bash",
        "input": {"command": command, **extra},
    }
    return {"role": "assistant", "content": [tool_use]}


def result(cid: str, text: str) -> dict[str, Any]:
    """The user message holding ``text`` as call ``cid``'s result."""
    block = {"type": "tool_result", "tool_use_id": cid, "content": text}
    return {"role": "user", "content": [block]}


def shown(messages: list[Any], i: int) -> str:
    """The text message ``i``'s (only) tool result shows."""
    text: str = messages[i]["content"][0]["content"]
    return text


def test_a_rerun_is_previewed_as_its_diff_against_the_stored_earlier_result(tmp_path: Path) -> None:
    """The same command run again, one line changed: the preview is that diff, naming the
    first run's ref; applied to the first run's stored text it gives the re-run; the re-run's
    own full text is stored and readable as always."""
    history = [{"role": "user", "content": "test"}, call("a", "pytest -v"), result("a", RUN)]
    with Budget.open(tmp_path / "s", CONFIG) as b:
        b.prepare(history, now=0)
        first = b.decision("a")
        history += [call("b", "pytest -v", description="again"), result("b", RERUN)]
        copy = b.prepare(history, now=1).messages
        second = b.decision("b")
        assert first is not None and first.ref is not None
        assert second is not None and second.ref is not None and second.kind == "spilled"
        text = shown(copy, 4)
        assert f"--- preview: delta (diff against ref {first.ref}" in text
        diff = text.split(" ---\n", 1)[1].split("\n--- preview: then", 1)[0]
        assert (
            diff
            == "@@ -151,1 +151,1 @@\n-tests/test_mod.py::test_0150 PASSED\n+tests/test_mod.py::test_0150 FAILED"
        )
        assert apply_delta(b.read(first.ref), diff) == RERUN
        assert b.read(second.ref) == RERUN
        assert second.preview == PREVIEW_VERSION
    log = (tmp_path / "s" / "decisions.jsonl").read_bytes().splitlines()
    spills = [orjson.loads(x) for x in log if b'"spilled"' in x]
    assert spills and all(rec.get("pv") == PREVIEW_VERSION for rec in spills)


def test_no_delta_against_a_result_the_store_does_not_hold(tmp_path: Path) -> None:
    """The first run was small enough to stay inline (never stored): the re-run that spills
    gets its ordinary preview, not a diff against text the store cannot give back."""
    small = RUN[:2_000]
    big = small + "".join(f"extra line {i}\n" for i in range(200))
    history = [{"role": "user", "content": "t"}, call("a", "pytest"), result("a", small)]
    with Budget.open(tmp_path / "s", CONFIG) as b:
        b.prepare(history, now=0)
        history += [call("b", "pytest"), result("b", big)]
        text = shown(b.prepare(history, now=1).messages, 4)
    assert "--- preview: delta" not in text and "--- preview:" in text


def test_another_command_is_not_a_rerun(tmp_path: Path) -> None:
    """A different command with an almost equal output is not a re-run: no delta."""
    history = [{"role": "user", "content": "t"}, call("a", "pytest -v"), result("a", RUN)]
    with Budget.open(tmp_path / "s", CONFIG) as b:
        b.prepare(history, now=0)
        history += [call("b", "pytest -v -x"), result("b", RERUN)]
        text = shown(b.prepare(history, now=1).messages, 4)
    assert "--- preview: delta" not in text


def test_a_rerun_changing_most_lines_keeps_its_own_preview(tmp_path: Path) -> None:
    """A diff longer than half the preview is no help: the re-run gets its ordinary preview."""
    other = "".join(f"line {i} changed entirely\n" for i in range(300))
    history = [{"role": "user", "content": "t"}, call("a", "make"), result("a", RUN)]
    with Budget.open(tmp_path / "s", CONFIG) as b:
        b.prepare(history, now=0)
        history += [call("b", "make"), result("b", other)]
        text = shown(b.prepare(history, now=1).messages, 4)
    assert "--- preview: delta" not in text


def test_call_keys_name_the_command_or_the_tool_and_its_input() -> None:
    """The same command is one key whatever else the call says or which tool ran it; other
    inputs are keyed by tool and input, in any key order; unreadable input has no key."""
    assert call_key("bash", {"command": "ls", "timeout": 5}) == call_key("shell", {"command": "ls"})
    assert call_key("bash", {"command": "ls"}) != call_key("bash", {"command": "ls -l"})
    assert call_key("read", {"path": "a", "limit": 2}) == call_key(
        "read", '{"limit": 2, "path": "a"}'
    )
    assert call_key("read", {"path": "a"}) != call_key("grep", {"path": "a"})
    assert call_key("x", {"a": object()}) == ""


def test_an_openai_chat_rerun_is_a_delta_too(tmp_path: Path) -> None:
    """Chat Completions calls carry their arguments as a JSON string: the same command in a
    differently ordered string is the same call, and its re-run is a delta."""

    def chat_call(cid: str, arguments: str) -> dict[str, Any]:
        fn = {"name": "bash", "arguments": arguments}
        return {"role": "assistant", "content": None,
                "tool_calls": [{"id": cid, "type": "function", "function": fn}]}  # fmt: skip

    history: list[Any] = [
        {"role": "user", "content": "test"},
        chat_call("a", '{"command": "pytest -v", "timeout": 60}'),
        {"role": "tool", "tool_call_id": "a", "content": RUN},
    ]
    with Budget.open(tmp_path / "s", CONFIG) as b:
        b.prepare(history, now=0)
        history += [
            chat_call("b", '{"timeout": 120, "command": "pytest -v"}'),
            {"role": "tool", "tool_call_id": "b", "content": RERUN},
        ]
        copy = b.prepare(history, now=1).messages
    assert "--- preview: delta" in copy[4]["content"]


def test_a_run_dropped_from_the_history_is_no_base_live_or_resumed(tmp_path: Path) -> None:
    """The caller rewrites the history without the first run: a later run of the same command
    is no delta against it, in the session that saw it and in one resumed from its log alike
    (the same bytes either way)."""
    first = [{"role": "user", "content": "test"}, call("a", "pytest -v"), result("a", RUN)]
    later = [
        {"role": "user", "content": "test"},
        call("x", "ls"),
        result("x", "README.md\n"),
        call("b", "pytest -v"),
        result("b", RERUN),
    ]
    with Budget.open(tmp_path / "live", CONFIG) as b:
        b.prepare(first, now=0)
        live = b.prepare(later, now=1).messages
    with Budget.open(tmp_path / "cut", CONFIG) as b:
        b.prepare(first, now=0)
    with Budget.open(tmp_path / "cut", CONFIG) as b:
        resumed = b.prepare(later, now=1).messages
    assert "--- preview: delta" not in shown(live, 4)
    assert live == resumed
