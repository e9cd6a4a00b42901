"""``cache_control`` markers: a request copy carries exactly the caller's, on rewritten results too.

The agent loop below moves markers as Anthropic's reference loop does (``_inject_prompt_caching``
in anthropics/anthropic-quickstarts ``computer-use-demo/computer_use_demo/loop.py``: the last three
user turns marked, the marker of the fourth removed in place; the system prompt carries the fourth
breakpoint).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import Budget, BudgetConfig
from tests._ci import require_module
from tests._lanes import examples
from tests._shared import SharedTraces
from tests.strategies import SMALL, big

Message = dict[str, Any]
EPHEMERAL = {"type": "ephemeral"}
SYSTEM_MARKERS = 1
"""The reference loop marks the system prompt too (outside the messages): one of the four."""


def inject_prompt_caching(messages: list[Message]) -> None:
    """The reference loop's marker moves, in place: the last 3 user turns marked, the 4th unmarked."""
    remaining = 3
    for message in reversed(messages):
        if message["role"] == "user" and isinstance(content := message["content"], list):
            if remaining:
                remaining -= 1
                content[-1]["cache_control"] = dict(EPHEMERAL)
            else:
                content[-1].pop("cache_control", None)
                break


def marker_places(messages: list[Any]) -> list[tuple[int, int | None, str, str]]:
    """Every marker as (message, block, level, marker): parts of one block count as one place.

    A spilled result's text parts become one part (the envelope's), and their markers with it, so
    the parts of a block are compared by the markers they carry, not by position.
    """
    found: set[tuple[int, int | None, str, str]] = set()
    for i, message in enumerate(messages):
        assert isinstance(message, dict), f"messages[{i}] is a {type(message).__name__}"
        if "cache_control" in message:
            found.add((i, None, "message", json.dumps(message["cache_control"])))
        content = message.get("content", message.get("output"))
        if not isinstance(content, list):
            continue
        for j, block in enumerate(content):
            if "cache_control" in block:
                found.add((i, j, "block", json.dumps(block["cache_control"])))
            parts = block.get("content")
            if isinstance(parts, list):
                for part in parts:
                    if "cache_control" in part:
                        found.add((i, j, "part", json.dumps(part["cache_control"])))
    return sorted(found, key=repr)


def count_markers(messages: list[Any]) -> int:
    """How many blocks, parts and messages carry a marker (what the 4-breakpoint limit counts)."""
    n = 0
    for message in messages:
        n += "cache_control" in message
        content = message.get("content", message.get("output"))
        for block in content if isinstance(content, list) else []:
            n += "cache_control" in block
            parts = block.get("content")
            for part in parts if isinstance(parts, list) else []:
                n += "cache_control" in part
    return n


def _trace_rounds(shared_trace_set: SharedTraces) -> list[list[Message]]:
    """Long recorded Claude Code sessions, as the message lists an agent appended request by request."""
    traces, _ = shared_trace_set
    chosen = [
        t
        for t in traces
        if t.format == "claude-code" and len(t.messages) >= 200 and t.name.endswith("9e953218")
    ]
    assert chosen, "the recorded Claude Code session claude-code/9e953218 is missing"
    return [copy.deepcopy(list(t.messages)) for t in chosen]


def _generated() -> list[Message]:
    """A long session whose results are big (spilled), old (trimmed) or empty ("(no output)")."""
    msgs: list[Message] = [
        {"role": "user", "content": [{"type": "text", "text": "Fix the build."}]}
    ]
    for r in range(60):
        cid = f"toolu_{r:03d}"
        msgs.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Step {r}."},
                    {"type": "tool_use", "id": cid, "name": "bash", "input": {"cmd": str(r)}},
                ],
            }
        )
        output: Any = "" if r % 7 == 3 else big(30 + (r % 5) * 60, f"r{r}")
        if r % 6 == 1:  # a result with an image: text parts around it
            output = [{"type": "text", "text": big(120, f"img{r}")}, _image()]
        msgs.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": cid, "content": output}],
            }
        )
    return msgs


def _image() -> dict[str, Any]:
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
    }


