"""OpenAI Chat Completions end to end: tool messages budgeted, everything else passed through."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from budget import Budget, BudgetConfig, InputError
from budget.formats import OPENAI_CHAT
from spill import ref_for
from tests.strategies import SMALL, big, chat_assistant, chat_conversation, chat_tool, text_of


def mixed_conversation() -> list[dict[str, Any]]:
    """Parallel calls, an error, big string and part-list outputs, unknown fields, an image."""
    return [
        {"role": "system", "content": "You are a careful engineer."},
        {"role": "developer", "content": "Prefer small diffs."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Why does the build fail?"},
                {"type": "image_url", "image_url": {"url": "https://example.com/ci.png"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "function_call": None,  # litellm-style leftovers are kept as they are
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"cmd": "make"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path": "build.log"}'},
                },
                {
                    "id": "call_c",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"cmd": "false"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "name": "bash", "content": big(200, "make")},
        {
            "role": "tool",
            "tool_call_id": "call_b",
            "x_trace": {"span": 7},
            "content": [
                {"type": "text", "text": big(150, "log"), "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "tail part"},
            ],
        },
        {"role": "tool", "tool_call_id": "call_c", "content": "Error: exit status 1"},
        {"role": "assistant", "content": "The build fails in the linker."},
    ]


def test_the_request_copy_changes_only_big_tool_messages(tmp_path: Path) -> None:
    """Non-result messages and small results are the caller's own objects; big ones are envelopes
    that keep their shape, their ids and every other field, and read back exactly."""
    msgs = mixed_conversation()
    pristine = copy.deepcopy(msgs)
    with Budget.open(tmp_path / "s", SMALL) as b:
        req = b.prepare(msgs, now=0)
        out = req.messages
        assert msgs == pristine
        assert req.report.format == "openai_chat"
        assert len(out) == len(msgs)
        for i in (0, 1, 2, 3, 6, 7):
            assert out[i] is msgs[i], i
        a, parts = out[4], out[5]
        assert set(a) == set(msgs[4]) and a["tool_call_id"] == "call_a" and a["name"] == "bash"
        assert isinstance(a["content"], str)
        assert a["content"].startswith("[toolbudget] Output of bash was too large")
        assert b.read(ref_for(msgs[4]["content"])) == msgs[4]["content"]
        # A part list stays a part list; the first text part keeps its cache_control.
        assert parts["x_trace"] == {"span": 7} and parts["tool_call_id"] == "call_b"
        assert isinstance(parts["content"], list) and len(parts["content"]) == 1
        assert parts["content"][0]["cache_control"] == {"type": "ephemeral"}
        original = text_of(msgs[5]["content"])
        assert ref_for(original) in parts["content"][0]["text"]
        assert b.read(ref_for(original)) == original
        page = b.handle_read_tool(json.dumps({"ref": ref_for(original), "grep": "tail part"}))
        assert "tail part" in page
        kinds = {d.call_id: (d.kind, d.reason) for d in req.report.decisions}
        assert kinds == {
            "call_a": ("spilled", "cap"),
            "call_b": ("spilled", "cap"),
            "call_c": ("kept", "fits"),
        }


class _Arguments(str):
    """A str subclass, as some frameworks hand a call's JSON arguments over."""


def test_arguments_in_a_str_subclass_are_read_as_the_json_they_hold(tmp_path: Path) -> None:
    """The read-back tool reads JSON arguments given as a str subclass, where it answered that
    valid JSON was not valid JSON."""
    text = "".join(f"row {i}\n" for i in range(20_000))
    with Budget.open(tmp_path / "s", format="openai_chat") as b:
        ref = ref_for(text)
        assert b.spill_output(text, tool="bash") != text
        result = b.read_tool_result(_Arguments(json.dumps({"ref": ref, "grep": "row 19999"})))
        assert not result.is_error and "row 19999" in result.text


def test_the_group_budget_applies_per_assistant_message(tmp_path: Path) -> None:
    """Results of one assistant message share the group budget; another message's are apart."""
    msgs = chat_conversation([["a" * 900, "b" * 950, "c" * 800], ["d" * 900, "e" * 900]])
    with Budget.open(tmp_path / "s", SMALL) as b:
        req = b.prepare(msgs, now=0)
    kinds = {d.call_id: (d.kind, d.reason) for d in req.report.decisions}
    # Group 0 holds 2,650 characters > 2,500: its largest result goes; group 1 (1,800) fits.
    assert kinds["call_0_1"] == ("spilled", "aggregate")
    assert kinds["call_0_0"] == kinds["call_0_2"] == ("kept", "fits")
    assert kinds["call_1_0"] == kinds["call_1_1"] == ("kept", "fits")


