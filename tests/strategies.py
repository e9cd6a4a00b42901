"""Builders and hypothesis strategies for Anthropic-format conversations with tool calls."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from budget import BudgetConfig
from spill import ref_for

Message = dict[str, Any]

SMALL = BudgetConfig(
    result_cap=1_000,
    preview_chars=200,
    group_budget=2_500,
    protect_rounds=2,
    stale_floor=400,
    stub_chars=120,
    min_reclaim_tokens=200,
    fsync=False,
)
"""Limits small enough that a few hundred lines spill and trim (no fsync: tests stay fast)."""


def big(n: int, tag: str = "out") -> str:
    """``n`` numbered lines of tool output."""
    return "".join(f"{tag} line {i:05d}\n" for i in range(n))


def text_of(content: Any) -> str:
    """The text a tool result's content shows: the string, or its text parts joined by lines."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    return "\n".join(p["text"] for p in content if p.get("type") == "text")


def assistant(*calls: tuple[str, str], text: str = "Working on it.") -> Message:
    """An assistant message making the given (call_id, tool) calls."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    content += [{"type": "tool_use", "id": cid, "name": tool, "input": {}} for cid, tool in calls]
    return {"role": "assistant", "content": content}


def results(*pairs: tuple[str, Any], is_error: bool = False) -> Message:
    """A user message answering calls with (call_id, content) pairs."""
    blocks = []
    for cid, content in pairs:
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": cid, "content": content}
        if is_error:
            block["is_error"] = True
        blocks.append(block)
    return {"role": "user", "content": blocks}


def conversation(outputs: list[list[str]], tool: str = "bash") -> list[Message]:
    """A task prompt, then one round per entry of ``outputs`` (parallel calls within a round)."""
    msgs: list[Message] = [{"role": "user", "content": "Please fix the failing test."}]
    for r, round_outputs in enumerate(outputs):
        ids = [f"call_{r}_{j}" for j in range(len(round_outputs))]
        msgs.append(assistant(*[(cid, tool) for cid in ids]))
        msgs.append(results(*zip(ids, round_outputs, strict=True)))
    return msgs


# Text that exercises the estimator and the read-back: ASCII lines, CJK, emoji, empty.
_alphabet = st.sampled_from(["a", "b", " ", "\n", "é", "中", "文", "😀", "{", "}", "0", "\t"])
texts = st.one_of(
    st.just(""),
    st.text(_alphabet, max_size=60),
    st.builds(lambda s, n: s * n, st.text(_alphabet, min_size=1, max_size=30), st.integers(1, 400)),
)

image_block = {
    "type": "image",
    "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
}


@st.composite
def result_content(draw: st.DrawFn) -> Any:
    """A tool_result's content: a string, or a list of text and image blocks."""
    text = draw(texts)
    shape = draw(st.sampled_from(["str", "blocks", "image"]))
    if shape == "str":
        return text
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if shape == "image":
        blocks.append(dict(image_block))
    return blocks


@st.composite
def conversations(draw: st.DrawFn, max_rounds: int = 12) -> list[Message]:
    """A conversation of rounds with 1-3 parallel calls each, errors, images and empty outputs."""
    n = draw(st.integers(1, max_rounds))
    msgs: list[Message] = [{"role": "user", "content": "Task: investigate."}]
    for r in range(n):
        k = draw(st.integers(1, 3))
        ids = [f"toolu_{r}_{j}" for j in range(k)]
        tools = [draw(st.sampled_from(["bash", "read", "grep"])) for _ in ids]
        msgs.append(assistant(*zip(ids, tools, strict=True)))
        blocks = []
        for cid in ids:
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": cid,
                "content": draw(result_content()),
            }
            if draw(st.booleans()) and draw(st.booleans()):
                block["is_error"] = True
            blocks.append(block)
        msgs.append({"role": "user", "content": blocks})
    return msgs


# --- OpenAI Chat Completions -----------------------------------------------------------------


def chat_assistant(*calls: tuple[str, str], text: str | None = None) -> Message:
    """A Chat Completions assistant message making the given (call_id, tool) calls."""
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": tool, "arguments": "{}"}}
            for cid, tool in calls
        ],
    }


