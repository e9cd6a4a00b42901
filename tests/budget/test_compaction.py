"""Compaction (SPEC §11): its settings, the tail it keeps and the copy it projects."""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import (
    Budget,
    BudgetConfig,
    ConfigError,
    Format,
    InputError,
    Prepared,
    estimate_tokens,
    get_format,
)
from budget._view import scan_at
from budget.compaction._compaction import (
    Tail,
    anchor_of,
    attachments,
    extract_constraints,
    file_snapshots,
    project,
    resolve_anchor,
    summary_message,
    tail_start,
)
from tests._lanes import examples
from tests.compaction import Counting, compaction_config, history
from tests.strategies import (
    assistant,
    big,
    chat_assistant,
    chat_conversations,
    chat_tool,
    conversations,
    results,
)


def test_compaction_is_off_by_default_with_claude_codes_thresholds() -> None:
    """The shipped settings: off, a 20k output reserve, a 13k margin (3k manual), breaker at 3."""
    cfg = BudgetConfig()
    assert cfg.compaction == "off"
    assert (cfg.compact_reserve_tokens, cfg.compact_margin_tokens) == (20_000, 13_000)
    assert cfg.compact_manual_margin_tokens == 3_000
    assert (cfg.compact_tail_tokens, cfg.compact_tail_messages) == (10_000, 5)
    assert cfg.compact_tail_max_tokens == 40_000
    assert cfg.compact_breaker_failures == 3


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"compaction": "sometimes"}, "compaction"),
        ({"compact_reserve_tokens": 0}, "compact_reserve_tokens"),
        ({"compact_margin_tokens": -1}, "compact_margin_tokens"),
        ({"compact_tail_messages": 0}, "compact_tail_messages"),
        ({"compact_breaker_failures": 0}, "compact_breaker_failures"),
        ({"compact_tail_tokens": 50_000}, "compact_tail_max_tokens"),
        ({"compact_manual_margin_tokens": 20_000}, "compact_manual_margin_tokens"),
    ],
)
def test_a_bad_compaction_setting_is_refused_by_name(
    settings: dict[str, object], named: str
) -> None:
    """Each out-of-range or incoherent compaction setting raises ConfigError naming the field."""
    with pytest.raises(ConfigError, match=named):
        BudgetConfig(**settings)


# --- The split, the attachments and the copy (budget/compaction/_compaction.py) ---------------------------

COPY_LIMITS = {"min_tokens": 300, "min_messages": 2, "max_tokens": 900}


def _tokens(message: Any) -> int:
    return estimate_tokens(message)


