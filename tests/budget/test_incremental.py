"""The incremental request path gives what a from-scratch computation gives.

A session reuses its per-message caches, checks an appended list in O(1), memoizes token
estimates, queues resumed decisions and counts lines once per envelope; none of that may change
a byte of any request copy.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import Budget
from budget._envelope import count_lines, make_preview
from budget._ledger import Decision, Ledger
from budget.tokens._memo import SAMPLE_ABOVE_CHARS, TextTokens, sampled_text_tokens
from budget.tokens._tokens import estimate_text_tokens
from tests.strategies import conversation

Message = dict[str, Any]


def _rounds(n: int, chars: int, first: int = 0) -> list[list[str]]:
    return [[f"{r:04d} output line of the build log\n" * (chars // 36)] for r in range(first, n)]


def test_an_appended_list_gives_the_bytes_of_new_lists() -> None:
    """One list grown request by request (O(1) check) gives what new lists (full check) give."""
    history = conversation(_rounds(40, 3_000))
    grown: list[Message] = history[:3]
    session = Budget.in_memory()
    for end in range(3, len(history) + 1, 2):
        grown.extend(history[len(grown) : end])
        last = session.prepare(grown, now=float(end))
    other = Budget.in_memory()
    for end in range(3, len(history) + 1, 2):
        again = other.prepare(history[:end], now=float(end))
    assert again.messages == last.messages


def test_a_new_list_with_an_earlier_message_replaced_is_rebuilt() -> None:
    """An edited history passed as a new list is compared in full and rebuilt, not reused."""
    history = conversation(_rounds(12, 60_000))  # every result over the cap: spilled
    session = Budget.in_memory()
    first = session.prepare(history, now=0.0)
    edited = list(history)
    edited[2] = {"role": "user", "content": "I replaced that tool output."}
    edited[1] = {"role": "assistant", "content": "No tool this time."}
    out = session.prepare(edited, now=1.0)
    assert out.messages[1] == edited[1]
    assert out.messages[2] == edited[2]
    assert out.messages[3:] == first.messages[3:]


def test_in_place_edits_of_the_last_message_are_seen() -> None:
    """The same list with its last message replaced in place is re-scanned at its end."""
    history = conversation(_rounds(6, 100))
    session = Budget.in_memory()
    session.prepare(history, now=0.0)
    history[-1] = {"role": "user", "content": [dict(history[-1]["content"][0], content="new")]}
    out = session.prepare(history, now=1.0)
    assert out.messages[-1]["content"][0]["content"] == "new"


def test_a_resumed_session_gives_the_copy_of_one_that_went_on(tmp_path: Path) -> None:
    """After a restart the next request copy is the one the running session gives, trims included."""
    history = conversation(_rounds(60, 4_000))
    path = tmp_path / "s"
    with Budget.open(path, {"fsync": False, "window": 40_000}) as session:
        session.prepare(history[:-2], now=0.0)
        shutil.copytree(path, tmp_path / "copy")
        # One more round: the same history again would be a retry, which trims nothing anew.
        went_on = session.prepare(history, now=1.0)
    assert went_on.report.staleness_ran  # the case that matters: a batch on this request
    with Budget.open(tmp_path / "copy", {"fsync": False, "window": 40_000}) as resumed:
        again = resumed.prepare(history, now=1.0)
    assert again.report.staleness_ran
    assert again.messages == went_on.messages


def test_a_resumed_session_weighs_spilled_results_as_shown(tmp_path: Path) -> None:
    """After a restart, spilled results count as their envelopes: no pressure batch appears."""
    history = conversation(_rounds(40, 60_000))  # originals far over the window, envelopes not
    config = {"fsync": False, "window": 100_000}
    path = tmp_path / "s"
    with Budget.open(path, config) as session:
        session.prepare(history, now=0.0)
        shutil.copytree(path, tmp_path / "copy")
        went_on = session.prepare(history, now=1.0)
    with Budget.open(tmp_path / "copy", config) as resumed:
        again = resumed.prepare(history, now=1.0)
    assert not went_on.report.staleness_ran
    assert again.report.staleness_ran == went_on.report.staleness_ran
    assert again.messages == went_on.messages


def test_resumed_decisions_fold_in_log_order_and_trimmed_stays_final() -> None:
    """Queued records give what recording them in order gives; a bad one is reported and skipped."""
    told: list[tuple[str, str]] = []
    ledger = Ledger(on_invalid=lambda cid, why: told.append((cid, why)))
    kept = Decision("a", "kept", "fits", 10, tool="bash")
    trimmed = Decision("a", "trimmed", "pays", 10, text="stub", ref="0" * 32, tool="bash")
    skipped = ledger.restore(
        [
            kept.to_record(),
            trimmed.to_record(),
            kept.to_record(),  # after a trim: ignored, trimmed is final
            {"t": "d", "id": "b", "kind": "kept", "why": "fits", "chars": 3},
            {"t": "d", "id": "b", "kind": "exploded", "chars": 3},
            {"t": "d", "kind": "kept"},
        ]
    )
    assert skipped == 1
    assert ledger.get("a") == trimmed
    assert ledger.get("b") == Decision("b", "kept", "fits", 3)
    assert [cid for cid, _ in told] == ["b"]
    assert ledger.get("c") is None
    assert len(ledger) == 2


def test_text_estimates_are_memoized_for_two_requests_only() -> None:
    """The memo answers as the estimator does and forgets texts unused for a request."""
    memo = TextTokens()
    texts = ["short", "x" * 5_000, "中文" * 3_000]
    assert [memo(t) for t in texts] == [estimate_text_tokens(t) for t in texts]
    memo.next_request()
    assert memo(texts[1]) == estimate_text_tokens(texts[1])  # carried into this request
    memo.next_request()
    memo.next_request()
    assert memo._cur == {}
    assert memo._prev == {}


def test_very_large_texts_are_estimated_from_samples() -> None:
    """Up to the sample size the estimate is exact; beyond, close on a homogeneous text."""
    small = "def f(x):\n    return x + 1\n" * 2_000
    assert sampled_text_tokens(small) == estimate_text_tokens(small)
    large = "".join(
        f"{i:06d} INFO worker-{i % 7} processed batch in 0.{i % 97:02d}s\n" for i in range(40_000)
    )
    assert len(large) > SAMPLE_ABOVE_CHARS
    exact, sampled = estimate_text_tokens(large), sampled_text_tokens(large)
    assert abs(sampled - exact) <= 0.05 * exact
    assert TextTokens()(large) == sampled


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    st.text(st.sampled_from(list("ab \n\nx中😀")), max_size=400),
    st.integers(0, 200),
    st.sampled_from([0.0, 0.3, 0.5, 1.0]),
)
def test_a_preview_counts_the_lines_it_leaves_out(text: str, chars: int, share: float) -> None:
    """Lines omitted and the tail's first line, derived from one count, match a direct count."""
    p = make_preview(text, chars, tail_share=share, newlines=text.count("\n"))
    assert p == make_preview(text, chars, tail_share=share)
    if len(text) <= chars:
        return
    middle_end = len(text) - len(p.tail)
    partial = 1 if p.tail and not p.head.endswith("\n") and middle_end > len(p.head) else 0
    assert p.omitted_lines == text.count("\n", len(p.head), middle_end) + partial
    if p.tail:
        assert p.tail_start_line == count_lines(text) - count_lines(p.tail) + 1