def _replay_reference_loop(
    tmp_path: Path, conversation: list[Message], config: BudgetConfig
) -> dict[str, int]:
    """Replay ``conversation`` a user turn at a time through the reference loop; check every copy."""
    starts = [i + 1 for i, m in enumerate(conversation) if m["role"] == "user"]
    seen = {"requests": 0, "spilled": 0, "trimmed": 0, "empty": 0, "rewritten_marked": 0}
    live: list[Message] = []
    with Budget.open(tmp_path / "session", config) as session:
        for end in starts:
            live.extend(conversation[len(live) : end])
            inject_prompt_caching(live)
            req = session.prepare(live, now=1_000.0 + len(live))
            copy_marks, history_marks = marker_places(req.messages), marker_places(live)
            assert copy_marks == history_marks, f"request {req.report.request}"
            assert count_markers(req.messages) + SYSTEM_MARKERS <= 4
            seen["requests"] += 1
            seen["spilled"] = max(seen["spilled"], req.report.spilled)
            seen["trimmed"] = max(seen["trimmed"], req.report.trimmed)
            seen["empty"] += sum(1 for d in req.report.decisions if d.reason == "empty")
            seen["rewritten_marked"] += sum(
                1
                for out, msg in zip(req.messages, live, strict=True)
                if out is not msg and count_markers([out])
            )
    return seen


def test_the_reference_loop_on_a_recorded_session_sends_only_the_callers_markers(
    tmp_path: Path, shared_trace_set: SharedTraces
) -> None:
    """A recorded Claude Code session under the reference loop: every copy has the caller's markers."""
    config = SMALL.model_copy(update={"result_cap": 5_000, "group_budget": 12_000})
    for conversation in _trace_rounds(shared_trace_set):
        seen = _replay_reference_loop(tmp_path / str(len(conversation)), conversation, config)
        assert seen["requests"] >= 100
        assert seen["spilled"] and seen["trimmed"] and seen["empty"]
        assert seen["rewritten_marked"] > 0  # markers sat on messages toolbudget rewrote


def test_the_reference_loop_on_spilled_trimmed_and_empty_results_sends_only_the_callers_markers(
    tmp_path: Path,
) -> None:
    """A generated long session (big, old and empty results): every copy has the caller's markers."""
    seen = _replay_reference_loop(tmp_path, _generated(), SMALL)
    assert seen["spilled"] and seen["trimmed"] and seen["empty"]
    assert seen["rewritten_marked"] > 0


def test_the_reference_loop_run_on_each_copy_never_leaks_into_later_copies(tmp_path: Path) -> None:
    """Markers an agent puts on the copy it was given are not in the next copy (item 15).

    The copy holds the caller's own objects where nothing was rewritten, so the loop marks those
    in the history: with the default five protected rounds the loop has unmarked them before a
    batch trims them (a marked message trimmed later would keep the history's marker).
    """
    conversation = _generated()
    starts = [i + 1 for i, m in enumerate(conversation) if m["role"] == "user"]
    live: list[Message] = []
    with Budget.open(
        tmp_path / "session", SMALL.model_copy(update={"protect_rounds": 5})
    ) as session:
        for end in starts:
            live.extend(conversation[len(live) : end])
            req = session.prepare(live, now=1_000.0 + len(live))
            assert marker_places(req.messages) == marker_places(live)
            inject_prompt_caching(req.messages)  # marks the copy (and the caller's own objects)
            assert count_markers(req.messages) + SYSTEM_MARKERS <= 4


def test_markers_put_on_rewritten_messages_of_a_copy_do_not_reach_later_copies(
    tmp_path: Path,
) -> None:
    """Marking the last three user turns of each copy, never unmarking: no later copy shows them."""
    conversation = _generated()
    starts = [i + 1 for i, m in enumerate(conversation) if m["role"] == "user"]
    live: list[Message] = []
    marked = 0
    with Budget.open(tmp_path / "session", SMALL) as session:
        for end in starts:
            live.extend(conversation[len(live) : end])
            req = session.prepare(live, now=1_000.0 + len(live))
            assert marker_places(req.messages) == marker_places(live) == []
            turns = [i for i, m in enumerate(live) if m["role"] == "user"][-3:]
            for i in turns:
                if req.messages[i] is not live[i]:  # rewritten: the copy's own dict
                    req.messages[i]["content"][-1]["cache_control"] = dict(EPHEMERAL)
                    marked += 1
    assert marked > 20