def to_responses(chat: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A Chat Completions conversation as Responses items (calls after a reasoning item)."""
    out: list[dict[str, Any]] = []
    for m in chat:
        if m["role"] == "tool":
            content = m["content"]
            text = content if isinstance(content, str) else "\n".join(p["text"] for p in content)
            out.append(
                {"type": "function_call_output", "call_id": m["tool_call_id"], "output": text}
            )
        elif m.get("tool_calls"):
            out.append({"type": "reasoning", "id": f"rs_{len(out)}", "summary": []})
            out += [
                {
                    "type": "function_call",
                    "call_id": tc["id"],
                    "name": tc["function"]["name"],
                    "arguments": tc["function"]["arguments"],
                }
                for tc in m["tool_calls"]
            ]
        else:
            out.append({"role": m["role"], "content": m["content"] or ""})
    return out


def conversations_in(fmt: str) -> st.SearchStrategy[list[dict[str, Any]]]:
    """Random conversations in one of the three formats."""
    if fmt == "anthropic":
        return conversations()
    if fmt == "openai_chat":
        return chat_conversations()
    return chat_conversations().map(to_responses)


def _split_check(msgs: list[dict[str, Any]], fmt: str, limits: dict[str, int]) -> int:
    """Choose the tail of ``msgs``; assert no result in it answers a call before it."""
    f = get_format(fmt)
    tail = tail_start(msgs, f, tokens=_tokens, **limits)
    calls_before = {c.call_id for i in range(tail.start) for c in scan_at(f, msgs, i).calls}
    for i in range(tail.start, len(msgs)):
        for r in scan_at(f, msgs, i).results:
            assert r.call_id not in calls_before, f"result {r.call_id} split from its call"
    if tail.start < len(msgs):
        assert msgs[tail.start].get("type") != "function_call_output"
        assert msgs[tail.start].get("role") != "tool"
    assert tail.head <= tail.start <= len(msgs)
    return tail.start


@pytest.mark.parametrize("fmt", ["anthropic", "openai_chat", "openai_responses"])
@settings(max_examples=examples(60), deadline=None)
@given(data=st.data())
def test_a_tail_never_separates_a_call_from_its_result(fmt: str, data: st.DataObject) -> None:
    """Whatever the limits, no result in the retained tail answers a call left in the prefix."""
    msgs = data.draw(conversations_in(fmt))
    limits = {
        "min_tokens": data.draw(st.integers(0, 3_000)),
        "min_messages": data.draw(st.integers(1, 8)),
        "max_tokens": data.draw(st.integers(3_000, 6_000)),
    }
    _split_check(msgs, fmt, limits)


@pytest.mark.parametrize("fmt", ["anthropic", "openai_chat", "openai_responses"])
@settings(max_examples=examples(40), deadline=None)
@given(data=st.data())
def test_projecting_a_copy_leaves_the_callers_messages_unchanged(
    fmt: str, data: st.DataObject
) -> None:
    """Splitting, extracting attachments and projecting never modify the caller's list or messages."""
    msgs = data.draw(conversations_in(fmt))
    before = copy.deepcopy(msgs)
    f = get_format(fmt)
    tail = tail_start(msgs, f, tokens=_tokens, **COPY_LIMITS)
    extra = attachments(msgs, f, tail.start, constraint_chars=1_000, files=3, file_chars=500)
    out = project(msgs, tail.head, tail.start, summary_message("S", extra))
    assert msgs == before
    assert out[: tail.head] == msgs[: tail.head]
    assert all(a is b for a, b in zip(out[tail.head + 1 :], msgs[tail.start :], strict=True))
    assert out[tail.head]["role"] == "user"


_line = st.text(max_size=40)


@settings(max_examples=examples(80), deadline=None)
@given(
    lines=st.lists(
        st.one_of(
            _line,
            _line.map(lambda s: f"Never {s}"),
            _line.map(lambda s: f"run `{s}`"),
            _line.map(lambda s: f"{s} src/app.py"),
        ),
        max_size=8,
    ),
    limit=st.integers(0, 400),
)
def test_constraints_are_the_users_words_verbatim(lines: list[str], limit: int) -> None:
    """Every extracted constraint is a whole line of a user message, as written (the last one
    may be cut where the limit falls), within the limit."""
    text = "\n".join(lines)
    msgs = [
        {"role": "user", "content": text},
        assistant(("t1", "bash")),
        results(("t1", "never x")),
    ]
    found = extract_constraints(msgs, limit_chars=limit).shown
    written = {ln.strip() for ln in text.splitlines()}
    assert all(c in written and c for c in found[:-1])
    assert not found or (any(w.startswith(found[-1]) for w in written) and found[-1])
    assert sum(len(c) for c in found) <= limit
    assert "never x" not in found or "never x" in written


def test_constraints_keep_the_goal_and_rules_not_chatter() -> None:
    """The first line (the goal) and the lines stating rules, paths and commands are kept."""
    text = (
        "Fix the flaky test in the parser.\n"
        "Thanks a lot!\n"
        "Never edit files under tests/fixtures.\n"
        "Run `make test` before you finish.\n"
        "The output format must be JSON."
    )
    found = extract_constraints([{"role": "user", "content": text}], limit_chars=1_000).shown
    assert found == (
        "Fix the flaky test in the parser.",
        "Never edit files under tests/fixtures.",
        "Run `make test` before you finish.",
        "The output format must be JSON.",
    )


def test_the_tail_moves_back_to_keep_parallel_results_with_their_call() -> None:
    """A tail whose token limit falls inside a round starts at the assistant message making the calls."""
    msgs = [
        {"role": "user", "content": "Task."},
        assistant(("a", "bash")),
        results(("a", big(200, "a"))),
        assistant(("b", "bash"), ("c", "bash")),
        results(("b", big(50, "b")), ("c", big(50, "c"))),
    ]
    f = get_format("anthropic")
    tail = tail_start(msgs, f, min_tokens=10, min_messages=1, max_tokens=10**6, tokens=_tokens)
    assert tail.start == 3
    assert tail.prefix_tokens == sum(_tokens(m) for m in msgs[:3])
    chat = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Task."},
        chat_assistant(("b", "bash"), ("c", "bash")),
        chat_tool("b", "x"),
        chat_tool("c", "y"),
    ]
    tail = _roomy_tail(chat, get_format("openai_chat"), min_messages=1)
    assert (tail.head, tail.start) == (1, 2)