def test_the_prefix_is_byte_stable_turn_after_turn(tmp_path: Path) -> None:
    """Each request copy starts with the previous one, byte for byte, and repeats identically."""
    rounds = [[big(120, "r0")], ["ok", big(90, "r1")], ["fine"], [big(300, "r3"), "x"]]
    msgs = chat_conversation(rounds)
    cuts = [
        i + 1
        for i, m in enumerate(msgs)
        if m["role"] == "tool" and (i + 1 == len(msgs) or msgs[i + 1]["role"] != "tool")
    ]
    with Budget.open(tmp_path / "s", SMALL) as b:
        prev: bytes | None = None
        for t, n in enumerate(cuts):
            req = b.prepare(msgs[:n], now=float(t))
            assert not req.report.staleness_ran
            cur = orjson.dumps(req.messages)
            if prev is not None:
                assert cur.startswith(prev[:-1])  # the previous list, minus its closing bracket
                assert req.report.prefix_stable
            prev = cur
        assert orjson.dumps(b.prepare(list(msgs), now=9.0).messages) == prev
    with Budget.open(tmp_path / "s", SMALL) as b:
        assert orjson.dumps(b.prepare(copy.deepcopy(msgs), now=10.0).messages) == prev


def test_staleness_trims_old_tool_messages_keeping_their_shape(tmp_path: Path) -> None:
    """After a cold cache, old results become stubs whose ref reads the original back."""
    msgs = chat_conversation([[big(40, f"r{r}")] for r in range(5)])
    with Budget.open(tmp_path / "s", SMALL) as b:
        b.prepare(msgs[:-2], now=0)
        req = b.prepare(msgs, now=10_000)
        assert req.report.staleness_ran and req.report.staleness_reason == "cold_cache"
        stub = req.messages[3]
        assert stub["tool_call_id"] == "call_0_0" and stub["role"] == "tool"
        assert stub["content"].startswith("[toolbudget] Old output of bash trimmed")
        d = b.decision("call_0_0")
        assert d is not None and d.ref is not None
        assert b.read(d.ref) == msgs[3]["content"]


def test_sdk_message_objects_are_read_and_passed_through(tmp_path: Path) -> None:
    """A ChatCompletionMessage appended from a response is read as is and sent back unchanged."""
    from openai.types.chat import ChatCompletion, ChatCompletionMessage

    response = ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4.1",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "refusal": None,
                        "tool_calls": [
                            {
                                "id": "call_sdk",
                                "type": "function",
                                "function": {"name": "cat", "arguments": '{"path": "a.txt"}'},
                            }
                        ],
                    },
                }
            ],
        }
    )
    reply = response.choices[0].message
    assert isinstance(reply, ChatCompletionMessage)
    output = big(300, "file")
    msgs: list[Any] = [
        {"role": "user", "content": "Read a.txt"},
        reply,
        chat_tool("call_sdk", output),
    ]
    with Budget.open(tmp_path / "s", SMALL) as b:
        req = b.prepare(msgs, now=0)
        assert req.report.format == "openai_chat"
        assert req.messages[1] is reply
        assert req.messages[2]["content"].startswith("[toolbudget] Output of cat")
        assert b.read(ref_for(output)) == output
        assert b.decision("call_sdk") is not None


def test_a_rewritten_sdk_tool_message_becomes_a_dict() -> None:
    """Rewriting a tool message given as a pydantic model gives a dict in the SDK's wire form."""
    from pydantic import BaseModel

    class ToolMessage(BaseModel):
        role: str
        tool_call_id: str
        content: str
        name: str | None = None

    msg = ToolMessage(role="tool", tool_call_id="call_1", content="long text")
    scanned = OPENAI_CHAT.scan(0, msg)
    assert scanned.results[0].text == "long text"
    assert OPENAI_CHAT.rewrite(msg, {0: "short"}) == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "short",
    }


