"""Compaction on the request path: the anchored trigger, reactive compaction, aprepare/acompact."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2
import pytest

from budget import Budget, ContextOverflow, InputError, Prepared, summarizers
from tests.compaction import AUTO, AsyncCounting, Counting, anthropic_reply, history
from tests.strategies import big, chat_assistant, chat_tool

if TYPE_CHECKING:  # the tests import the SDK themselves, so collecting this module imports none
    import anthropic

SESSION = AUTO
"""A 4k window: auto compaction above 3,000 tokens."""

ANTHROPIC_TOO_LONG = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": "prompt is too long: 208310 tokens > 200000 maximum",
    },
}


def _bytes(req: Prepared) -> bytes:
    return json.dumps(req.messages, sort_keys=True).encode()


def _anthropic_error(body: dict[str, Any]) -> anthropic.APIStatusError:
    """The exception the anthropic client raises for this HTTP 400 response."""
    import anthropic

    client = anthropic.Anthropic(api_key="test-key", base_url="http://localhost:9")
    request = httpx2.Request("POST", "http://localhost:9/v1/messages")
    return client._make_status_error_from_response(httpx2.Response(400, json=body, request=request))


# --- 1. the proactive trigger is the anchored estimate of the budgeted copy ------------------


def test_auto_compaction_measures_the_budgeted_copy_not_the_raw_history(tmp_path: Path) -> None:
    """Results spilled to envelopes keep the copy under the threshold: no summary call, though the raw history is over it."""
    cfg = SESSION.model_copy(update={"window": 60_000, "result_cap": 2_000})
    summarize = Counting()
    msgs = history(4, lines=2_000)  # ~4 x 40k characters of output, each spilled
    with Budget.open(tmp_path / "s", cfg, summarizer=summarize) as b:
        req = b.prepare(msgs)
    assert req.report.tokens_before > 60_000 - 1_000
    assert req.report.tokens_after < 60_000 - 1_000
    assert req.report.spilled == 4
    assert summarize.calls == []
    assert not req.report.compacted


def test_auto_compaction_counts_what_the_reported_usage_says(tmp_path: Path) -> None:
    """A usage near the window (system prompt, tools the messages do not show) triggers compaction that the messages' own estimate would not."""
    summarize = Counting()
    msgs = history(6)
    with Budget.open(tmp_path / "s", SESSION, summarizer=summarize) as b:
        first = b.prepare(msgs)
        assert first.report.tokens_after < 3_000
        assert summarize.calls == []
        msgs = [*msgs, {"role": "assistant", "content": "Looking at the parser now."}]
        req = b.prepare(msgs, usage={"input_tokens": 3_400, "output_tokens": 20})
    assert summarize.calls and req.report.compacted
    assert "<summary>" in req.messages[0]["content"]


# --- 2. reactive compaction after the last trim level ----------------------------------------


def test_the_third_overflow_compacts_before_context_overflow(tmp_path: Path) -> None:
    """With a summarizer, the third prompt-too-long error schedules a compaction; only the fourth in the streak raises."""
    cfg = SESSION.model_copy(update={"window": 200_000})  # far from the proactive threshold
    summarize = Counting()
    error = _anthropic_error(ANTHROPIC_TOO_LONG)
    msgs = history(12)
    with Budget.open(tmp_path / "s", cfg, summarizer=summarize) as b:
        assert len(b.prepare(msgs).messages) == len(msgs)
        assert b.on_overflow(error) and b.on_overflow(error)
        b.prepare(msgs)
        assert summarize.calls == []
        assert b.on_overflow(error) is True  # trimming exhausted: compaction is next
        req = b.prepare(msgs)
        assert len(summarize.calls) == 1
        assert req.report.compacted
        assert len(req.messages) < len(msgs)
        with pytest.raises(ContextOverflow, match="4 times"):
            b.on_overflow(error)


def test_without_a_summarizer_the_third_overflow_still_raises(tmp_path: Path) -> None:
    """No summarizer, nothing left to do after the last trim level: ContextOverflow as before."""
    error = _anthropic_error(ANTHROPIC_TOO_LONG)
    with Budget.open(tmp_path / "s", SESSION.model_copy(update={"window": 200_000})) as b:
        b.prepare(history(12))
        assert b.on_overflow(error) and b.on_overflow(error)
        with pytest.raises(ContextOverflow, match="3 times"):
            b.on_overflow(error)


def test_a_new_overflow_streak_may_compact_again(tmp_path: Path) -> None:
    """A successful response ends the streak: its third overflow compacts again."""
    cfg = SESSION.model_copy(update={"window": 200_000})
    summarize = Counting()
    error = _anthropic_error(ANTHROPIC_TOO_LONG)
    msgs = history(12)
    with Budget.open(tmp_path / "s", cfg, summarizer=summarize) as b:
        b.prepare(msgs)
        for _ in range(3):
            assert b.on_overflow(error)
        b.prepare(msgs)
        msgs = [*msgs, *history(10)[1:]]
        b.prepare(msgs, usage={"input_tokens": 1_000, "output_tokens": 10})  # a success
        for _ in range(3):
            assert b.on_overflow(error)
        assert b.prepare(msgs).report.compacted
    assert len(summarize.calls) == 2


