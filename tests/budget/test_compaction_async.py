"""The merged compaction design: the async path keeps the sync path's failure rules (timeout,
retry on too long, breaker), and the anchored trigger after budgeting keeps the small-window
limits and the learned header."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import MutableMapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from budget import Budget, BudgetConfig, estimate_tokens, summarizers
from budget._errors import SummaryTimeout
from budget.compaction._compactor import limits
from tests.budget.test_compaction_faults import TooLongOver
from tests.budget.test_compaction_session import SESSION
from tests.compaction import Counting, history


def _events(logs: Sequence[MutableMapping[str, Any]], name: str) -> list[MutableMapping[str, Any]]:
    return [e for e in logs if e["event"] == f"toolbudget.session.{name}"]


class AsyncTooLongOver(TooLongOver):
    """:class:`TooLongOver` as a coroutine function."""

    async def __call__(self, messages: Sequence[Any]) -> str:  # type: ignore[override]
        await asyncio.sleep(0)
        return super().__call__(messages)


def test_aprepare_bounds_a_hung_async_summarizer_by_compact_timeout_s(tmp_path: Path) -> None:
    """A coroutine that never returns is cancelled after compact_timeout_s: acompact raises SummaryTimeout, aprepare sends the full history and counts the failure."""
    cfg = SESSION.model_copy(update={"compact_timeout_s": 0.2})
    cancelled: list[bool] = []

    async def hangs(messages: Sequence[Any]) -> str:
        try:
            await asyncio.sleep(3_600)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "never"

    msgs = history(20)
    with Budget.open(tmp_path / "s", cfg, summarizer=hangs) as b:
        started = time.monotonic()
        with pytest.raises(SummaryTimeout):
            asyncio.run(b.acompact(msgs))
        req = asyncio.run(b.aprepare(msgs))
        elapsed = time.monotonic() - started
        assert len(req.messages) == len(msgs) and not req.report.compacted
        assert b._compactor.failures == 2
    assert cancelled == [True, True]
    assert elapsed < 30


def test_aprepare_abandons_a_hung_sync_summarizer_after_compact_timeout_s(tmp_path: Path) -> None:
    """A sync summarizer that blocks past compact_timeout_s inside acompact is abandoned: SummaryTimeout, not its late summary."""
    cfg = SESSION.model_copy(update={"compact_timeout_s": 0.2})
    release = threading.Event()

    def blocks(messages: Sequence[Any]) -> str:
        release.wait(5)  # bounded, so a regression fails the test instead of hanging it
        text = summarizers.extractive()(messages)
        assert isinstance(text, str)
        return text

    msgs = history(20)
    try:
        with Budget.open(tmp_path / "s", cfg, summarizer=blocks) as b:
            started = time.monotonic()
            with pytest.raises(SummaryTimeout):
                asyncio.run(b.acompact(msgs))
            assert time.monotonic() - started < 4
            assert b._compactor.checkpoint is None and b._compactor.failures == 1
    finally:
        release.set()


def test_aprepare_retries_a_summary_refused_as_too_long_once_per_retry(tmp_path: Path) -> None:
    """An async summarizer raising SummaryTooLong is asked again without the oldest rounds, with the sync path's calls and one retry event each."""
    msgs = history(12)
    sync, coro = TooLongOver(limit=10), AsyncTooLongOver(limit=10)
    with capture_logs() as sync_logs, Budget.open(tmp_path / "a", SESSION, summarizer=sync) as b:
        assert b.compact(msgs) is True
        want = b.prepare(msgs).messages
    with capture_logs() as logs, Budget.open(tmp_path / "b", SESSION, summarizer=coro) as b:
        assert asyncio.run(b.acompact(msgs)) is True
        got = asyncio.run(b.aprepare(msgs)).messages
    assert [len(c) for c in coro.calls] == [len(c) for c in sync.calls]
    assert len(coro.calls) >= 2
    retries = _events(logs, "compaction_retry")
    assert [e["retry"] for e in retries] == list(range(1, len(coro.calls)))
    assert len(retries) == len(_events(sync_logs, "compaction_retry"))
    assert got == want


def test_an_async_summary_that_stays_too_long_fails_and_counts_once(tmp_path: Path) -> None:
    """Refused at every size through aprepare: four calls (three retries), one failure counted, the full history sent."""
    coro = AsyncTooLongOver(limit=0)
    msgs = history(20)
    with capture_logs() as logs, Budget.open(tmp_path / "s", SESSION, summarizer=coro) as b:
        req = asyncio.run(b.aprepare(msgs))
        assert b._compactor.failures == 1
    assert len(coro.calls) == 4
    assert len(_events(logs, "compaction_retry")) == 3
    assert len(_events(logs, "compaction_failed")) == 1
    assert len(req.messages) == len(msgs)


def test_aprepare_under_a_32k_window_compacts_at_the_scaled_threshold(tmp_path: Path) -> None:
    """Claude Code's 20k + 13k exceed a 32k window: the anchored trigger uses the threshold scaled to half the window, not a negative one."""
    cfg = BudgetConfig(fsync=False, window=32_000, compaction="auto")
    threshold = limits(cfg, 32_000, 0, manual=False).threshold
    summarize = Counting()
    msgs = history(24)
    size = sum(estimate_tokens(m) for m in msgs)
    assert size < threshold
    with Budget.open(tmp_path / "s", cfg, summarizer=summarize) as b:
        for n in range(3, len(msgs), 6):
            assert not asyncio.run(b.aprepare(msgs[:n])).report.compacted
        assert summarize.calls == []
        # A usage revealing a header that takes the request past the scaled threshold.
        usage = {"input_tokens": threshold + 1_000, "output_tokens": 10}
        req = asyncio.run(b.aprepare(msgs, usage=usage))
    assert summarize.calls and req.report.compacted


def test_after_a_compaction_the_learned_header_still_counts(tmp_path: Path) -> None:
    """The reports after a compaction are unanchored (no header in them): the header learned before keeps every copy plus it inside the window."""
    summarize = Counting()
    msgs = history(30)
    header = 2_000  # of a 3,000 threshold in a 4,000 window
    with Budget.open(tmp_path / "s", SESSION, summarizer=summarize) as b:
        b.prepare(msgs[:3])
        usage = {"input_tokens": sum(estimate_tokens(m) for m in msgs[:3]) + header}
        b.prepare(msgs[:5], usage={**usage, "output_tokens": 5})
        assert b._compactor.header >= header - 100
        sizes, compactions = [], 0
        for n in range(7, len(msgs), 2):  # no usage from here on: unanchored reports only
            req = b.prepare(msgs[:n])
            sizes.append(sum(estimate_tokens(m) for m in req.messages) + header)
            compactions += req.report.compacted
    assert compactions >= 2
    assert SESSION.window is not None and max(sizes) <= SESSION.window, sizes
