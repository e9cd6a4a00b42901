"""Compaction under failure (SPEC §11.6) and its properties across requests (SPEC §11.1).

A summary request refused as too long is retried without its oldest rounds; a summarizer that
raises, hangs past ``compact_timeout_s`` or returns nothing fails the compaction, the breaker
opens after 3, and every request still goes out with the whole history.
"""

from __future__ import annotations

import copy
import json
import tempfile
import threading
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from budget import Budget, BudgetConfig, ConfigError, estimate_tokens, get_format, summarizers
from budget._view import scan_at
from budget.compaction._compaction import (
    drop_oldest_rounds,
    paired_start,
    render_transcript,
    tail_start,
)
from budget.compaction._compactor import limits
from tests.budget.test_compaction import SESSION, conversations_in
from tests.compaction import Counting, history

if TYPE_CHECKING:  # the client is built in the test, so collecting this module imports no SDK
    import anthropic

AUTO = SESSION.model_copy(update={"compaction": "auto"})


def _events(logs: Sequence[MutableMapping[str, Any]], name: str) -> list[MutableMapping[str, Any]]:
    return [e for e in logs if e["event"] == f"toolbudget.session.{name}"]


class TooLongOver:
    """A summarizer refusing requests of more than ``limit`` messages with SummaryTooLong."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.calls: list[Sequence[Any]] = []

    def __call__(self, messages: Sequence[Any]) -> str:
        self.calls.append(list(messages))
        if len(messages) > self.limit:
            raise summarizers.SummaryTooLong(f"{len(messages)} messages > {self.limit}")
        text = summarizers.extractive()(messages)
        assert isinstance(text, str)
        return text


def test_a_summary_refused_as_too_long_is_retried_without_the_oldest_rounds(
    tmp_path: Path,
) -> None:
    """SummaryTooLong makes compaction drop whole oldest rounds and ask again, one event per retry."""
    msgs = history(12)
    summarize = TooLongOver(limit=10)
    with capture_logs() as logs, Budget.open(tmp_path / "s", SESSION, summarizer=summarize) as b:
        assert b.compact(msgs) is True
        req = b.prepare(msgs)
    sizes = [len(c) for c in summarize.calls]
    assert sizes[0] > 10 >= sizes[-1]
    assert sizes == sorted(sizes, reverse=True)
    assert len(_events(logs, "compaction_retry")) == len(sizes) - 1 >= 1
    assert _events(logs, "compaction_failed") == []
    # Each retry summarized a tail of the first request: the oldest messages went, whole rounds.
    f = get_format("anthropic")
    for part in summarize.calls[1:]:
        assert part == summarize.calls[0][len(summarize.calls[0]) - len(part) :]
        called = {c.call_id for i in range(len(part)) for c in scan_at(f, part, i).calls}
        answered = {r.call_id for i in range(len(part)) for r in scan_at(f, part, i).results}
        assert answered <= called
    assert req.report.compacted
    assert "<summary>" in req.messages[0]["content"]


def test_a_summary_that_stays_too_long_fails_after_three_retries(tmp_path: Path) -> None:
    """A summarizer refusing every request is asked 4 times (3 retries), then the compaction fails."""
    summarize = TooLongOver(limit=0)
    with capture_logs() as logs, Budget.open(tmp_path / "s", AUTO, summarizer=summarize) as b:
        msgs = history(20)
        assert len(b.prepare(msgs).messages) == len(msgs)
    assert len(summarize.calls) == 4
    assert len(_events(logs, "compaction_retry")) == 3
    assert len(_events(logs, "compaction_failed")) == 1


def _anthropic_client(limit_chars: int, seen: list[int]) -> anthropic.Anthropic:
    """A real Anthropic client whose HTTP transport refuses transcripts over ``limit_chars``."""
    import anthropic

    def handle(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        size = len(body["messages"][0]["content"])
        seen.append(size)
        if size > limit_chars:
            error = {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": f"prompt is too long: {size} tokens > {limit_chars} maximum",
                },
            }
            return httpx2.Response(400, json=error)
        reply = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [{"type": "text", "text": "## Goal\n- fix the parser"}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
        return httpx2.Response(200, json=reply)

    return anthropic.Anthropic(
        api_key="test",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handle)),
    )


def test_the_sdks_prompt_too_long_error_is_recognised_and_retried(tmp_path: Path) -> None:
    """The Anthropic SDK's 400 "prompt is too long" from the adapter triggers the same retry."""
    seen: list[int] = []
    msgs = history(12)
    whole = len(render_transcript(msgs[:-2]))
    client = _anthropic_client(whole // 2, seen)
    summarize = summarizers.anthropic(client, model="claude-sonnet-4-5")
    with capture_logs() as logs, Budget.open(tmp_path / "s", SESSION, summarizer=summarize) as b:
        assert b.compact(msgs) is True
        assert "fix the parser" in b.prepare(msgs).messages[0]["content"]
    assert len(seen) >= 2
    assert seen[-1] <= whole // 2 < seen[0]
    assert len(_events(logs, "compaction_retry")) == len(seen) - 1


class Hanging:
    """A summarizer that blocks until released (a hung model call)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def __call__(self, messages: Sequence[Any]) -> str:
        self.calls += 1
        self.release.wait(30)
        return "late summary"


@pytest.fixture
def hanging() -> Iterator[Hanging]:
    """A hanging summarizer, released when the test ends so its threads finish."""
    h = Hanging()
    yield h
    h.release.set()


def _raising(messages: Sequence[Any]) -> str:
    raise RuntimeError("the summary model is down")


def _empty(messages: Sequence[Any]) -> str:
    return ""


@pytest.mark.parametrize("kind", ["raises", "hangs", "empty"])
def test_a_failing_summarizer_opens_the_breaker_after_three_and_nothing_is_lost(
    tmp_path: Path, kind: str, hanging: Hanging
) -> None:
    """Raising, hanging past the timeout or returning "": 3 tries, one breaker event, every copy whole."""
    calls: list[int] = []

    def counted(fn: Callable[[Sequence[Any]], str]) -> Callable[[Sequence[Any]], str]:
        def wrapper(messages: Sequence[Any]) -> str:
            calls.append(len(messages))
            return fn(messages)

        return wrapper

    summarizer = {"raises": counted(_raising), "hangs": counted(hanging), "empty": counted(_empty)}
    cfg = AUTO.model_copy(update={"compact_timeout_s": 0.2})
    msgs = history(20)
    before = copy.deepcopy(msgs)
    with (
        capture_logs() as logs,
        Budget.open(tmp_path / "s", cfg, summarizer=summarizer[kind]) as b,
        Budget.open(tmp_path / "plain", cfg.model_copy(update={"compaction": "off"})) as plain,
    ):
        for extra in range(5):
            grown = [*msgs, *([{"role": "assistant", "content": "Still here."}] * extra)]
            req = b.prepare(grown)
            # Nothing lost: the very copy a session without compaction sends.
            assert req.messages == plain.prepare(grown).messages
            assert not req.report.compacted
    assert len(calls) == 3
    assert msgs == before
    failed = _events(logs, "compaction_failed")
    assert [e["failures"] for e in failed] == [1, 2, 3]
    assert len(_events(logs, "compaction_breaker_open")) == 1
    if kind == "hangs":
        assert all("within 0.2 s" in e["error"] for e in failed)


def test_a_manual_call_closes_the_breaker_even_when_it_fails(tmp_path: Path) -> None:
    """After the breaker opened, a manual compact() lets automatic compaction try again."""
    broken = Counting(fail=True)
    msgs = history(20)
    with Budget.open(tmp_path / "s", AUTO, summarizer=broken) as b:
        for _ in range(4):
            b.prepare(msgs)
        assert len(broken.calls) == 3
        with pytest.raises(RuntimeError, match="down"):
            b.compact(msgs)
        broken.fail = False
        req = b.prepare(msgs)
    assert len(broken.calls) == 5
    assert req.report.compacted


def test_a_hung_manual_compaction_raises_summary_timeout(tmp_path: Path, hanging: Hanging) -> None:
    """A manual compact() whose summarizer hangs raises SummaryTimeout after compact_timeout_s."""
    cfg = SESSION.model_copy(update={"compact_timeout_s": 0.1})
    with Budget.open(tmp_path / "s", cfg, summarizer=hanging) as b:
        with pytest.raises(summarizers.SummaryTimeout, match=r"within 0\.1 s"):
            b.compact(history(12))
        assert len(b.prepare(history(12)).messages) == len(history(12))


@pytest.mark.parametrize("bad", [0, -1.5, "soon"])
def test_a_bad_summarizer_timeout_is_refused_by_name(bad: object) -> None:
    """compact_timeout_s must be a positive number of seconds (or None for no limit)."""
    with pytest.raises(ConfigError, match="compact_timeout_s"):
        BudgetConfig(compact_timeout_s=bad)
    assert BudgetConfig(compact_timeout_s=None).compact_timeout_s is None


def test_the_copy_lists_the_tools_called_before_compaction(tmp_path: Path) -> None:
    """The summary message names the tools the conversation used, after the file snapshots."""
    msgs = history(12)
    msgs[3] = {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "r_read", "name": "read_file", "input": {"path": "a.py"}}
        ],
    }
    msgs[4] = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "r_read", "content": "x = 1\n"}],
    }
    with Budget.open(tmp_path / "s", SESSION, summarizer=Counting()) as b:
        assert b.compact(msgs) is True
        text = b.prepare(msgs).messages[0]["content"]
    tools = text[text.index("<tools") :]
    assert "bash, read_file" in tools
    assert text.index('<file path="a.py"') < text.index("<tools")
    # A resumed session shows the same list (it is in the checkpoint record).
    with Budget.open(tmp_path / "s", SESSION) as b:
        assert b.prepare(msgs).messages[0]["content"] == text


# --- properties ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["anthropic", "openai_chat", "openai_responses"])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_dropping_oldest_rounds_never_leaves_an_orphan_result(
    fmt: str, data: st.DataObject
) -> None:
    """After the retry's cut, no result at the front answers a call that was dropped."""
    msgs = data.draw(conversations_in(fmt))
    f = get_format(fmt)
    cut = drop_oldest_rounds(msgs, f, estimate_tokens)
    assert 0 <= cut < max(len(msgs), 1)
    if cut:
        dropped = {c.call_id for i in range(cut) for c in scan_at(f, msgs, i).calls}
        rest = msgs[cut:]
        answered = {r.call_id for i in range(len(rest)) for r in scan_at(f, rest, i).results}
        assert not answered & dropped


class Recording:
    """The extractive summarizer, keeping every part it was given."""

    def __init__(self) -> None:
        self.parts: list[list[Any]] = []

    def __call__(self, messages: Sequence[Any]) -> str:
        self.parts.append(list(messages))
        text = summarizers.extractive()(messages)
        assert isinstance(text, str)
        return text


def test_a_call_too_big_for_the_summary_request_takes_its_result_out_too(tmp_path: Path) -> None:
    """A write whose input alone overflows the summary request's room is left out of it, and
    its result with it: the summarizer's part opens on the next round, not on a result of a call
    it never sees (a raw transcript a provider would refuse)."""
    rest = history(6)
    write = {
        "role": "assistant",
        "content": [
            {
                "type": "tool_use",
                "id": "w1",
                "name": "write_file",
                "input": {"path": "a.py", "content": "x = 1\n" * 4_000},
            }
        ],
    }
    done = {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "w1", "content": "ok"}]}  # fmt: skip
    summarize = Recording()
    with Budget.open(tmp_path / "s", SESSION, summarizer=summarize) as b:
        assert b.compact([rest[0], write, done, *rest[1:]]) is True
    (part,) = summarize.parts
    assert part[0]["role"] == "assistant" and part[0] is not write
    assert all(b.get("tool_use_id") != "w1" for m in part for b in _blocks(m))


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


