"""Hypothesis properties of prepare over generated conversations (the contract's invariants)."""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import Budget, BudgetConfig
from tests._lanes import examples
from tests.strategies import chat_conversations, conversations, text_of

pytestmark = pytest.mark.slow  # large hypothesis runs over whole conversations

CFG = BudgetConfig(
    result_cap=600,
    preview_chars=120,
    group_budget=1_500,
    protect_rounds=2,
    stale_floor=300,
    stub_chars=100,
    min_reclaim_tokens=60,
    fsync=False,
)
PROPS = settings(
    max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def _shape(msgs: list[dict[str, Any]]) -> list[Any]:
    """Roles, and the ids of tool calls and results, in order."""
    out = []
    for m in msgs:
        ids = [
            (b["type"], b.get("id") or b.get("tool_use_id"))
            for b in (m["content"] if isinstance(m["content"], list) else [])
            if b.get("type") in ("tool_use", "tool_result")
        ]
        out.append((m["role"], ids))
    return out


def result_blocks(msgs: list[dict[str, Any]]) -> list[tuple[dict[str, Any], int]]:
    """Every tool_result block with the index of its message."""
    return [
        (b, i)
        for i, m in enumerate(msgs)
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]


def _cuts(msgs: list[dict[str, Any]]) -> list[int]:
    """History lengths at which a request is made: after each round's results."""
    return list(range(3, len(msgs) + 1, 2))


def _assert_same_bytes_again_and_after_resume(msgs: list[dict[str, Any]]) -> None:
    """Prepare ``msgs`` again, as a new list, and in a resumed session: the bytes never change."""
    with tempfile.TemporaryDirectory() as d:
        with Budget.open(Path(d) / "s", CFG) as b:
            first = orjson.dumps(b.prepare(msgs, now=0).messages)
            assert orjson.dumps(b.prepare(msgs, now=1).messages) == first
            assert orjson.dumps(b.prepare(list(msgs), now=2).messages) == first
        with Budget.open(Path(d) / "s", CFG) as b:
            assert orjson.dumps(b.prepare(copy.deepcopy(msgs), now=3).messages) == first


def _assert_recoverable(b: Budget, call_id: str, original: str, shown: str) -> None:
    """A result shown changed was decided, and its ref reads the original back (an empty one is
    shown as ``(no output)`` with no ref)."""
    if shown == original:
        return
    dec = b.decision(call_id)
    assert dec is not None
    if dec.ref is not None:
        assert b.read(dec.ref) == original
    else:
        assert original == "" and shown == "(no output)"


@PROPS
@given(conversations(), st.lists(st.sampled_from([1.0, 30.0, 400.0]), min_size=20, max_size=20))
def test_invariants_hold_turn_after_turn(msgs: list[dict[str, Any]], gaps: list[float]) -> None:
    """Input untouched, shape kept, groups within budget, prefixes stable outside batches, all recoverable."""
    pristine = copy.deepcopy(msgs)
    with tempfile.TemporaryDirectory() as d:
        b = Budget.open(Path(d) / "s", CFG)
        prev: list[Any] | None = None
        now = 0.0
        for n, gap in zip(_cuts(msgs), gaps, strict=False):
            now += gap
            hist = msgs[:n]
            req = b.prepare(hist, now=now)
            out = req.messages
            assert msgs == pristine
            assert _shape(out) == _shape(hist)
            if prev is not None:
                same = orjson.dumps(out[: len(prev)]) == orjson.dumps(prev)
                assert same == req.report.prefix_stable or req.report.staleness_ran
                if not req.report.staleness_ran:
                    assert same
            for (orig, _), (nb, _) in zip(result_blocks(hist), result_blocks(out), strict=True):
                original, now_shown = text_of(orig.get("content")), text_of(nb.get("content"))
                _assert_recoverable(b, orig["tool_use_id"], original, now_shown)
            _groups_fit(hist, out, b)
            prev = out
        b.close()


def _groups_fit(hist: list[dict[str, Any]], out: list[dict[str, Any]], b: Budget) -> None:
    """No group is over budget while one of its results could still be spilled with a gain."""
    for m_in, m_out in zip(hist, out, strict=True):
        if m_in["role"] != "user" or not isinstance(m_in["content"], list):
            continue
        sizes = []
        for blk_in, blk_out in zip(m_in["content"], m_out["content"], strict=True):
            if blk_in.get("type") != "tool_result":
                continue
            images = sum(
                1
                for p in (blk_out["content"] if isinstance(blk_out["content"], list) else [])
                if p.get("type") != "text"
            )
            shown = len(text_of(blk_out["content"])) + images * CFG.image_chars
            dec = b.decision(blk_in["tool_use_id"])
            sizes.append((shown, dec.kind if dec else None, len(text_of(blk_in["content"]))))
        if sum(s for s, _, _ in sizes) > CFG.group_budget:
            for _shown, kind, chars in sizes:
                assert kind != "kept" or chars <= CFG.preview_chars + 600


@PROPS
@given(conversations())
def test_same_history_twice_and_after_resume_gives_identical_bytes(
    msgs: list[dict[str, Any]],
) -> None:
    """Preparing a history again, in the same session or a resumed one, gives the same bytes."""
    _assert_same_bytes_again_and_after_resume(msgs)


# --- OpenAI Chat Completions -------------------------------------------------------------------


def _chat_shape(msgs: list[dict[str, Any]]) -> list[Any]:
    """Roles, call ids made, the call id answered, and each content's type, in order."""
    return [
        (
            m["role"],
            [c["id"] for c in m.get("tool_calls") or []],
            m.get("tool_call_id"),
            type(m.get("content")).__name__,
        )
        for m in msgs
    ]


def _chat_cuts(msgs: list[dict[str, Any]]) -> list[int]:
    """History lengths at which a request is made: after each run of tool messages or user turn."""
    return [
        i + 1
        for i, m in enumerate(msgs)
        if i >= 2
        and m["role"] in ("tool", "user")
        and (i + 1 == len(msgs) or msgs[i + 1]["role"] == "assistant")
    ]


@PROPS
@given(
    chat_conversations(), st.lists(st.sampled_from([1.0, 30.0, 400.0]), min_size=30, max_size=30)
)
def test_chat_invariants_hold_turn_after_turn(
    msgs: list[dict[str, Any]], gaps: list[float]
) -> None:
    """Chat Completions: input untouched, pairing and shapes kept, other messages shared, prefixes
    stable outside batches, every replaced text read back exactly."""
    pristine = copy.deepcopy(msgs)
    with tempfile.TemporaryDirectory() as d:
        b = Budget.open(Path(d) / "s", CFG)
        prev: list[Any] | None = None
        now = 0.0
        for n, gap in zip(_chat_cuts(msgs), gaps, strict=False):
            now += gap
            hist = msgs[:n]
            req = b.prepare(hist, now=now)
            out = req.messages
            assert msgs == pristine
            assert req.report.format == "openai_chat"
            assert _chat_shape(out) == _chat_shape(hist)
            if prev is not None and not req.report.staleness_ran:
                assert orjson.dumps(out[: len(prev)]) == orjson.dumps(prev)
                assert req.report.prefix_stable
            for m_in, m_out in zip(hist, out, strict=True):
                if m_in["role"] != "tool":
                    assert m_out is m_in
                    continue
                assert {k: v for k, v in m_out.items() if k != "content"} == {
                    k: v for k, v in m_in.items() if k != "content"
                }
                original, shown = text_of(m_in["content"]), text_of(m_out["content"])
                _assert_recoverable(b, m_in["tool_call_id"], original, shown)
            prev = out
        b.close()


@PROPS
@given(chat_conversations())
def test_chat_same_history_twice_and_after_resume_gives_identical_bytes(
    msgs: list[dict[str, Any]],
) -> None:
    """Chat Completions: the same history gives the same bytes again, and after a resume."""
    _assert_same_bytes_again_and_after_resume(msgs)
