"""Read-backs, quoted visibility and the hindsight bound, on hand-made traces worked by hand,
and on the public traces (``none`` never pays a read-back and shows every quoted line)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from benchmarks import strategies
from benchmarks.bound import bound_billed, share_of_saving
from benchmarks.cache import CacheRules
from benchmarks.readbacks import answer_lines, quotable_lines, shown_lines
from benchmarks.replay import aggregate, replay_trace
from benchmarks.trace import Request, Trace
from tests._shared import SharedTraces
from tests.benchmarks.test_strategies import chars4

L1 = "ERROR: something failed at line 42 of main.py"  # 45 characters
L2 = "Traceback tail: ValueError bad input 7"  # 38 characters
A = "a" * 1500 + "\n" + L1 + "\n" + "b" * 1500 + "\n" + L2  # 3,086 characters


def _trace() -> Trace:
    """Result ``a`` (text A) is quoted twice: L1 by the answer to request 2, L2 by that to 3."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "task"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "a", "name": "bash", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": A}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "ok"},
                {"type": "tool_use", "id": "b", "name": "bash", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "b", "content": "short"}],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": f"The failure:\n  {L1}  \nlet me fix it"},
                {"type": "tool_use", "id": "c", "name": "bash", "input": {"cmd": "make"}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "c", "content": "done"}],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "d", "name": "Edit", "input": {"old": f"x\n{L2}"}},
            ],
        },
    ]
    requests = tuple(Request(n, timestamp=float(k)) for k, n in enumerate((1, 3, 5, 7)))
    return Trace("hand/rb", "rb", "anthropic", "anthropic", tuple(messages), requests)


def test_quotable_and_answer_lines() -> None:
    """Lines of 30+ stripped characters count; answers give text and tool-input lines only."""
    assert quotable_lines("  " + "x" * 30 + "  \n" + "y" * 29) == {"x" * 30}
    answer = _trace().messages[5:7]
    assert answer_lines(answer) == {L1}  # "The failure:" is short; the result is not the answer
    assert answer_lines(_trace().messages[7:]) == {L2}


def test_none_shows_every_quoted_line_and_pays_nothing(tmp_path: Path) -> None:
    """Under ``none`` both quotes are visible and no read-back is charged."""
    got = replay_trace(_trace(), strategies.get("none"), tmp_path, count=chars4)
    assert (got.quotes, got.quotes_visible, got.readbacks, got.readback_billed) == (2, 2, 0, 0.0)


def test_readback_reruns_the_tool_where_the_strategy_keeps_nothing(tmp_path: Path) -> None:
    """Observation masking (window 1) hid A: L1 costs a re-run of all of A; L2, quoted a request
    later, is then shown by that re-run, which the agent's context carries."""
    masking = strategies.get("observation-masking", window=1)
    got = replay_trace(_trace(), masking, tmp_path, count=chars4)
    # Re-run: A is 3,086 chars = 771 tokens. Extra request at request 2: its copy read
    # (0.1 x size) and A written (1.25 x 771 = 963.75); carried into request 3 (0.1 x 771).
    expected = 0.1 * got.sizes[2] + 963.75 + 77.1
    assert (got.quotes, got.quotes_visible, got.readbacks) == (2, 1, 1)
    assert got.readback_billed == pytest.approx(expected)
    base = replay_trace(_trace(), masking, tmp_path / "again", count=chars4, max_requests=2)
    assert base.readbacks == 0  # the answer to request 2 is not replayed
    row = aggregate("observation-masking", [got], None)
    assert (row.readbacks, row.quoted_visibility) == (1, 0.5)


def test_readback_reads_a_2000_char_page_where_the_strategy_keeps_the_output(
    tmp_path: Path,
) -> None:
    """claude-code persisted A: each quote costs a 2,000-char page, L2 lies outside L1's page."""
    cc = strategies.get("claude-code", cap_chars=1000, preview_chars=50)
    got = replay_trace(_trace(), cc, tmp_path, count=chars4)
    # L1 at 1,501: page starts at min(1501 + 22 - 1000, 3086 - 2000) = 523, A[523:2523] (2,000
    # chars = 500 tokens), which ends before L2 (at 3,048). L2's page is A[1086:3086]: 500 tokens.
    # Request 2: 0.1 s2 + 1.25 x 500; request 3: 0.1 x 500 carried, then 0.1 s3 + 1.25 x 500.
    expected = 0.1 * got.sizes[2] + 625 + 50 + 0.1 * got.sizes[3] + 625
    assert (got.quotes, got.quotes_visible, got.readbacks) == (2, 0, 2)
    assert got.readback_billed == pytest.approx(expected)
    none = replay_trace(_trace(), strategies.get("none"), tmp_path / "none", count=chars4)
    assert got.billed_tokens - got.readback_billed < none.billed_tokens


