"""Builders and hypothesis strategies for Anthropic-format conversations with tool calls."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from budget import BudgetConfig

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
    """A Chat Completions conversation: rounds of 1-3 parallel calls, each answered by a tool
    message (string or text-part content, sometimes empty), sometimes followed by assistant text."""
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
        msgs += [chat_tool(cid, draw(chat_content())) for cid in ids]
        if draw(st.booleans()) and draw(st.booleans()):
            msgs.append({"role": "assistant", "content": "Noted."})
            msgs.append({"role": "user", "content": "Go on."})
    return msgs