def chat_tool(call_id: str, content: Any) -> Message:
    """A Chat Completions tool message answering ``call_id``."""
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def chat_conversation(outputs: list[list[str]], tool: str = "bash") -> list[Message]:
    """A system and task prompt, then one round per entry of ``outputs`` (parallel calls within)."""
    msgs: list[Message] = [
        {"role": "system", "content": "You are a careful engineer."},
        {"role": "user", "content": "Please fix the failing test."},
    ]
    for r, round_outputs in enumerate(outputs):
        ids = [f"call_{r}_{j}" for j in range(len(round_outputs))]
        msgs.append(chat_assistant(*[(cid, tool) for cid in ids]))
        msgs += [chat_tool(cid, out) for cid, out in zip(ids, round_outputs, strict=True)]
    return msgs


@st.composite
def chat_content(draw: st.DrawFn) -> Any:
    """A tool message's content: a string, or a list of one or two text parts."""
    text = draw(texts)
    shape = draw(st.sampled_from(["str", "parts", "two"]))
    if shape == "str":
        return text
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if shape == "two":
        parts.append({"type": "text", "text": draw(texts)})
    return parts


@st.composite
def chat_conversations(draw: st.DrawFn, max_rounds: int = 12) -> list[Message]:
    """A Chat Completions conversation: rounds of 1-3 parallel calls, each answered (in any order)
    by a tool message (string or text-part content, sometimes empty), sometimes followed by assistant text."""
    n = draw(st.integers(1, max_rounds))
    msgs: list[Message] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Task: investigate."},
    ]
    for r in range(n):
        k = draw(st.integers(1, 3))
        ids = [f"call_{r}_{j}" for j in range(k)]
        tools = [draw(st.sampled_from(["bash", "read", "grep"])) for _ in ids]
        msgs.append(chat_assistant(*zip(ids, tools, strict=True)))
        msgs += [chat_tool(cid, draw(chat_content())) for cid in draw(st.permutations(ids))]
        if draw(st.booleans()) and draw(st.booleans()):
            msgs.append({"role": "assistant", "content": "Noted."})
            msgs.append({"role": "user", "content": "Go on."})
    return msgs


# --- OpenAI Responses ------------------------------------------------------------------------

_CALL_KINDS = ("function_call", "custom_tool_call", "local_shell_call", "local_shell_id", "shell")
"""The call kinds a Responses round draws from; ``local_shell_id`` is a local shell call with no
``call_id`` (named by its ``id``, as the API reference's answer names it)."""

output_texts = st.one_of(
    texts,
    st.builds(big, st.integers(0, 400), st.sampled_from(["out", "log", "测试"])),
)
"""A tool output's text: short or long, ASCII or not, some over :data:`SMALL`'s cap."""


def responses_text(item: Message) -> str:
    """The text of a Responses output item: its string, its ``input_text`` parts joined by
    newlines, or its chunks' non-empty streams in order joined by newlines ("" for other items)."""
    out = item.get("output")
    if item.get("type") == "shell_call_output" and isinstance(out, list):
        return "\n".join(s for c in out for s in (c["stdout"], c["stderr"]) if s)
    if isinstance(out, list):
        return "\n".join(p["text"] for p in out if p.get("type") == "input_text")
    return out if isinstance(out, str) else ""


@st.composite
def responses_output(draw: st.DrawFn, kind: str, call: dict[str, Any]) -> dict[str, Any]:
    """The output item answering ``call`` (of round kind ``kind``), in one of its wire shapes."""
    cid = call.get("call_id") or call["id"]
    if kind == "shell":
        chunks = [
            {
                "stdout": draw(output_texts),
                "stderr": draw(st.sampled_from(["", "warning: x\n", "Traceback\n" * 40])),
                "outcome": draw(
                    st.sampled_from(
                        [
                            {"type": "exit", "exit_code": 0},
                            {"type": "exit", "exit_code": 2},
                            {"type": "timeout"},
                            "failure",  # the Agents SDK's raw outcome
                        ]
                    )
                ),
            }
            for _ in range(draw(st.integers(0, 3)))  # none: no result, passed through
        ]
        return {"type": "shell_call_output", "call_id": cid, "output": chunks}
    text = draw(output_texts)
    output: Any = text
    if kind in ("function_call", "custom_tool_call") and draw(st.booleans()):
        output = [{"type": "input_text", "text": text}]
        if draw(st.booleans()):
            output.append({"type": "input_image", "image_url": "https://example.com/a.png"})
        if draw(st.booleans()):
            output.append({"type": "input_text", "text": draw(texts)})
    if kind == "custom_tool_call":
        return {"type": "custom_tool_call_output", "call_id": cid, "output": output}
    if kind == "local_shell_id" or (kind == "local_shell_call" and draw(st.booleans())):
        # The API reference's answer: the call's call_id (or its id, where it has none) as id.
        return {"type": "local_shell_call_output", "id": cid, "output": output}
    item: dict[str, Any] = {"type": "function_call_output", "call_id": cid, "output": output}
    if kind == "local_shell_call" and draw(st.booleans()):
        item["type"] = "local_shell_call_output"
    if draw(st.booleans()):
        item.update(id=f"out_{cid}", status="completed")  # the item's own id, beside its call's
    return item