def test_each_charged_readback_is_told_to_the_toolbudget_session(tmp_path: Path) -> None:
    """toolbudget with a 1,000-char cap spills A; each read-back the replay charges is noted in
    the session (``Budget.note_readback``), as the agent's read of the spilled file would be,
    and the session's last request record counts them."""
    tb = strategies.get("toolbudget", result_cap=1_000, preview_chars=50)
    got = replay_trace(_trace(), tb, tmp_path, count=chars4)
    assert got.readbacks == 2
    (log,) = list(tmp_path.rglob("*.jsonl"))
    records = [json.loads(line) for line in log.read_text().splitlines()]
    counts = [rec["p"][6] for rec in records if rec.get("t") == "req"]
    # Charged after requests 2 and 3 (the answers quoting L1 and L2): the last record is request
    # 3's, made before its own read-back was noted.
    assert counts == [0, 0, 0, 1]


# --- the hindsight bound -----------------------------------------------------------------------


def _bound_trace(provider: str = "anthropic", late: bool = False) -> Trace:
    """A 100-token prompt, then three rounds each returning a 200-token result."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "p" * 400}]
    for r in range(3):
        use = {"type": "tool_use", "id": f"c{r}", "name": "bash", "input": {}}
        messages.append({"role": "assistant", "content": [use]})
        result = {"type": "tool_result", "tool_use_id": f"c{r}", "content": "x" * 800}
        messages.append({"role": "user", "content": [result]})
    times = [0.0, 10.0, 20.0, 400.0 if late else 30.0]
    requests = tuple(Request(n, timestamp=t) for n, t in zip((1, 3, 5, 7), times, strict=True))
    return Trace("hand/bound", "b", "anthropic", provider, tuple(messages), requests)  # type: ignore[arg-type]


def big(obj: Any) -> int:
    """Twenty times :func:`chars4`: the hand-worked requests clear the 1,024-token minimum the
    cache rules set (a request under it is billed at the base price), and every figure below
    is twenty times the hand-worked one."""
    return 20 * chars4(obj)


def test_bound_by_hand() -> None:
    """Results older than the last round vanish for free: 125 + 260 + 260 + 260 = 905 (x 20)."""
    # r0: 100 written (125). r1: 100 read + 200 written (10 + 250). r2: c0 vanishes (-200):
    # size 300, 100 read, 200 written (260). r3: c1 vanishes: size 300, again 260.
    assert bound_billed(_bound_trace(), big, protect_rounds=1) == pytest.approx(20 * 905.0)
    # The default keeps 5 rounds: nothing vanishes; r2 reads 300, r3 reads 500.
    assert bound_billed(_bound_trace(), big) == pytest.approx(20 * (125 + 260 + 280 + 300))


def test_bound_bills_a_request_under_the_minimum_at_most_the_base_price() -> None:
    """Under the 1,024-token minimum a request costs the lesser of the base price and its cached
    price: the hand-worked trace at four characters a token (100 to 700 tokens a request) is
    billed 100 (not 125 written) + 260 + 280 + 300."""
    assert bound_billed(_bound_trace(), chars4) == pytest.approx(100 + 260 + 280 + 300)


@pytest.mark.parametrize("chars", [60_000, 3_000])
def test_bound_cuts_a_long_kept_result_to_the_preview(chars: int) -> None:
    """A result longer than the 2,000-char preview in a protected round counts as its first
    2,000 chars (500 tokens), under result_cap (3,000) or over it (60,000): a policy may spill
    any fresh result longer than its preview, so the bound must let it."""
    trace = _bound_trace()
    block = {"type": "tool_result", "tool_use_id": "c2", "content": "y" * chars}
    messages = (*trace.messages[:-1], {"role": "user", "content": [block]})
    trace = replace(trace, messages=messages)
    # As the default (nothing vanishes: 125 + 260 + 280), then r3 reads the 500 tokens of r2
    # and writes its new result, 500 tokens instead of 200: 50 + 625.
    assert bound_billed(trace, big) == pytest.approx(20 * (125 + 260 + 280 + 50 + 625))
    # With a preview as long as the result it is kept whole: all its tokens written.
    assert bound_billed(trace, big, preview_chars=100_000) == pytest.approx(
        20 * (125 + 260 + 280 + 50 + 1.25 * chars / 4)
    )


def test_bound_follows_the_cache_rules() -> None:
    """A 380 s pause expires the cache (r3 all written: 375); OpenAI writes at the base price."""
    late = bound_billed(_bound_trace(late=True), big, protect_rounds=1)
    assert late == pytest.approx(20 * (125 + 260 + 260 + 375))
    plain = CacheRules()
    assert bound_billed(
        _bound_trace("openai"), big, rules=plain, protect_rounds=1
    ) == pytest.approx(20 * 730.0)
    # By default the trace's own rules: an unknown OpenAI model reads at 0.5x (100 + 3 * 250).
    assert bound_billed(_bound_trace("openai"), big, protect_rounds=1) == pytest.approx(20 * 850.0)
    never = CacheRules(ttl=None)
    assert bound_billed(
        _bound_trace(late=True), big, rules=never, protect_rounds=1
    ) == pytest.approx(20 * 905.0)


def test_share_of_saving() -> None:
    """(1 - 0.9) / (1 - 0.8) = 0.5; no achievable saving gives None."""
    assert share_of_saving(0.9, 0.8) == pytest.approx(0.5)
    assert share_of_saving(0.9, 1.0) is None


# --- the public traces -------------------------------------------------------------------------


@pytest.mark.traces
def test_public_traces_none_shows_every_quote_and_masking_pays(
    shared_trace_set: SharedTraces, tmp_path: Path
) -> None:
    """On a real trace ``none`` sees every quoted line; masking hides some and pays read-backs."""
    traces, _ = shared_trace_set
    trace = next(t for t in traces if t.name == "claude-code/37f83ec9")
    none = replay_trace(trace, strategies.get("none"), tmp_path / "none")
    assert none.quotes > 0
    assert none.quotes_visible == none.quotes and none.readbacks == 0
    masking = replay_trace(trace, strategies.get("observation-masking"), tmp_path / "om")
    assert masking.quotes == none.quotes
    assert masking.quotes_visible < masking.quotes
    assert 0 < masking.readbacks <= masking.quotes - masking.quotes_visible
    assert masking.readback_billed > 0
    assert bound_billed(replace(trace), _count_of(trace)) < none.billed_tokens


def _count_of(trace: Trace) -> Any:
    from benchmarks._count import counter_for

    return counter_for(trace.model)


def test_bound_counts_the_omitted_header_and_no_cache_where_none_was_recorded() -> None:
    """A 40-token header rides every request (written once at 1.25, then read at 0.1: 50 + 3 *
    4 beside the messages' 20 x 905); caching off writes all (1,250)."""
    header = replace(_bound_trace(), header_tokens=40)
    assert bound_billed(header, big, protect_rounds=1) == pytest.approx(20 * 905 + 50 + 3 * 4)
    off = CacheRules(enabled=False)
    assert bound_billed(_bound_trace(), chars4, rules=off, protect_rounds=1) == pytest.approx(
        1.25 * (100 + 300 + 300 + 300)
    )


def test_a_unified_diffs_rows_show_their_lines_without_the_marker() -> None:
    """In a text with a hunk header, an added or removed row shows its line (as a numbered
    view's row does without its number); elsewhere a leading '-' stays part of the line."""
    line = "def handler(request, *, timeout=30.0):"
    diff = f"@@ -3,1 +3,1 @@\n-{line.replace('30', '10')}\n+{line}"
    assert line in shown_lines(diff) and line.replace("30", "10") in shown_lines(diff)
    assert line not in quotable_lines(diff)
    assert shown_lines(f"notes:\n-{line}") == {f"-{line}"}
    assert shown_lines(f"--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n+{line}") >= {line}