@pytest.mark.parametrize(
    ("messages", "needle"),
    [
        ([{"role": "tool", "content": "x"}], "messages[0].tool_call_id must be a non-empty string"),
        (
            [chat_assistant(("c1", "bash")), chat_tool("c2", "x")],
            "messages[1] has a tool result for call id 'c2'",
        ),
        (
            [{"role": "assistant", "tool_calls": [{"id": "c1", "type": "function"}]}],
            "messages[0].tool_calls[0].function.name must be a string",
        ),
        (
            [
                {
                    "role": "assistant",
                    "tool_calls": [{"type": "function", "function": {"name": "x"}}],
                }
            ],
            "messages[0].tool_calls[0].id",
        ),
        (
            [
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "c1", "type": "function", "function": "x"}],
                }
            ],
            "messages[0].tool_calls[0].function must be a dict (its name and arguments), not str",
        ),
        ([{"role": "user", "tool_calls": []}], "messages[0].tool_calls is set on a user message"),
        ([{"role": "tool", "tool_call_id": "c", "content": 5}], "messages[0].content must be"),
        ([{"role": "critic", "content": "x"}], "messages[0].role must be one of"),
    ],
)
def test_malformed_chat_messages_are_named(tmp_path: Path, messages: Any, needle: str) -> None:
    """Malformed Chat Completions messages raise InputError naming the message and field."""
    with (
        Budget.open(tmp_path / "s", SMALL, format="openai_chat") as b,
        pytest.raises(InputError) as info,
    ):
        b.prepare(messages)
    assert needle in str(info.value)


def openhands_chat(path: Path) -> list[dict[str, Any]]:
    """An OpenHands run recorded with gpt-5 as the Chat Completions messages its model saw.

    Each model response's assistant message is taken verbatim (tool_calls, ``index``,
    ``function_call: null`` and all); each observation becomes a ``tool`` message.
    """
    record = json.loads(path.read_text().splitlines()[0])
    msgs: list[dict[str, Any]] = []
    seen: set[str] = set()
    for event in record["history"]:
        meta = event.get("tool_call_metadata")
        if event.get("source") == "user" and event.get("action") == "message":
            msgs.append({"role": "user", "content": event["message"]})
        elif meta and event.get("action") is not None:
            response = meta["model_response"]
            if response["id"] not in seen:
                seen.add(response["id"])
                msgs.append(response["choices"][0]["message"])
        elif meta and "observation" in event:
            msgs.append(
                {
                    "role": "tool",
                    "tool_call_id": meta["tool_call_id"],
                    "name": meta["function_name"],
                    "content": event["content"],
                }
            )
    return msgs


def test_a_recorded_gpt5_run_is_budgeted_turn_by_turn(tmp_path: Path, shared_traces: Path) -> None:
    """On a real OpenHands/gpt-5 run the 915,640- and 54,997-character outputs are spilled and
    read back exactly, every other message is passed through as is, and each request starts with
    the previous one byte for byte (except when a staleness batch runs)."""
    path = shared_traces / "openhands" / "nunu0404__Python_OpenHands" / "output.jsonl"
    msgs = openhands_chat(path)
    pristine = copy.deepcopy(msgs)
    cuts = [i for i in range(1, len(msgs)) if msgs[i - 1]["role"] == "tool"] + [len(msgs)]
    with Budget.open(tmp_path / "s", BudgetConfig(fsync=False)) as b:
        prev = b""
        for t, n in enumerate(cuts):
            req = b.prepare(msgs[:n], now=float(t))
            cur = orjson.dumps(req.messages)
            assert cur.startswith(prev[:-1]) or req.report.staleness_ran
            prev = cur
        out = req.messages
        assert msgs == pristine and req.report.format == "openai_chat"
        tool_msgs = [(i, m) for i, m in enumerate(msgs) if m["role"] == "tool"]
        assert sorted(len(m["content"]) for _, m in tool_msgs)[-2:] == [54_997, 915_640]
        for i, m in tool_msgs:
            d = b.decision(m["tool_call_id"])
            assert d is not None
            assert out[i]["tool_call_id"] == m["tool_call_id"] and out[i]["name"] == m["name"]
            if len(m["content"]) > 50_000:
                assert d.kind in ("spilled", "trimmed")
            if d.ref is not None:
                assert b.read(d.ref) == m["content"]
            if d.text is None:
                assert out[i] is msgs[i]
            else:
                assert out[i]["content"] == d.text
        for i, m in enumerate(msgs):
            if m["role"] != "tool":
                assert out[i] is m