def _roomy_tail(msgs: list[Any], fmt: Format, *, min_messages: int) -> Tail:
    """The tail of ``msgs`` with one token and ``min_messages`` messages at least, no cap."""
    return tail_start(
        msgs, fmt, min_tokens=1, min_messages=min_messages, max_tokens=10**6, tokens=_tokens
    )


def test_a_responses_tail_keeps_the_reasoning_item_of_its_first_call() -> None:
    """A Responses tail starting at a function call also keeps the reasoning item before it."""
    items = to_responses(
        [
            {"role": "user", "content": "Task."},
            chat_assistant(("a", "bash")),
            chat_tool("a", big(100)),
            chat_assistant(("b", "bash")),
            chat_tool("b", "ok"),
        ]
    )
    tail = _roomy_tail(items, get_format("openai_responses"), min_messages=2)
    assert items[tail.start]["type"] == "reasoning"
    assert items[tail.start + 1] == {
        "type": "function_call",
        "call_id": "b",
        "name": "bash",
        "arguments": "{}",
    }


def _read_file(call_id: str, path: str) -> dict[str, Any]:
    """An assistant message whose one block is a read_file call of ``path``."""
    return {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": call_id, "name": "read_file", "input": {"path": path}}
        ],
    }


def test_the_copy_carries_summary_constraints_and_stale_marked_snapshots_in_order() -> None:
    """The summary message holds the summary, the user's rules verbatim, then the read files marked stale."""
    msgs: list[dict[str, Any]] = [
        {"role": "user", "content": "Port the parser to Rust.\nNever touch the C code."},
        _read_file("r1", "src/parse.c"),
        results(("r1", "int parse(void);")),
        _read_file("r2", "src/lex.c"),
        results(("r2", "int lex(void);")),
        assistant(("b1", "bash")),
        results(("b1", "built")),
    ]
    f = get_format("anthropic")
    extra = attachments(msgs, f, 5, constraint_chars=1_000, files=5, file_chars=100)
    assert extra.constraints == ("Port the parser to Rust.", "Never touch the C code.")
    assert extra.files == (("src/lex.c", "int lex(void);"), ("src/parse.c", "int parse(void);"))
    # A file read again in the tail is visible there: it is not attached twice.
    assert file_snapshots(msgs, f, 3, files=5, file_chars=100) == (
        ("src/parse.c", "int parse(void);"),
    )
    text = summary_message("SUMMARY", extra)["content"]
    assert (
        text.index("SUMMARY") < text.index("Never touch the C code.") < text.index("int lex(void);")
    )
    assert text.count("may have changed since") == 2
    out = project(msgs, 0, 5, summary_message("SUMMARY", extra))
    assert out[1:] == msgs[5:]
    assert anchor_of(msgs, f, 5) == "call:b1"
    assert resolve_anchor(msgs, f, "call:b1", 2) == 5
    assert resolve_anchor(msgs[:4], f, "call:b1", 5) is None


# --- In a session: Budget.compact / uncompact, resume, automatic compaction, the breaker -------

SESSION = compaction_config()


def _bytes(req: Prepared) -> bytes:
    return json.dumps(req.messages, sort_keys=True).encode()


def test_manual_compaction_projects_summary_and_tail_and_survives_resume(tmp_path: Path) -> None:
    """compact() makes the next copies summary + tail; a resumed session sends the same bytes without summarizing."""
    msgs = history(12)
    before = copy.deepcopy(msgs)
    summarize = Counting()
    with Budget.open(tmp_path / "s", SESSION, summarizer=summarize) as b:
        full = b.prepare(msgs)
        assert len(full.messages) == len(msgs)
        assert b.compact(msgs) is True
        req = b.prepare(msgs)
        assert req.report.compacted
        assert req.report.summarized_tokens > SESSION.compact_min_reclaim_tokens
        assert msgs == before
        first = req.messages[0]
        assert first["role"] == "user"
        assert "<summary>" in first["content"]
        assert "Never edit tests/." in first["content"]
        tail = req.messages[1:]
        assert tail[0]["role"] == "assistant"
        assert tail == msgs[len(msgs) - len(tail) :]
        assert len(summarize.calls) == 1
        again = b.prepare([*msgs, {"role": "assistant", "content": "Done."}])
        assert again.messages[: len(req.messages)] == req.messages
        assert again.report.prefix_stable
        assert not again.report.compacted
        assert not full.report.compacted
    never = Counting(fail=True)
    with Budget.open(tmp_path / "s", SESSION, summarizer=never) as b:
        assert _bytes(b.prepare(msgs)) == _bytes(req)
        assert never.calls == []
        assert b.uncompact() is True
        assert len(b.prepare(msgs).messages) == len(msgs)
    with Budget.open(tmp_path / "s", SESSION) as b:
        assert len(b.prepare(msgs).messages) == len(msgs)


