"""Findings of a hostile run against compaction with real sessions: each a test."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from budget import Budget, InputError, summarizers
from tests.compaction import build_log, compaction_config, history


def test_a_second_compaction_reads_the_first_summary_when_its_prefix_is_large(
    tmp_path: Path,
) -> None:
    """A compaction over a compacted history whose prefix exceeds one summary request still
    hands the summarizer the last summary, which alone stands for everything before it."""
    seen: list[Sequence[Any]] = []

    def summarize(messages: Sequence[Any]) -> str:
        seen.append(messages)
        text = summarizers.extractive(max_chars=800)(messages)
        assert isinstance(text, str)
        return f"SUMMARY-{len(seen)}\n{text}"

    config = compaction_config("manual")
    with Budget.open(tmp_path / "s", config, summarizer=summarize) as session:
        assert session.compact(history(30))
        assert session.compact(history(60))
        sent = session.prepare(history(60)).messages
    assert "SUMMARY-1" in str(seen[1])
    assert "SUMMARY-2" in sent[0]["content"]


def _chat(rounds: int) -> list[dict[str, Any]]:
    """A Chat Completions history: system prompt, task with rules, ``rounds`` bash rounds."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are careful."},
        {"role": "user", "content": "Fix the parser.\nNever edit tests/."},
    ]
    for i in range(rounds):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": build_log(i)},
        ]
    return messages


def test_a_system_message_the_caller_adds_after_a_compaction_is_sent(tmp_path: Path) -> None:
    """A system message the caller inserts among its leading ones after a compaction is sent
    before the summary, not dropped with the summarized prefix."""
    messages = _chat(30)
    rule = {"role": "system", "content": "Answer in French from now on."}
    config = compaction_config("manual")
    with Budget.open(tmp_path / "s", config, summarizer=summarizers.extractive()) as session:
        assert session.compact(messages)
        sent = session.prepare([messages[0], rule, *messages[1:]]).messages
    assert sent[:2] == [messages[0], rule]
    assert sent[2]["content"].startswith("This conversation was compacted")


@pytest.mark.parametrize("returned", [42, b"summary", ["summary"]])
def test_a_summary_that_is_not_text_is_refused_by_its_type(tmp_path: Path, returned: Any) -> None:
    """A summarizer returning something other than a str fails with an InputError naming the
    type it returned, not one saying it returned nothing."""
    config = compaction_config("manual")
    with (
        Budget.open(tmp_path / "s", config, summarizer=lambda _: returned) as session,
        pytest.raises(InputError, match=type(returned).__name__),
    ):
        session.compact(history(30))


def test_a_caller_dropping_the_summarized_messages_keeps_the_users_constraints(
    tmp_path: Path,
) -> None:
    """When the caller drops the messages a compaction summarized from its own list, the next
    compaction still carries the user's constraints the first one carried."""
    config = compaction_config("manual")
    with Budget.open(tmp_path / "s", config, summarizer=summarizers.extractive()) as session:
        assert session.compact(history(30))
        kept = session.prepare(history(30)).messages[1:]  # the caller keeps only the tail
        assert session.compact([*kept, *history(60)[len(history(30)) :]])
        sent = session.prepare([*kept, *history(60)[len(history(30)) :]]).messages
    assert "Never edit tests/." in sent[0]["content"]


def test_a_retried_summary_keeps_the_last_summary_while_dropping_old_rounds(
    tmp_path: Path,
) -> None:
    """A summary refused as too long is retried without the oldest rounds, but the last summary
    at the front of what is summarized is never among those dropped."""
    parts: list[Sequence[Any]] = []

    def summarize(messages: Sequence[Any]) -> str:
        parts.append(messages)
        if len(parts) == 2:  # the second compaction's first request: refused once
            raise summarizers.SummaryTooLong("prompt is too long")
        return f"SUMMARY-{len(parts)}"

    config = compaction_config("manual")
    with Budget.open(tmp_path / "s", config, summarizer=summarize) as session:
        assert session.compact(history(30))
        assert session.compact(history(60))
    assert len(parts) == 3 and len(parts[2]) < len(parts[1])
    assert all("SUMMARY-1" in str(part[0]) for part in parts[1:])