def test_a_marker_added_to_an_older_message_as_a_new_dict_in_a_new_list_is_sent(
    tmp_path: Path,
) -> None:
    """Beyond the last 8 messages, a marker is added by replacing the message: the copy has it."""
    live = _generated()[:41]
    with Budget.open(tmp_path / "session", SMALL) as session:
        first = session.prepare(live)
        # A result message toolbudget rewrote, far from the end.
        old = next(i for i in range(1, len(live) - 8) if first.messages[i] is not live[i])
        block = {**live[old]["content"][-1], "cache_control": dict(EPHEMERAL)}
        live = [*live[:old], {**live[old], "content": [block]}, *live[old + 1 :]]
        req = session.prepare(live)
    assert (
        marker_places(req.messages)
        == marker_places(live)
        == [(old, 0, "block", '{"type": "ephemeral"}')]
    )


def test_a_whole_sdk_message_goes_out_as_role_and_content(tmp_path: Path) -> None:
    """An ``anthropic.types.Message`` appended as the assistant turn is sent as {role, content} only."""
    anthropic = require_module("anthropic", "sdk")
    httpx = require_module("httpx2", "sdk")
    response = anthropic.types.Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [
                {"type": "text", "text": "Reading it."},
                {"type": "tool_use", "id": "toolu_1", "name": "cat", "input": {"path": "a"}},
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
    )
    history: list[Any] = [
        {"role": "user", "content": "Read a."},
        response,
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": big(3_000)}],
        },
    ]
    with Budget.open(tmp_path / "session", SMALL) as session:
        req = session.prepare(history)
    assert history[1] is response  # the history keeps the response object
    assert req.messages[1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Reading it."},
            {"type": "tool_use", "id": "toolu_1", "name": "cat", "input": {"path": "a"}},
        ],
    }
    sent: list[dict[str, Any]] = []

    def handler(request: Any) -> Any:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=response.model_dump(mode="json"))

    client = anthropic.Anthropic(
        api_key="test",
        base_url="http://api.test",
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )
    client.messages.create(model="claude-sonnet-4-5", max_tokens=10, messages=req.messages)
    assert set(sent[0]["messages"][1]) == {"role", "content"}


@pytest.mark.parametrize("fmt", ["anthropic", "openai_chat", "openai_responses"])
def test_a_spilled_result_keeps_the_marker_of_a_text_part_after_an_image(
    tmp_path: Path, fmt: str
) -> None:
    """Text, image, text with a marker: the spilled copy keeps the image and the marker (item 14)."""
    text_type = "input_text" if fmt == "openai_responses" else "text"
    image = (
        _image() if fmt != "openai_responses" else {"type": "input_image", "image_url": "data:,"}
    )
    if fmt == "openai_chat":
        image = {"type": "image_url", "image_url": {"url": "data:,"}}
    parts = [
        {"type": text_type, "text": big(2_000, "head")},
        image,
        {"type": text_type, "text": big(50, "tail"), "cache_control": dict(EPHEMERAL)},
    ]
    build = {"anthropic": _anthropic_result, "openai_chat": _chat_result}
    messages = build.get(fmt, _responses_result)(parts)
    before = copy.deepcopy(messages)
    with Budget.open(tmp_path / "session", SMALL, format=fmt) as session:
        req = session.prepare(messages)
    assert req.report.spilled == 1
    shown = req.messages[-1]
    shown_parts = (
        shown["content"][0]["content"]
        if fmt == "anthropic"
        else shown.get("content", shown.get("output"))
    )
    assert [p["type"] for p in shown_parts] == [text_type, image["type"]]
    assert shown_parts[0]["cache_control"] == EPHEMERAL
    assert "ref" in shown_parts[0]["text"].lower()
    assert messages == before  # the history is untouched