def responses_call(kind: str, cid: str, tool: str) -> dict[str, Any]:
    """A call item of round kind ``kind`` with call id ``cid`` running ``tool`` (the same tool
    twice is a re-run, whose output may be previewed as a diff)."""
    if kind == "function_call":
        return {"type": "function_call", "call_id": cid, "name": tool, "arguments": "{}"}
    if kind == "custom_tool_call":
        return {"type": "custom_tool_call", "call_id": cid, "name": tool, "input": f"run {tool}"}
    if kind in ("local_shell_call", "local_shell_id"):
        item: dict[str, Any] = {
            "type": "local_shell_call",
            "id": cid if kind == "local_shell_id" else f"lsh_{cid}",
            "status": "completed",
            "action": {"type": "exec", "command": ["bash", "-lc", tool], "env": {}},
        }
        if kind == "local_shell_call":
            item["call_id"] = cid
        return item
    return {"type": "shell_call", "call_id": cid, "action": {"commands": [tool]}}


@st.composite
def responses_conversations(draw: st.DrawFn, max_rounds: int = 10) -> list[Message]:
    """A Responses input list: rounds of 1-3 calls of every kind (an assistant message before
    them, reasoning items before and between them; parallel and answered in any order, or each
    answered before the next), read-back calls (of outputs over SMALL's cap, which SMALL spills;
    other settings may keep such an output, trimmed or not later), sometimes an assistant and
    user turn after."""
    n = draw(st.integers(1, max_rounds))
    items: list[Message] = [
        {"role": "developer", "content": "Be brief."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Go."}]},
    ]
    for r in range(n):
        k = draw(st.integers(1, 3))
        kinds = [draw(st.sampled_from(_CALL_KINDS)) for _ in range(k)]
        calls = [
            responses_call(kind, f"call_{r}_{j}", draw(st.sampled_from(["bash", "read", "grep"])))
            for j, kind in enumerate(kinds)
        ]
        spilled = [t for t in (responses_text(i) for i in items) if len(t) > SMALL.result_cap]
        reads_back: bool = draw(st.booleans()) and draw(st.booleans())
        if spilled and reads_back:
            # The read-back tool reading a page of an earlier output that SMALL spills.
            text = draw(st.sampled_from(spilled))
            kinds[0] = "read_back"
            calls[0] = {
                "type": "function_call",
                "call_id": f"call_{r}_0",
                "name": "toolbudget_read",
                "arguments": json.dumps({"ref": ref_for(text), "limit": 20}),
            }
        if draw(st.booleans()) and draw(st.booleans()):
            items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "Looking.", "annotations": []}],
                }
            )
        outputs = []
        for j, call in enumerate(calls):
            if kinds[j] == "read_back":
                lines = text.splitlines()[:20]
                page = "".join(f"{i + 1:6d}\t{line}\n" for i, line in enumerate(lines))
                outputs.append(
                    {"type": "function_call_output", "call_id": call["call_id"], "output": page}
                )
            else:
                outputs.append(draw(responses_output(kinds[j], call)))
        # Parallel calls answered in any order, or one call after another, each answered before
        # the next is made (as Codex CLI's history runs).
        sequential = draw(st.booleans())
        for j, call in enumerate(calls):
            if draw(st.booleans()):
                items.append({"type": "reasoning", "id": f"rs_{r}_{j}", "summary": []})
            items.append(call)
            if sequential:
                items.append(outputs[j])
        if not sequential:
            items += [outputs[j] for j in draw(st.permutations(range(k)))]
        if draw(st.booleans()) and draw(st.booleans()):
            items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "Noted.", "annotations": []}],
                }
            )
            items.append({"role": "user", "content": "Go on."})
    return items
