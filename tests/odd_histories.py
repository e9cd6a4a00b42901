"""Hypothesis strategies for odd histories in the three wire formats, and settings at their bounds.

The shapes the plain strategies (``tests/strategies.py``) do not reach: empty, ``None`` and
missing contents, string and list contents, several text parts, images, call ids repeated across
rounds, results sent before their calls, texts whose lengths sit one character around each
threshold of the drawn settings, and characters that split lines or encodings (CR, CRLF, NUL,
U+2028, NEL, lone surrogates, non-BMP, a BOM, very long lines).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from budget import BudgetConfig

Message = dict[str, Any]

FORMATS = ("anthropic", "openai_chat", "openai_responses")

ODD_CHARS = (
    "a", "b", " ", "\t", "\n", "\r\n", "\r", "\x00", "\x0b", "\x0c", "\x1c", "\x85", "\u2028",
    "\u2029", "\ufeff", "é", "中", "😀", "\U0010ffff", "\ud800", "\udfff", "{", "\"", "\\",
)  # fmt: skip
"""Characters that split lines (for ``str.splitlines`` or for ``\\n`` alone), that UTF-8 cannot
encode alone (lone surrogates), that are wider than one UTF-16 unit, or that JSON escapes."""

odd_texts = st.lists(st.sampled_from(ODD_CHARS), max_size=40).map("".join)
"""A short text made of :data:`ODD_CHARS` (CRLF among them: a list, not an alphabet)."""


@st.composite
def bounded_configs(draw: st.DrawFn) -> BudgetConfig:
    """Settings a user can give, often at their bounds: caps a character apart from the preview,
    the smallest stub, no floor, one protected round, group budgets and windows of one, a store
    quota too small to spill, exempt and capped tools, every preview shape and share."""

    def edge(lo: int, hi: int) -> int:
        return draw(st.one_of(st.just(lo), st.just(hi), st.integers(lo, hi)))

    result_cap = edge(2, 3_000)
    stub_chars = edge(40, 400)
    return BudgetConfig(
        result_cap=result_cap,
        preview_chars=edge(1, result_cap - 1),
        preview_shape=draw(st.sampled_from(["auto", "head_tail", "head"])),
        tail_share=draw(st.sampled_from([0.0, 0.5, 1.0])),
        error_tail_share=draw(st.sampled_from([0.0, 0.75, 1.0])),
        include_path=draw(st.booleans()),
        price_spills=draw(st.booleans()),
        dedupe_outputs=draw(st.booleans()),
        group_budget=edge(1, 6_000),
        staleness=draw(st.booleans()),
        protect_rounds=edge(1, 3),
        protect_turns=draw(st.sampled_from([None, 1, 2])),
        stub_chars=stub_chars,
        stale_floor=draw(st.one_of(st.just(0), st.integers(stub_chars + 1, stub_chars + 2_000))),
        cache_read_price=draw(st.sampled_from([None, 0.0, 0.5, 1.0])),
        window=draw(st.sampled_from([None, 1, 300, 2_000, 50_000])),
        image_chars=draw(st.sampled_from([0, 1, 6_400])),
        read_page_chars=edge(1, 20_000),
        quota_bytes=draw(st.sampled_from([None, 1, 1 << 30])),
        tools=draw(
            st.sampled_from(
                [
                    {},
                    {"grep": {"exempt": True}},
                    {"bash": {"cap": 1}, "read": {"cap": 500, "preview": "head"}},
                ]
            )
        ),
        fsync=False,
    )


def thresholds(cfg: BudgetConfig) -> list[int]:
    """The lengths around which a result's fate changes under ``cfg``."""
    marks = [cfg.result_cap, cfg.preview_chars, cfg.stub_chars, cfg.stale_floor, cfg.group_budget]
    marks += [p.cap for p in cfg.tools.values() if p.cap is not None]
    return [m + d for m in marks for d in (-1, 0, 1) if 0 <= m + d <= 12_000]


