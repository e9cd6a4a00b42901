"""OpenAI Responses input items end to end: call outputs budgeted, every other item passed through."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from budget import Budget, BudgetConfig, InputError
from budget.formats import OPENAI_RESPONSES
from budget.formats.openai_responses import OUTPUT_TYPES
from spill import ref_for
from tests.strategies import SMALL, big


def call(call_id: str, name: str = "shell") -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": "{}"}


def output(call_id: str, out: Any) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": out}


def reasoning(n: int) -> dict[str, Any]:
    return {"type": "reasoning", "id": f"rs_{n}", "summary": [], "encrypted_content": "gAAAA" * 8}


def text_of(out: Any) -> str:
    if isinstance(out, str):
        return out
    return "\n".join(p["text"] for p in out if p.get("type") == "input_text")


def mixed_items() -> list[dict[str, Any]]:
    """Messages, reasoning, a web search, parallel function and custom calls, part-list outputs."""
    return [
        {"role": "developer", "content": "Prefer small diffs."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix CI"}]},
        reasoning(0),
        call("fc_a", "shell"),
        reasoning(1),
        call("fc_b", "read_file"),
        {
            "type": "custom_tool_call",
            "call_id": "ct_c",
            "name": "apply_patch",
            "input": "*** Begin Patch\n*** End Patch",
            "status": "completed",
        },
        {
            "type": "web_search_call",
            "id": "ws_1",
            "status": "completed",
            "action": {"type": "search"},
        },
        output("fc_a", big(200, "shell")),
        {
            "type": "function_call_output",
            "call_id": "fc_b",
            "id": "fco_b",
            "status": "completed",
            "output": [
                {"type": "input_text", "text": big(150, "file")},
                {"type": "input_image", "image_url": "https://example.com/shot.png"},
                {"type": "input_text", "text": "second part"},
            ],
        },
        {"type": "custom_tool_call_output", "call_id": "ct_c", "output": "Success."},
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_1",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Patched.", "annotations": []}],
        },
    ]


def test_only_big_outputs_change_and_they_read_back_exactly(tmp_path: Path) -> None:
    """Every item but the big outputs is the caller's own object; a string output stays a string,
    a part list keeps its image in place and its other fields; refs read the originals back."""
    items = mixed_items()
    pristine = copy.deepcopy(items)
    with Budget.open(tmp_path / "s", SMALL) as b:
        req = b.prepare(items, now=0)
        out = req.messages
        assert items == pristine
        assert req.report.format == "openai_responses"
        for i, item in enumerate(items):
            if i not in (8, 9):
                assert out[i] is item, i
        a, parts = out[8], out[9]
        assert a["call_id"] == "fc_a" and isinstance(a["output"], str)
        assert a["output"].startswith("[toolbudget] Output of shell was too large")
        assert b.read(ref_for(items[8]["output"])) == items[8]["output"]
        assert (parts["id"], parts["status"], parts["call_id"]) == ("fco_b", "completed", "fc_b")
        kinds = [p["type"] for p in parts["output"]]
        assert kinds == ["input_text", "input_image"]
        assert parts["output"][1] is items[9]["output"][1]
        original = text_of(items[9]["output"])
        assert original.endswith("\nsecond part")
        assert b.read(ref_for(original)) == original
        decisions = {d.call_id: (d.kind, d.reason, d.tool) for d in req.report.decisions}
        assert decisions["ct_c"] == ("kept", "fits", "apply_patch")


def test_consecutive_calls_are_one_group_and_other_items_end_it(tmp_path: Path) -> None:
    """Calls in one run (reasoning between them) share the group budget; calls after an output
    or a message are a new group and a new round."""
    items = [
        {"role": "user", "content": "Go"},
        reasoning(0),
        call("a"),
        reasoning(1),
        call("b"),
        call("c"),
        output("a", "a" * 900),
        output("b", "b" * 950),
        output("c", "c" * 800),
        call("d"),
        output("d", "d" * 900),
        {"role": "assistant", "content": "Next."},
        call("e"),
        output("e", "e" * 900),
    ]
    with Budget.open(tmp_path / "s", SMALL) as b:
        req = b.prepare(items, now=0)
    kinds = {d.call_id: (d.kind, d.reason) for d in req.report.decisions}
    assert kinds["b"] == ("spilled", "aggregate")  # 2,650 > 2,500 in a, b, c's group
    assert kinds["a"] == kinds["c"] == kinds["d"] == kinds["e"] == ("kept", "fits")
    scans = [OPENAI_RESPONSES.scan_in(items, i).opens_round for i in range(len(items))]
    assert [i for i, opens in enumerate(scans) if opens] == [2, 9, 12]


def test_sdk_items_are_read_and_passed_through(tmp_path: Path) -> None:
    """Response output items appended as SDK models are sent back as the same objects; an output
    given as an SDK model is rewritten into a dict."""
    from openai.types.responses import (
        ResponseCustomToolCall,
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseReasoningItem,
    )
    from openai.types.responses.response_input_item import FunctionCallOutput

    reason = ResponseReasoningItem(id="rs_1", type="reasoning", summary=[])
    fc = ResponseFunctionToolCall(
        type="function_call", call_id="call_1", name="shell", arguments='{"cmd":"ls"}', id="fc_1"
    )
    ct = ResponseCustomToolCall(type="custom_tool_call", call_id="call_2", name="patch", input="x")
    said = ResponseOutputMessage.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Listing.", "annotations": []}],
        }
    )
    listing = big(300, "ls")
    out1 = FunctionCallOutput(
        type="function_call_output",
        call_id="call_1",
        output=[
            {"type": "input_text", "text": listing},
            {"type": "input_image", "image_url": "https://example.com/a.png"},
        ],
    )
    items: list[Any] = [
        {"role": "user", "content": "List files"},
        reason,
        said,
        fc,
        ct,
        out1,
        {"type": "custom_tool_call_output", "call_id": "call_2", "output": "ok"},
    ]
    with Budget.open(tmp_path / "s", SMALL) as b:
        req = b.prepare(items, now=0)
        assert req.report.format == "openai_responses"
        assert [req.messages[i] is items[i] for i in range(5)] == [True] * 5
        rewritten = req.messages[5]
        assert isinstance(rewritten, dict) and rewritten["type"] == "function_call_output"
        assert rewritten["output"][0]["text"].startswith("[toolbudget] Output of shell")
        assert rewritten["output"][1] == {
            "type": "input_image",
            "image_url": "https://example.com/a.png",
        }
        assert "caller" not in rewritten  # None fields are left out, as the SDK sends them
        assert b.read(ref_for(listing)) == listing
        assert req.messages[6] is items[6]


def shell(call_id: str | None, item_id: str, command: str) -> dict[str, Any]:
    """A local shell call as the Responses API returns it (``call_id`` may be absent)."""
    item: dict[str, Any] = {
        "type": "local_shell_call",
        "id": item_id,
        "status": "completed",
        "action": {"type": "exec", "command": ["bash", "-lc", command], "env": {}},
    }
    if call_id is not None:
        item["call_id"] = call_id
    return item


def test_local_shell_calls_are_paired_and_budgeted_as_codex_answers_them(tmp_path: Path) -> None:
    """A local shell call answered by a function_call_output (Codex CLI's) or by a
    local_shell_call_output naming it by id (the API reference's), by its call_id or by its id
    where it has none: both outputs are the call's result, spilled when big, read back exactly."""
    items = [
        {"role": "user", "content": "Fix CI"},
        shell("call_a", "lsh_a", "cat build.log"),
        output("call_a", big(200, "log")),
        shell(None, "lsh_b", "cat test.log"),
        {"type": "local_shell_call_output", "id": "lsh_b", "output": big(180, "test")},
        shell("call_c", "lsh_c", "git status"),
        {"type": "local_shell_call_output", "id": "call_c", "output": "clean"},
    ]
    pristine = copy.deepcopy(items)
    with Budget.open(tmp_path / "s", SMALL) as b:
        req = b.prepare(items, now=0)
        assert items == pristine
        decisions = {d.call_id: (d.kind, d.tool) for d in req.report.decisions}
        assert decisions == {
            "call_a": ("spilled", "local_shell"),
            "lsh_b": ("spilled", "local_shell"),
            "call_c": ("kept", "local_shell"),
        }
        for i in (2, 4):
            sent = req.messages[i]
            assert sent["output"].startswith("[toolbudget] Output of local_shell was too large")
            assert {k: v for k, v in sent.items() if k != "output"} == {
                k: v for k, v in items[i].items() if k != "output"
            }
            assert b.read(ref_for(items[i]["output"])) == items[i]["output"]
        assert [req.messages[i] is items[i] for i in (0, 1, 3, 5, 6)] == [True] * 5
    scans = [OPENAI_RESPONSES.scan_in(items, i).opens_round for i in range(len(items))]
    assert [i for i, opens in enumerate(scans) if opens] == [1, 3, 5]


def test_a_local_shell_output_naming_its_call_by_call_id_is_its_result(tmp_path: Path) -> None:
    """A local_shell_call_output naming its call by call_id (OpenAI's local shell guide, the
    Vercel AI SDK; an item id of its own beside it or not) is that call's result, not an error."""
    items = [
        {"role": "user", "content": "Fix CI"},
        shell("call_a", "lsh_a", "cat build.log"),
        {"type": "local_shell_call_output", "call_id": "call_a", "output": big(200, "log")},
        shell("call_b", "lsh_b", "git status"),
        {"type": "local_shell_call_output", "id": "lso_b", "call_id": "call_b", "output": "ok"},
    ]
    with Budget.open(tmp_path / "s", SMALL) as b:
        req = b.prepare(items, now=0)
        decisions = {d.call_id: d.kind for d in req.report.decisions}
        assert decisions == {"call_a": "spilled", "call_b": "kept"}
        assert b.read(ref_for(items[2]["output"])) == items[2]["output"]


def shell_output(call_id: str, *chunks: tuple[str, str, int]) -> dict[str, Any]:
    """A shell tool call's output: one chunk per (stdout, stderr, exit code)."""
    return {
        "type": "shell_call_output",
        "call_id": call_id,
        "max_output_length": 100_000,
        "output": [
            {"stdout": out, "stderr": err, "outcome": {"type": "exit", "exit_code": code}}
            for out, err, code in chunks
        ],
    }


def test_shell_tool_outputs_are_budgeted_in_their_chunks(tmp_path: Path) -> None:
    """A shell_call_output's chunks are its text (their streams, in order, joined by newlines):
    spilled when big into the first chunk's stdout, every other stream emptied, each chunk's
    outcome and the item's other fields kept; the text reads back exactly."""
    log, warning = big(200, "pytest"), "DeprecationWarning: x\n"
    items = [
        {"role": "user", "content": "Run the tests"},
        {"type": "shell_call", "call_id": "sh_a", "action": {"commands": ["pytest", "ls"]}},
        shell_output("sh_a", (log, warning, 1), ("", "", 0)),
        {"type": "shell_call", "call_id": "sh_b", "action": {"commands": ["git status"]}},
        shell_output("sh_b", ("clean", "", 0)),
    ]
    pristine = copy.deepcopy(items)
    with Budget.open(tmp_path / "s", SMALL) as b:
        req = b.prepare(items, now=0)
        assert items == pristine
        decisions = {d.call_id: (d.kind, d.tool) for d in req.report.decisions}
        assert decisions == {"sh_a": ("spilled", "shell"), "sh_b": ("kept", "shell")}
        sent = req.messages[2]
        first, second = sent["output"]
        assert first["stdout"].startswith("[toolbudget] Output of shell was too large")
        assert (first["stderr"], first["outcome"]) == ("", {"type": "exit", "exit_code": 1})
        assert second == {"stdout": "", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}
        assert (sent["call_id"], sent["max_output_length"]) == ("sh_a", 100_000)
        assert b.read(ref_for(log + "\n" + warning)) == log + "\n" + warning
        assert [req.messages[i] is items[i] for i in (0, 1, 3, 4)] == [True] * 4
    scans = [OPENAI_RESPONSES.scan_in(items, i).opens_round for i in range(len(items))]
    assert [i for i, opens in enumerate(scans) if opens] == [1, 3]


def test_a_shell_output_without_chunks_goes_out_as_it_is(tmp_path: Path) -> None:
    """A shell_call_output with no chunk has nowhere to show a text (each chunk carries an
    outcome the API requires): it is no result to decide, and goes out as the caller's object."""
    items = [
        {"role": "user", "content": "go"},
        {"type": "shell_call", "call_id": "sh_a", "action": {"commands": ["true"]}},
        {"type": "shell_call_output", "call_id": "sh_a", "output": []},
    ]
    with Budget.open(tmp_path / "s", SMALL) as b:
        req = b.prepare(items, now=0)
    assert req.messages[2] is items[2]
    assert req.report.decisions == ()


@pytest.mark.parametrize(
    ("items", "needle"),
    [
        ([{"type": "function_call", "name": "x"}], "messages[0].call_id must be a non-empty"),
        ([{"type": "function_call", "call_id": "c"}], "messages[0].name must be a string"),
        ([output("nope", "x")], "messages[0] has a tool result for call id 'nope'"),
        ([call("c"), output("c", 5)], "messages[1].output must be a string or a list"),
        ([call("c"), output("c", [{"type": "input_text"}])], "messages[1].output[0].text"),
        ([{"content": "hi"}], "messages[0] has neither a type nor a role"),
        ([{"type": "local_shell_call", "action": {}}], "messages[0].id must be a non-empty"),
        ([{"type": "local_shell_call_output", "output": "x"}], "messages[0].id must be a non-"),
        (
            [{"type": "shell_call_output", "call_id": "c", "output": "x"}],
            "messages[0].output must be a list of output chunks",
        ),
        (
            [{"type": "shell_call_output", "call_id": "c", "output": [{"stdout": 5}]}],
            "messages[0].output[0].stdout must be a string",
        ),
    ],
)
def test_malformed_items_are_named(tmp_path: Path, items: Any, needle: str) -> None:
    """Malformed Responses items raise InputError naming the item and field."""
    session = Budget.open(tmp_path / "s", SMALL, format="openai_responses")
    with session as b, pytest.raises(InputError) as info:
        b.prepare(items)
    assert needle in str(info.value)


def codex_items(path: Path) -> list[dict[str, Any]]:
    """The Responses input items of a Codex CLI rollout: its ``response_item`` payloads, in order."""
    items = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record.get("type") == "response_item":
            items.append(record["payload"])
    return items


def test_a_recorded_codex_session_is_budgeted_turn_by_turn(
    tmp_path: Path, shared_traces: Path
) -> None:
    """On a real Codex CLI session (function and custom tool calls, reasoning, web searches) the
    outputs over a 10,000-character cap are spilled and read back exactly, everything else is
    passed through, and every request starts with the previous one byte for byte."""
    [path] = (shared_traces / "codex-cli").rglob("*.jsonl")
    items = codex_items(path)
    pristine = copy.deepcopy(items)
    cfg = BudgetConfig(result_cap=10_000, preview_chars=1_000, group_budget=40_000, fsync=False)
    # A request follows each run of outputs; the last one sends the whole history.
    cuts = [
        i + 1
        for i, it in enumerate(items[:-1])
        if it["type"] in OUTPUT_TYPES and items[i + 1]["type"] not in OUTPUT_TYPES
    ] + [len(items)]
    assert len(cuts) > 30
    with Budget.open(tmp_path / "s", cfg) as b:
        prev = b""
        for t, n in enumerate(cuts):
            req = b.prepare(items[:n], now=float(t))
            cur = orjson.dumps(req.messages)
            assert cur.startswith(prev[:-1]) or req.report.staleness_ran
            prev = cur
        out = req.messages
        assert items == pristine
        spilled = 0
        for i, item in enumerate(items):
            if item["type"] not in OUTPUT_TYPES:
                assert out[i] is item, i
                continue
            d = b.decision(item["call_id"])
            assert d is not None
            assert {k: v for k, v in out[i].items() if k != "output"} == {
                k: v for k, v in item.items() if k != "output"
            }
            if d.ref is not None:
                assert b.read(d.ref) == item["output"]
                spilled += d.kind == "spilled"
            if d.text is None:
                assert out[i] is item
            else:
                assert out[i]["output"] == d.text
        assert spilled >= 5