@pytest.mark.parametrize("fmt", ["anthropic", "openai_chat", "openai_responses"])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_the_summarized_part_never_opens_on_an_orphan_result(fmt: str, data: st.DataObject) -> None:
    """Wherever the summarizer's room cuts the prefix, the part it is given starts at the first
    message at or after the cut that answers no call made before it: none of its results
    answers a call it does not show, and a cut already clean stays where it is."""
    msgs = data.draw(conversations_in(fmt))
    f = get_format(fmt)
    end = data.draw(st.integers(0, len(msgs)))
    start = data.draw(st.integers(0, end))
    first = paired_start(msgs, f, start, end)
    assert start <= first <= end
    part = msgs[first:end]
    before = {c.call_id for i in range(first) for c in scan_at(f, msgs, i).calls}
    shown = {c.call_id for i in range(len(part)) for c in scan_at(f, part, i).calls}
    answered = {r.call_id for i in range(len(part)) for r in scan_at(f, part, i).results}
    assert not (answered - shown) & before
    clean = paired_start(msgs, f, first, end)
    assert clean == first


def _json(messages: list[Any]) -> list[bytes]:
    return [json.dumps(m, sort_keys=True).encode() for m in messages]


@pytest.mark.parametrize("fmt", ["anthropic", "openai_chat", "openai_responses"])
@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_the_prefix_is_stable_between_compactions_and_the_input_unchanged(
    fmt: str, data: st.DataObject
) -> None:
    """Request by request under auto compaction, each copy extends the last unless it compacted."""
    msgs = data.draw(conversations_in(fmt))
    before = copy.deepcopy(msgs)
    cfg = AUTO.model_copy(
        update={
            "staleness": False,
            "window": data.draw(st.integers(1_500, 6_000)),
            "compact_tail_tokens": 50,
            "compact_min_reclaim_tokens": 1,
        }
    )
    compactions = 0
    with (
        tempfile.TemporaryDirectory() as root,
        Budget.open(Path(root) / "s", cfg, format=fmt, summarizer=Counting()) as b,
    ):
        last: list[bytes] | None = None
        for n in range(1, len(msgs) + 1):
            req = b.prepare(msgs[:n])
            now = _json(req.messages)
            if last is not None and not req.report.compacted:
                assert now[: len(last)] == last
                assert req.report.prefix_stable
            compactions += req.report.compacted
            last = now
    assert msgs == before