def _anthropic_result(parts: list[dict[str, Any]]) -> list[Message]:
    return [
        {"role": "user", "content": "Look."},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "shot", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": parts}],
        },
    ]


def _chat_result(parts: list[dict[str, Any]]) -> list[Message]:
    call = {"id": "c1", "type": "function", "function": {"name": "shot", "arguments": "{}"}}
    return [
        {"role": "user", "content": "Look."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": parts},
    ]


def _responses_result(parts: list[dict[str, Any]]) -> list[Message]:
    return [
        {"role": "user", "content": "Look."},
        {"type": "function_call", "call_id": "c1", "name": "shot", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": parts},
    ]


# --- in-place marker moves, any format ----------------------------------------------------------

WINDOW = 8
"""Messages at the end of a request where markers may be added in place (docs/formats/index.md, Cache markers)."""


def _format_round(fmt: str, r: int, output: str) -> list[Message]:
    """One round in ``fmt``: a call and its result, the result's text in a part list."""
    cid = f"call_{r}"
    if fmt == "anthropic":
        part = {"type": "text", "text": output}
        return [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": cid, "name": "sh", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": cid, "content": [part]}],
            },
        ]
    if fmt == "openai_chat":
        call = {"id": cid, "type": "function", "function": {"name": "sh", "arguments": "{}"}}
        return [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": cid, "content": [{"type": "text", "text": output}]},
        ]
    return [
        {"type": "function_call", "call_id": cid, "name": "sh", "arguments": "{}"},
        {
            "type": "function_call_output",
            "call_id": cid,
            "output": [{"type": "input_text", "text": output}],
        },
    ]


def _slots(message: Message) -> list[dict[str, Any]]:
    """The dicts of a message where a marker may sit: the message, its blocks, their parts."""
    out = [message]
    content = message.get("content", message.get("output"))
    for block in content if isinstance(content, list) else []:
        out.append(block)
        parts = block.get("content")
        out += [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []
    return out


_outputs = st.sampled_from(["", "short output\n", big(90, "big"), big(40, "mid")])
_op = st.tuples(
    st.sampled_from(["history", "copy"]),
    st.sampled_from(["add", "remove", "move"]),
    st.floats(0, 1),
    st.integers(0, 5),
)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fmt=st.sampled_from(["anthropic", "openai_chat", "openai_responses"]),
    steps=st.lists(
        st.tuples(st.booleans(), _outputs, st.lists(_op, max_size=4)), min_size=4, max_size=24
    ),
)
def test_markers_moved_in_place_are_the_copys_markers(
    fmt: str, steps: list[tuple[bool, str, list[tuple[str, str, float, int]]]]
) -> None:
    """Random in-place marker moves (history or copy): each copy carries the history's markers."""
    part = "input_text" if fmt == "openai_responses" else "text"
    first: Message = {"role": "user", "content": [{"type": part, "text": "Task."}]}
    live: list[Message] = [first]
    shown: list[Any] = []
    with Budget.in_memory(SMALL, format=fmt) as session:
        for r, (grow, output, ops) in enumerate(steps):
            if grow or len(live) == 1:
                live += _format_round(fmt, r, output)
            for side, kind, where, slot in ops:
                target = live if side == "history" or not shown else shown
                # Adding: in the last messages of the next request (the copy's are 2 fewer there).
                span = WINDOW if target is live else WINDOW - 2
                if kind in ("remove", "move"):
                    marked = [d for m in target for d in _slots(m) if "cache_control" in d]
                    if marked:
                        marked[int(where * (len(marked) - 1))].pop("cache_control")
                if kind in ("add", "move"):
                    recent = target[-min(span, len(target)) :]
                    spots = [d for m in recent for d in _slots(m)]
                    spots[(slot + int(where * 97)) % len(spots)]["cache_control"] = dict(EPHEMERAL)
            req = session.prepare(live, now=float(r))
            assert marker_places(req.messages) == marker_places(live)
            shown = req.messages
