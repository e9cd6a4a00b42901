"""Two rules a mutation audit found no test noticing (issue 28, items 9 and 10).

9. The compaction tail grows until it holds at least ``compact_tail_tokens`` **and** at least
   ``compact_tail_messages`` (or the next message would pass ``compact_tail_max_tokens``): each
   minimum binds in turn here, and the cap over both. ``and`` turned to ``or`` passed every test.
10. ``prefix_stable`` compares the previous copy's bytes with this one's: a spilled result the
   caller edits changes the prefix with nothing trimmed. "Nothing trimmed this request" passed
   every test.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import Budget, BudgetConfig
from budget.compaction._compaction import tail_start
from budget.formats import ANTHROPIC
from tests._lanes import examples
from tests.strategies import SMALL, assistant, big, conversations, results

# -- 9. the tail's stop rule ----------------------------------------------------------------------


def _chat(n: int) -> list[dict[str, Any]]:
    """``n`` plain text messages, user and assistant in turn (no calls: nothing moves the tail)."""
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"} for i in range(n)
    ]


def _kept(n: int, *, min_tokens: int, min_messages: int, max_tokens: int, size: int = 100) -> int:
    """Messages in the tail of ``n`` messages of ``size`` tokens each under these limits."""
    msgs = _chat(n)
    tail = tail_start(
        msgs,
        ANTHROPIC,
        min_tokens=min_tokens,
        min_messages=min_messages,
        max_tokens=max_tokens,
        tokens=lambda m: size,
    )
    assert tail.tail_tokens == size * (n - tail.start)
    return n - tail.start


def test_the_token_minimum_binds_when_it_needs_more_messages() -> None:
    """900 tokens of 100-token messages need 9, though 3 messages would do: the tail keeps 9."""
    assert _kept(30, min_tokens=900, min_messages=3, max_tokens=10_000) == 9


def test_the_message_minimum_binds_when_it_needs_more_tokens() -> None:
    """Seven messages hold more than the 200 tokens asked: the tail keeps 7, not 2."""
    assert _kept(30, min_tokens=200, min_messages=7, max_tokens=10_000) == 7


def test_with_the_defaults_61_messages_of_100_tokens_are_all_kept() -> None:
    """The issue's case: under the default minima (10,000 tokens, 5 messages) all 61 messages of
    100 tokens stay in the tail (the ``or`` rule kept 5)."""
    cfg = BudgetConfig()
    kept = _kept(
        61,
        min_tokens=cfg.compact_tail_tokens,
        min_messages=cfg.compact_tail_messages,
        max_tokens=cfg.compact_tail_max_tokens,
    )
    assert kept == 61


@pytest.mark.parametrize(("min_tokens", "min_messages"), [(900, 2), (100, 8), (900, 8)])
def test_the_cap_stops_the_tail_before_either_minimum(min_tokens: int, min_messages: int) -> None:
    """A 450-token cap stops the tail at 4 messages of 100 tokens, whichever minimum asked more."""
    assert _kept(30, min_tokens=min_tokens, min_messages=min_messages, max_tokens=450) == 4


def test_the_last_message_is_kept_even_over_the_cap() -> None:
    """A tail always holds the last message, even one larger than the cap."""
    assert _kept(10, min_tokens=100, min_messages=1, max_tokens=50, size=400) == 1


@settings(max_examples=examples(100), deadline=None)
@given(
    n=st.integers(1, 80),
    size=st.integers(1, 300),
    min_tokens=st.integers(0, 5_000),
    min_messages=st.integers(1, 40),
    max_tokens=st.integers(1, 10_000),
)
def test_the_tail_is_the_shortest_meeting_both_minima_within_the_cap(
    n: int, size: int, min_tokens: int, min_messages: int, max_tokens: int
) -> None:
    """Over messages of one size, the tail holds the fewest messages meeting both minima, or as
    many as the cap allows (at least one), or all of them."""
    both = max(min_messages, -(-min_tokens // size), 1)
    cap = max(max_tokens // size, 1)
    want = min(both, cap, n)
    got = _kept(
        n, min_tokens=min_tokens, min_messages=min_messages, max_tokens=max_tokens, size=size
    )
    assert got == want


# -- 10. prefix_stable compares bytes ---------------------------------------------------------------


def _bytes(messages: list[Any]) -> list[str]:
    return [json.dumps(m, sort_keys=True) for m in messages]


def _is_prefix(before: list[Any], after: list[Any]) -> bool:
    """Whether ``before`` is, byte for byte, the start of ``after``."""
    return len(before) <= len(after) and _bytes(before) == _bytes(after[: len(before)])


@pytest.mark.parametrize("resumed", [False, True])
def test_a_spilled_result_the_caller_edits_breaks_the_prefix_without_a_trim(
    tmp_path: Path, resumed: bool
) -> None:
    """The caller edits a result that was spilled (a new list, its text redacted): the copy
    shows a new envelope, nothing is trimmed, and the report says the prefix is not stable,
    live and after a resume."""
    history = [
        {"role": "user", "content": "Investigate."},
        assistant(("t1", "bash")),
        results(("t1", big(200, "secret"))),
        assistant(("t2", "bash")),
        results(("t2", "ok")),
    ]
    session = Budget.open(tmp_path, SMALL)
    first = session.prepare(history, now=0)
    assert first.report.spilled == 1
    edited = copy.deepcopy(history)
    edited[2]["content"][0]["content"] = big(200, "REDACTED")
    edited += [assistant(("t3", "bash")), results(("t3", "done"))]
    if resumed:
        session.close()
        session = Budget.open(tmp_path, SMALL)
    with session:
        again = session.prepare(edited, now=1)
    assert not again.report.staleness_ran and again.report.trimmed_now == 0
    assert not _is_prefix(first.messages, again.messages)
    assert again.report.prefix_stable is False


def test_a_session_that_only_grows_reports_a_stable_prefix_live_and_resumed(tmp_path: Path) -> None:
    """A history that only grows, with results spilled, reports a stable prefix on every request
    after the first, also on the first request after a resume (its previous copy is known from
    the log, not from memory)."""
    history = [{"role": "user", "content": "Investigate."}]
    for r in range(6):
        history += [
            assistant((f"t{r}", "bash")),
            results((f"t{r}", big(150 if r % 2 else 3, str(r)))),
        ]
    session = Budget.open(tmp_path, SMALL)
    previous = session.prepare(history[:3], now=0).messages
    for end in range(5, len(history) + 1, 2):
        if end == 9:
            session.close()
            session = Budget.open(tmp_path, SMALL)
        got = session.prepare(history[:end], now=end)
        assert _is_prefix(previous, got.messages)
        assert got.report.prefix_stable is True, end
        previous = got.messages
    session.close()


@settings(max_examples=examples(40), deadline=None)
@given(
    msgs=conversations(),
    gaps=st.lists(st.sampled_from([1.0, 1.0, 400.0]), min_size=14, max_size=14),
    edit=st.integers(0, 30),
)
def test_prefix_stable_is_whether_the_previous_copy_is_a_byte_prefix(
    msgs: list[dict[str, Any]], gaps: list[float], edit: int
) -> None:
    """Request after request (pauses past the cache TTL running batches, and one result the
    caller edits in a new list), ``prefix_stable`` is exactly whether the previous request copy
    is, byte for byte, the start of this one."""
    session = Budget.in_memory(SMALL)
    cuts = [i + 1 for i, m in enumerate(msgs) if m["role"] == "user"]
    now, previous = 0.0, None
    for step, end in enumerate(cuts):
        history = msgs[:end]
        if step == len(cuts) - 1 and edit < end:
            history = copy.deepcopy(history)
            content = history[edit]["content"]
            if isinstance(content, list) and content and content[0].get("type") == "tool_result":
                content[0]["content"] = "edited by the caller"
        now += gaps[step % len(gaps)]
        got = session.prepare(history, now=now)
        if previous is not None:
            assert got.report.prefix_stable == _is_prefix(previous, got.messages)
        previous = got.messages
