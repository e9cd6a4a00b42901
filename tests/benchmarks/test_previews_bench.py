"""The bench's preview hit rate (benchmarks/previews.py): what it counts on a hand-made trace,
and what it measures on the shared traces."""

from __future__ import annotations

from typing import Any

from benchmarks.previews import MIN_CASES, preview_hits
from benchmarks.trace import Request, Trace
from tests._shared import SharedTraces

FAILURE = "E       AssertionError: the parser returned 7 where 8 was expected"
LOG = "\n".join(
    [*(f"tests/test_{i:03d}.py::test_ok PASSED  [ {i}%]" for i in range(150)),
     "=================================== FAILURES ===================================",
     "_________________________________ test_parse __________________________________",
     FAILURE,
     *(f"tests/test_{i:03d}.py::test_more PASSED  [ {i}%]" for i in range(150)),
     "========================= 1 failed, 300 passed in 2.01s ========================="]
)  # fmt: skip


def _trace(answer: str) -> Trace:
    """A two-request trace: a failing test run, then an answer quoting ``answer``."""
    call = {"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "pytest"}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": LOG}
    messages: tuple[dict[str, Any], ...] = (
        {"role": "user", "content": "Run the tests."},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [result]},
        {"role": "assistant", "content": [{"type": "text", "text": f"It fails:\n{answer}"}]},
    )
    return Trace(
        name="hand/one",
        path="one.json",
        format="anthropic",
        provider="anthropic",
        messages=messages,
        requests=(Request(2), Request(3)),
    )


def test_a_quoted_failure_is_a_hit_for_the_errors_shape_and_a_miss_for_head_and_tail() -> None:
    """The agent quotes the failure line from the middle of a long log: head + tail did not
    show it, the errors preview did; the case is filed under errors."""
    hits = preview_hits([_trace(FAILURE.strip())])
    errors = next(s for s in hits.shapes if s.shape == "errors")
    assert (errors.cases, errors.quotes, errors.head_tail, errors.shaped) == (1, 1, 0, 1)
    assert hits.results == 1 and hits.total().cases == 1


def test_a_result_nobody_quotes_is_no_case() -> None:
    """Without a later quote of its lines a long result counts among the results, not the cases."""
    hits = preview_hits([_trace("nothing quoted here")])
    assert hits.results == 1 and hits.total().cases == 0
    assert hits.as_json()["all"]["shaped_rate"] is None


def test_on_the_shared_traces_shapes_beat_head_and_tail_where_they_apply(
    shared_trace_set: SharedTraces,
) -> None:
    """On the public traces: hits never exceed quotes; the head_tail row compares a preview
    with itself (equal); every other shape with at least 10 cases shows more quoted lines than
    head + tail did on the same results (issue 32's bar)."""
    hits = preview_hits(shared_trace_set[0])
    assert hits.total().cases > 0
    for s in hits.shapes:
        assert 0 <= s.head_tail <= s.quotes and 0 <= s.shaped <= s.quotes
    same = next(s for s in hits.shapes if s.shape == "head_tail")
    assert same.shaped == same.head_tail
    compared = [s for s in hits.shapes if s.shape != "head_tail" and s.cases >= MIN_CASES]
    assert compared, "at least one shape has enough cases to compare"
    for s in compared:
        assert s.shaped > s.head_tail, s
    doc = hits.as_json()
    assert set(doc) == {"preview_chars", "results_over_preview", "min_cases", "shapes", "all"}
