"""Findings of a hostile run against compaction with real sessions: each a test."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from budget import Budget, summarizers
from tests.compaction import compaction_config, history


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