def test_a_short_history_is_not_compacted(tmp_path: Path) -> None:
    """When the prefix holds less than the minimum reclaim, compact() declines and calls no model."""
    summarize = Counting()
    with Budget.open(tmp_path / "s", SESSION, summarizer=summarize) as b:
        assert b.compact(history(1)) is False
    assert summarize.calls == []


def test_compacting_without_a_summarizer_is_a_clear_error(tmp_path: Path) -> None:
    """compact() on a session opened without a summarizer raises InputError saying what to pass."""
    with Budget.open(tmp_path / "s", SESSION) as b, pytest.raises(InputError, match="summarizer"):
        b.compact(history(12))


def test_auto_compaction_runs_in_prepare_near_the_window(tmp_path: Path) -> None:
    """In auto mode prepare compacts once the estimate passes window - reserve - margin, and not before."""
    cfg = SESSION.model_copy(update={"compaction": "auto"})
    summarize = Counting()
    with Budget.open(tmp_path / "s", cfg, summarizer=summarize) as b:
        short = history(3)
        assert len(b.prepare(short).messages) == len(short)
        assert summarize.calls == []
        long = history(20)
        req = b.prepare(long)
        assert len(summarize.calls) == 1
        assert req.report.compacted
        assert "<summary>" in req.messages[0]["content"]
        assert sum(estimate_tokens(m) for m in req.messages) < 3_000


def test_the_breaker_opens_after_three_failures_and_prepare_goes_on(tmp_path: Path) -> None:
    """A failing summarizer is tried 3 times, then no more; every prepare still returns the full copy."""
    cfg = SESSION.model_copy(update={"compaction": "auto"})
    broken = Counting(fail=True)
    msgs = history(20)
    with Budget.open(tmp_path / "s", cfg, summarizer=broken) as b:
        for _ in range(5):
            assert len(b.prepare(msgs).messages) == len(msgs)
        assert len(broken.calls) == 3
        # A manual call still tries, and says why it failed.
        with pytest.raises(RuntimeError, match="down"):
            b.compact(msgs)
        broken.fail = False
        assert b.compact(msgs) is True
        assert "<summary>" in b.prepare(msgs).messages[0]["content"]


def test_an_empty_summary_counts_as_a_failure(tmp_path: Path) -> None:
    """A summarizer returning blank text makes no checkpoint; the full history is still sent."""
    with Budget.open(tmp_path / "s", SESSION, summarizer=lambda _m: "  ") as b:
        msgs = history(12)
        with pytest.raises(InputError, match="no summary"):
            b.compact(msgs)
        assert len(b.prepare(msgs).messages) == len(msgs)


@pytest.mark.parametrize("fmt", ["anthropic", "openai_chat", "openai_responses"])
@settings(max_examples=examples(15), deadline=None)
@given(data=st.data())
def test_a_resumed_session_sends_the_same_bytes_after_compaction(
    fmt: str, data: st.DataObject
) -> None:
    """In each format, a compacted copy is byte-identical after a resume, with no summary call, and pairs stay whole."""
    msgs = data.draw(conversations_in(fmt))
    cfg = SESSION.model_copy(update={"compact_tail_tokens": 50, "compact_min_reclaim_tokens": 1})
    with tempfile.TemporaryDirectory() as root:
        with Budget.open(Path(root) / "s", cfg, format=fmt, summarizer=Counting()) as b:
            b.compact(msgs)
            req = b.prepare(msgs)
        never = Counting(fail=True)
        with Budget.open(Path(root) / "s", cfg, format=fmt, summarizer=never) as b:
            assert _bytes(b.prepare(msgs)) == _bytes(req)
        assert never.calls == []
    if req.report.compacted:
        f = get_format(fmt)
        made = {
            c.call_id for i in range(len(req.messages)) for c in scan_at(f, req.messages, i).calls
        }
        answered = {
            r.call_id for i in range(len(req.messages)) for r in scan_at(f, req.messages, i).results
        }
        assert answered <= made