# --- 3. aprepare / acompact and async summarizers -------------------------------------------


def _in_format(fmt: str, rounds: int) -> list[dict[str, Any]]:
    """``history(rounds)`` in the wire format ``fmt``."""
    if fmt == "anthropic":
        return history(rounds)
    msgs: list[dict[str, Any]] = [
        {"role": "user", "content": "Fix the parser.\nNever edit tests/."}
    ]
    for r in range(rounds):
        out = big(40, f"r{r}")
        if fmt == "openai_chat":
            msgs += [chat_assistant((f"c{r}", "bash")), chat_tool(f"c{r}", out)]
        else:
            call = {"type": "function_call", "call_id": f"c{r}", "name": "bash", "arguments": "{}"}
            msgs += [call, {"type": "function_call_output", "call_id": f"c{r}", "output": out}]
    return msgs


@pytest.mark.parametrize("fmt", ["anthropic", "openai_chat", "openai_responses"])
def test_aprepare_sends_the_bytes_prepare_sends(fmt: str, tmp_path: Path) -> None:
    """Request after request, through an auto compaction, aprepare with an async summarizer equals prepare with the sync one, byte for byte."""
    sync, coro = Counting(), AsyncCounting()
    steps = [_in_format(fmt, n) for n in (2, 6, 20, 24)]
    with (
        Budget.open(tmp_path / "a", SESSION, summarizer=sync) as a,
        Budget.open(tmp_path / "b", SESSION, summarizer=coro) as b,
    ):
        for i, msgs in enumerate(steps):
            want = a.prepare(msgs, now=1_000.0 + i)
            got = asyncio.run(b.aprepare(msgs, now=1_000.0 + i))
            assert _bytes(got) == _bytes(want)
            assert got.report.compacted == want.report.compacted
            assert got.report.request == want.report.request
    assert sync.calls == coro.calls and len(sync.calls) >= 1


def test_aprepare_in_the_chat_format_with_a_real_async_sdk_client(tmp_path: Path) -> None:
    """aprepare awaits summarizers.anthropic over an AsyncAnthropic client (mocked HTTP) and sends its summary."""
    import anthropic

    sent: list[dict[str, Any]] = []

    async def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(json.loads(request.content))
        return httpx2.Response(
            200,
            json=anthropic_reply("## Goal\nFix the parser."),
        )

    async def run() -> Prepared:
        client = anthropic.AsyncAnthropic(
            api_key="test", http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
        )
        summarize = summarizers.anthropic(client, model="claude-sonnet-4-5")
        msgs: list[dict[str, Any]] = [{"role": "user", "content": "Fix the parser."}]
        for r in range(20):
            msgs += [chat_assistant((f"c{r}", "bash")), chat_tool(f"c{r}", big(40, f"r{r}"))]
        with Budget.open(tmp_path / "s", SESSION, summarizer=summarize) as b:
            return await b.aprepare(msgs)

    req = asyncio.run(run())
    assert req.report.compacted and len(sent) == 1
    assert "tools" not in sent[0]
    assert "## Goal\nFix the parser." in req.messages[0]["content"]


def test_prepare_with_an_async_summarizer_is_a_clear_error(tmp_path: Path) -> None:
    """The sync prepare and compact refuse an async summarizer by naming aprepare/acompact, and count no failure."""
    coro = AsyncCounting()
    msgs = history(20)
    with Budget.open(tmp_path / "s", SESSION, summarizer=coro) as b:
        with pytest.raises(InputError, match="aprepare"):
            b.prepare(msgs)
        with pytest.raises(InputError, match="acompact"):
            b.compact(msgs)
        assert b._compactor.failures == 0
        assert asyncio.run(b.aprepare(msgs)).report.compacted


def test_acompact_awaits_the_summary_and_prepare_sends_it(tmp_path: Path) -> None:
    """acompact with an async summarizer records the checkpoint the next prepare projects."""
    coro = AsyncCounting()
    msgs = history(12)
    with Budget.open(
        tmp_path / "s", SESSION.model_copy(update={"compaction": "manual"}), summarizer=coro
    ) as b:
        assert asyncio.run(b.acompact(msgs)) is True
        req = b.prepare(msgs)
    assert req.report.compacted and len(coro.calls) == 1
    assert "<summary>" in req.messages[0]["content"]


def test_an_async_summarizer_that_fails_opens_the_breaker_in_aprepare(tmp_path: Path) -> None:
    """An async summarizer raising is counted like a sync one: 3 tries, then the full copy without trying."""
    coro = AsyncCounting(fail=True)
    msgs = history(20)
    with Budget.open(tmp_path / "s", SESSION, summarizer=coro) as b:
        for _ in range(5):
            assert len(asyncio.run(b.aprepare(msgs)).messages) == len(msgs)
        assert b._compactor.breaker_open
    assert len(coro.calls) == 3


