"""Regressions from a hostile review of compaction: what the summarizer reads, a summary of
nothing, an id every turn reuses, a runaway summary, a history that is not a list."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import structlog

from budget import Budget, BudgetConfig, InputError
from tests.compaction import AUTO, Counting
from tests.strategies import big, conversation

Message = dict[str, Any]

MANUAL = BudgetConfig(
    fsync=False,
    compaction="manual",
    compact_tail_tokens=500,
    compact_tail_messages=2,
    compact_min_reclaim_tokens=1_000,
)
"""The default window with a small tail: a few rounds of spilled outputs are worth a summary."""


def _spilling_history(rounds: int = 6, lines: int = 20_000) -> list[Message]:
    """A task, then ``rounds`` rounds of one bash call whose output (~400 KB) is spilled."""
    return conversation([[big(lines, f"b{r}")] for r in range(rounds)])


class Recording:
    """A summarizer that keeps the messages it was given and returns a short summary."""

    def __init__(self) -> None:
        self.parts: list[list[Any]] = []

    def __call__(self, messages: Sequence[Any]) -> str:
        self.parts.append(list(messages))
        return f"The build was investigated over {len(messages)} messages."


def test_the_summarizer_reads_spilled_outputs_as_their_envelopes(tmp_path: Path) -> None:
    """After a prepare spilled the old outputs, compact() gives the summarizer the whole prefix as
    it was sent (envelopes with their refs), not nothing and not the raw outputs."""
    history = _spilling_history()
    summarizer = Recording()
    with Budget.open(tmp_path / "s", MANUAL, summarizer=summarizer) as session:
        sent = session.prepare(history)
        refs = [d.ref for d in sent.report.decisions if d.ref]
        assert len(refs) == 6
        assert session.compact(history)
    (part,) = summarizer.parts
    assert len(part) >= 9  # the task and the rounds before the tail
    text = json.dumps(part)
    assert "b0 line 10000" not in text  # no raw output (an envelope previews its head and tail)
    assert sum(ref in text for ref in refs) >= 4  # the envelopes of the summarized rounds


@pytest.mark.usefixtures("structlog_defaults")
def test_a_message_larger_than_a_summary_request_skips_the_compaction(tmp_path: Path) -> None:
    """With nothing decided yet (a compact() before any prepare), the raw output before the tail
    fits no summary request: no summarizer call, no checkpoint, a skip event with its reason."""
    history = _spilling_history(rounds=3, lines=200_000)
    summarizer = Recording()
    with (
        structlog.testing.capture_logs() as logs,
        Budget.open(tmp_path / "s", MANUAL, summarizer=summarizer) as session,
    ):
        assert session.compact(history) is False
        copy = session.prepare(history)
    assert summarizer.parts == []
    assert not copy.report.compacted and len(copy.messages) == len(history)
    skipped = [e for e in logs if e["event"] == "toolbudget.session.compaction_skipped"]
    assert skipped and "does not fit a summary request" in skipped[0]["reason"]


def test_auto_compaction_of_spilled_rounds_summarizes_them(tmp_path: Path) -> None:
    """A 32k-window loop whose every other output (66 KB) is spilled compacts with a summary of
    the rounds it replaces each time (the review saw a summary of 0 messages stand for 28)."""
    # Staleness off: the trims the cost model prices would keep this loop under the window.
    config = BudgetConfig(fsync=False, window=32_000, compaction="auto", staleness=False)
    summarizer = Recording()
    history: list[Message] = [{"role": "user", "content": "Find why the build is slow."}]
    compactions = 0
    with Budget.open(tmp_path / "s", config, summarizer=summarizer) as session:
        for r in range(30):
            compactions += session.prepare(history, now=1_000 + r).report.compacted
            said = {"type": "text", "text": f"Looking at log {r}, " + "thinking " * 40}
            call = {"type": "tool_use", "id": f"t{r}", "name": "bash", "input": {}}
            output = "".join(f"build{r} step {n}: ok\n" for n in range(3_000 if r % 2 else 100))
            result = {"type": "tool_result", "tool_use_id": f"t{r}", "content": output}
            history += [
                {"role": "assistant", "content": [said, call]},
                {"role": "user", "content": [result]},
            ]
    assert compactions >= 2
    assert len(summarizer.parts) == compactions
    assert all(len(part) >= 10 for part in summarizer.parts)


def _chat(rounds: int, call_id: str | None) -> list[Message]:
    """A Chat Completions history of ``rounds`` tool rounds; every call named ``call_id`` when
    given (as some servers do), else uniquely."""
    msgs: list[Message] = [
        {"role": "system", "content": "You are an engineer."},
        {"role": "user", "content": "Fix the parser."},
    ]
    for r in range(rounds):
        cid = call_id or f"call_{r}"
        call = {"id": cid, "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        msgs.append({"role": "assistant", "content": None, "tool_calls": [call]})
        msgs.append({"role": "tool", "tool_call_id": cid, "content": big(40, f"r{r}")})
    return msgs


@pytest.mark.parametrize("call_id", [None, "call_0"])
def test_an_id_every_turn_reuses_still_compacts(tmp_path: Path, call_id: str | None) -> None:
    """A history whose every call is ``call_0`` compacts as the same history with unique ids does:
    each result pairs with its own turn's call, so the tail no longer reaches back to the first."""
    history = _chat(20, call_id)
    summarizer = Counting()
    with Budget.open(tmp_path / "s", AUTO.model_copy(update={"compaction": "manual"}),
                     summarizer=summarizer) as session:  # fmt: skip
        assert session.compact(history) is True
        copy = session.prepare(history)
    assert copy.report.tokens_after < 3_000
    assert len(copy.messages) < len(history) // 2


@pytest.mark.usefixtures("structlog_defaults")
def test_a_summary_longer_than_the_reserve_fails_and_opens_the_breaker(tmp_path: Path) -> None:
    """A summarizer returning more than compact_reserve_tokens fails the compaction (no
    checkpoint, the prefix unchanged); three in a row open the breaker; compact() raises it."""
    calls: list[int] = []

    def runaway(messages: Sequence[Any]) -> str:
        calls.append(len(messages))
        return "S" * 200_000

    history = _chat(30, None)
    with (
        structlog.testing.capture_logs() as logs,
        Budget.open(tmp_path / "s", AUTO, summarizer=runaway) as session,
    ):
        for end in range(6, len(history) + 1, 2):
            copy = session.prepare(history[:end])
            assert not copy.report.compacted
        assert len(calls) == AUTO.compact_breaker_failures
        with pytest.raises(InputError, match="more than the 500 the window keeps"):
            session.compact(history)
    events = [e["event"] for e in logs]
    assert events.count("toolbudget.session.compaction_breaker_open") == 1
    assert "toolbudget.session.compaction" not in events


@pytest.mark.parametrize("bad", [None, "not a list", ({"role": "user"} for _ in range(2))])
def test_compact_refuses_a_history_that_is_not_a_list(tmp_path: Path, bad: Any) -> None:
    """compact() and acompact() refuse None, a string or a generator with the InputError
    prepare gives, before any summarizer call."""
    summarizer = Counting()
    with (
        Budget.open(tmp_path / "s", MANUAL, summarizer=summarizer) as session,
        pytest.raises(InputError, match="messages must be a list of messages"),
    ):
        session.compact(bad)
    assert summarizer.calls == []