def test_a_responses_tail_never_starts_between_parallel_calls() -> None:
    """With parallel Responses calls still pending, the tail starts at the first call's reasoning."""
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "Task."},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "call_id": "a", "name": "bash", "arguments": "{}"},
        {"type": "function_call", "call_id": "b", "name": "bash", "arguments": "{}"},
    ]
    tail = tail_start(
        items,
        get_format("openai_responses"),
        min_tokens=1,
        min_messages=1,
        max_tokens=10**6,
        tokens=estimate_tokens,
    )
    assert tail.start == 1


# --- where and when it compacts: repeated messages, the unseen header, small windows ----------


def test_a_second_compaction_keeps_its_tail_when_messages_repeat(tmp_path: Path) -> None:
    """Re-compacting a history whose turns repeat word for word starts the tail where it was chosen."""
    msgs: list[dict[str, Any]] = [
        {"role": "user", "content": "Fix the parser.\nNever edit tests/."}
    ]
    for _ in range(30):
        msgs += [
            {"role": "assistant", "content": "Running the tests again. " * 20},
            {"role": "user", "content": "Tests still fail, go on."},
        ]
    with Budget.open(tmp_path / "s", SESSION, summarizer=Counting()) as b:
        assert b.compact(msgs[:41]) is True
        assert b.compact(msgs) is True
        req = b.prepare(msgs)
    tail = req.messages[1:]
    assert tail == msgs[len(msgs) - len(tail) :]
    assert sum(estimate_tokens(m) for m in tail) <= SESSION.compact_tail_max_tokens