@st.composite
def sized_text(draw: st.DrawFn, cfg: BudgetConfig) -> str:
    """A text of odd characters, often exactly a threshold's length (give or take one), made of
    lines or of one long line."""
    unit = draw(odd_texts.filter(bool)) if draw(st.booleans()) else draw(odd_texts)
    size = draw(st.one_of(st.sampled_from(thresholds(cfg)), st.integers(0, 60)))
    if not unit:
        return ""
    line = unit if draw(st.booleans()) else unit + "\n"
    return (line * (size // len(line) + 1))[:size]


@dataclass(frozen=True)
class Result:
    """One tool result to place: its call id, its texts (one per text part), its shape."""

    call_id: str
    tool: str
    texts: tuple[str, ...]
    shape: str  # "str", "parts", "image", "empty_list", "none", "missing"
    error: bool


@st.composite
def results_of(
    draw: st.DrawFn, cfg: BudgetConfig, ids: list[str], tools: list[str]
) -> list[Result]:
    """The results answering ``ids``, each in one of the shapes a content may take."""
    out = []
    for cid, tool in zip(ids, tools, strict=True):
        shape = draw(st.sampled_from(["str", "parts", "image", "empty_list", "none", "missing"]))
        k = 0 if shape == "empty_list" else draw(st.integers(1, 3)) if shape == "parts" else 1
        texts = tuple(draw(sized_text(cfg)) for _ in range(k))
        out.append(Result(cid, tool, texts, shape, draw(st.booleans())))
    return out


# -- each format's messages --------------------------------------------------------------------


def _content(r: Result, text_type: str, image: dict[str, Any]) -> Any:
    """A result's content in a format: a string, text parts (with an image), or empty."""
    if r.shape in ("none", "missing"):
        return None
    if r.shape == "str":
        return r.texts[0]
    parts: list[dict[str, Any]] = [{"type": text_type, "text": t} for t in r.texts]
    if r.shape == "image":
        parts.insert(len(parts) // 2, dict(image))
    return parts


_A_IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iV"}}
_C_IMAGE = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
_R_IMAGE = {"type": "input_image", "image_url": "https://example.com/a.png"}


def anthropic_round(calls: list[tuple[str, str]], res: list[Result], text: str) -> list[Message]:
    """An assistant message making ``calls``, then the user message of ``res``."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool_use", "id": c, "name": t, "input": {"n": i}} for i, (c, t) in
                enumerate(calls)]  # fmt: skip
    blocks = []
    for r in res:
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": r.call_id}
        if r.shape == "none":
            block["content"] = None
        elif r.shape != "missing":
            block["content"] = _content(r, "text", _A_IMAGE)
        if r.error:
            block["is_error"] = True
        blocks.append(block)
    return [{"role": "assistant", "content": content}, {"role": "user", "content": blocks}]


def chat_round(calls: list[tuple[str, str]], res: list[Result], text: str) -> list[Message]:
    """An assistant message making ``calls``, then one tool message per result."""
    tool_calls = [
        {"id": c, "type": "function", "function": {"name": t, "arguments": f'{{"n": {i}}}'}}
        for i, (c, t) in enumerate(calls)
    ]
    out: list[Message] = [{"role": "assistant", "content": text or None, "tool_calls": tool_calls}]
    for r in res:
        content = _content(r, "text", _C_IMAGE)
        out.append({"role": "tool", "tool_call_id": r.call_id, "content": content or ""})
    return out


def responses_round(calls: list[tuple[str, str]], res: list[Result], text: str) -> list[Message]:
    """A message (when ``text``), function calls (a custom call for ``grep``), their outputs."""
    out: list[Message] = []
    if text:
        out.append(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    for i, (c, t) in enumerate(calls):
        if t == "grep":
            out.append({"type": "custom_tool_call", "call_id": c, "name": t, "input": f"{i}"})
        else:
            out.append({"type": "function_call", "call_id": c, "name": t, "arguments": f"[{i}]"})
    kinds = dict(calls)
    for r in res:
        kind = (
            "custom_tool_call_output" if kinds.get(r.call_id) == "grep" else "function_call_output"
        )
        output = _content(r, "input_text", _R_IMAGE)
        out.append({"type": kind, "call_id": r.call_id, "output": output or ""})
    return out


def opening(fmt: str) -> list[Message]:
    """The task prompt a history starts with."""
    if fmt == "openai_responses":
        return [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Go."}]}
        ]
    if fmt == "openai_chat":
        return [{"role": "system", "content": ""}, {"role": "user", "content": "Go."}]
    return [{"role": "user", "content": "Go."}]


def user_turn(fmt: str, text: str) -> Message:
    """A user prompt after the assistant spoke."""
    if fmt == "anthropic" and text == "":
        return {"role": "user", "content": []}
    return {"role": "user", "content": text}


ROUNDS = {
    "anthropic": anthropic_round,
    "openai_chat": chat_round,
    "openai_responses": responses_round,
}


@dataclass(frozen=True)
class Odd:
    """A drawn case: the format, the settings, the history, and its request cuts."""

    fmt: str
    cfg: BudgetConfig
    messages: list[Message]
    cuts: list[int]
    restart: int
    """The request before which the session is closed and opened again."""


@st.composite
def odd_histories(draw: st.DrawFn, fmt: str | None = None, max_rounds: int = 6) -> Odd:
    """A history in one format under bounded settings: rounds of 1-3 calls whose ids may repeat
    an earlier round's, answered in any order (at times a result sent before its round's calls,
    or a call left unanswered), with user turns between; requests after each round."""
    fmt = fmt or draw(st.sampled_from(FORMATS))
    cfg = draw(bounded_configs())
    msgs = opening(fmt)
    cuts = []
    pool = [f"call_{i}" for i in range(3)]
    for r in range(draw(st.integers(1, max_rounds))):
        k = draw(st.integers(1, 3))
        fresh = [f"c{r}_{j}" for j in range(k)]
        ids = [draw(st.sampled_from(pool)) if draw(st.booleans()) else c for c in fresh]
        if len(set(ids)) < len(ids):
            ids = fresh  # one id twice in a round: no format's answer could say which call
        tools = [draw(st.sampled_from(["bash", "read", "grep"])) for _ in ids]
        res = draw(results_of(cfg, ids, tools))
        order = draw(st.permutations(range(k)))
        if draw(st.integers(0, 9)) == 0:
            order = order[1:]  # a call left unanswered (interrupted), its round going on
        text = draw(st.sampled_from(["", "Working.", "😀\r\n"]))
        block = ROUNDS[fmt](list(zip(ids, tools, strict=True)), [res[i] for i in order], text)
        if draw(st.integers(0, 9)) == 0:
            block.reverse()  # the answers first, then the calls (a server that logs them so)
        msgs += block
        cuts.append(len(msgs))
        if draw(st.integers(0, 3)) == 0:
            msgs.append(user_turn(fmt, draw(odd_texts)))
            cuts.append(len(msgs))
    return Odd(fmt, cfg, msgs, cuts, draw(st.integers(0, 8)))