def test_a_second_compaction_carries_the_users_constraints_not_the_summary_lines(
    tmp_path: Path,
) -> None:
    """Compacting a compacted view keeps the constraints of the first checkpoint, not lines of its summary message."""
    cfg = SESSION.model_copy(update={"compaction": "manual"})
    msgs = history(12)
    with Budget.open(tmp_path / "s", cfg, summarizer=Counting()) as b:
        assert b.compact(msgs)
        msgs = history(24)  # the same first 25 messages, then 12 rounds more
        assert b.compact(msgs)
        first = b.prepare(msgs).messages[0]["content"]
    constraints = first.split("<user-constraints")[1].split("</user-constraints>")[0]
    assert "Fix the parser." in constraints and "Never edit tests/." in constraints
    assert "compacted" not in constraints


def _read_round(i: int, path: str, text: str) -> list[dict[str, Any]]:
    call = {
        "type": "tool_use",
        "id": f"toolu_read_{i}",
        "name": "read_file",
        "input": {"path": path},
    }
    result = {"type": "tool_result", "tool_use_id": f"toolu_read_{i}", "content": text}
    return [{"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]


def test_a_second_compaction_keeps_the_file_snapshots_no_later_read_replaced(
    tmp_path: Path,
) -> None:
    """A file snapshot the first checkpoint carried stays after a second compaction when no later
    read of it (or of other files) came in between: it is still among the most recently read."""
    cfg = SESSION.model_copy(update={"compaction": "manual"})
    msgs = [*history(12)[:1], *_read_round(0, "src/parser.py", "def parse():\n    pass\n")]
    msgs += history(12)[1:]
    with Budget.open(tmp_path / "s", cfg, summarizer=Counting()) as b:
        assert b.compact(msgs)
        assert '<file path="src/parser.py"' in b.prepare(msgs).messages[0]["content"]
        msgs = [*msgs, *history(24)[25:]]
        assert b.compact(msgs)
        first = b.prepare(msgs).messages[0]["content"]
    assert '<file path="src/parser.py"' in first
    assert "def parse():" in first


def test_a_caller_marking_its_copys_summary_message_changes_no_later_copy(tmp_path: Path) -> None:
    """A caller adding a cache_control breakpoint to (or editing) the summary message of its
    request copy changes neither the next copy nor makes it differ from a resumed session's."""
    cfg = SESSION.model_copy(update={"compaction": "manual"})
    msgs = history(12)
    with Budget.open(tmp_path / "s", cfg, summarizer=Counting()) as b:
        assert b.compact(msgs)
        first = b.prepare(msgs)
        sent = _bytes(first)
        first.messages[0]["cache_control"] = {"type": "ephemeral"}
        first.messages[0]["content"] = "edited by the caller"
        assert _bytes(b.prepare(msgs)) == sent
    with Budget.open(tmp_path / "s", cfg) as resumed:
        assert _bytes(resumed.prepare(msgs)) == sent


def _trimming(messages: list[Any]) -> str:
    """A summarizer that edits what it reads in place: its blocks' texts cut to 5 characters,
    then every message's content replaced."""
    for m in messages:
        for block in m["content"] if isinstance(m.get("content"), list) else []:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                block["text"] = block["text"][:5]
        m["content"] = "edited"
    return "summary"


async def _trimming_async(messages: list[Any]) -> str:
    """:func:`_trimming`, awaited."""
    return _trimming(messages)


@pytest.mark.parametrize("how", ["compact", "prepare", "aprepare"])
def test_a_summarizer_that_edits_what_it_reads_leaves_the_history_alone(
    how: str, tmp_path: Path
) -> None:
    """The summarizer is handed a copy: one that edits the messages it reads changes nothing of
    the caller's history, manual, automatic or awaited."""
    msgs = history(12)
    before = json.dumps(msgs, sort_keys=True)
    fn: Any = _trimming_async if how == "aprepare" else _trimming
    manual = SESSION.model_copy(update={"compaction": "manual"})
    with Budget.open(tmp_path / "s", manual if how == "compact" else SESSION, summarizer=fn) as b:
        if how == "compact":
            assert b.compact(msgs) is True
        elif how == "prepare":
            assert b.prepare(msgs).report.compacted
        else:
            assert asyncio.run(b.aprepare(msgs)).report.compacted
    assert json.dumps(msgs, sort_keys=True) == before


def test_a_message_that_cannot_be_copied_is_still_summarized(tmp_path: Path) -> None:
    """A message holding an object deepcopy refuses (a lock) is handed to the summarizer as it
    is: the compaction still runs, as it did before messages were copied."""
    import threading

    msgs = history(20)
    for m in msgs:
        m["meta"] = threading.Lock()
    with Budget.open(tmp_path / "s", SESSION, summarizer=lambda part: "summary") as b:
        assert b.prepare(msgs).report.compacted