def test_auto_compaction_counts_the_header_the_usage_reveals(tmp_path: Path) -> None:
    """System prompt and tools the usage reports but toolbudget never sees bring compaction earlier."""
    msgs = history(6)
    size = sum(estimate_tokens(m) for m in msgs)
    threshold = AUTO.window - AUTO.compact_reserve_tokens - AUTO.compact_margin_tokens  # type: ignore[operator]
    assert size < threshold
    header = threshold - size + 500
    summarize = Counting()
    with Budget.open(tmp_path / "s", AUTO, summarizer=summarize) as b:
        b.prepare(msgs[:-2])
        usage = {"input_tokens": sum(estimate_tokens(m) for m in msgs[:-2]) + header}
        # The trigger reads the budgeted copy's anchored estimate: the request that carries
        # the usage compacts (before the merge of the session side, the next one did).
        req = b.prepare(msgs, usage={**usage, "output_tokens": 10})
        assert b._compactor.header >= header - 50
    assert summarize.calls
    assert req.report.compacted


def test_a_small_window_scales_the_reserve_and_margin() -> None:
    """Under a 32k window Claude Code's 20k + 13k would leave a negative threshold: they take half."""
    small = limits(BudgetConfig(), 32_000, 0, manual=False)
    assert 16_000 <= small.threshold <= 16_002  # int rounding of the scaled settings
    assert 0 < small.tail_max_tokens <= small.threshold // 4
    assert limits(BudgetConfig(), 200_000, 0, manual=False).threshold == 167_000
    # A header leaving the messages nothing still asks a summary to pay for its call.
    crowded = limits(BudgetConfig(), 32_000, 30_000, manual=False)
    assert crowded.min_reclaim_tokens == 2_000
    assert crowded.file_chars == 0
