"""The read-back evidence's index takes a request's fresh results at the next request, once they
are decided, and leaves out those no quote could be charged through; answers are looked at only
while a weighed result is kept whole (``budget.session._quotes``): the same log (counts, needed
ids, decisions) and copies as indexing every result as it comes and looking at every answer (the
index before these), on generated sessions and recorded traces, whether the session went on or
was reopened from its directory."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import Budget, BudgetConfig
from budget.session import _lineindex, _quotes
from tests._lanes import examples
from tests._shared import SharedTraces
from tests.budget.test_kept_evidence_hostile import FORMATS, _conversation, plans

Run = tuple[list[bytes], list[dict[str, Any]]]
"""The copies a session sent (as JSON) and its decision log."""


@contextmanager
def _eager() -> Iterator[None]:
    """Every result indexed as it is noted and every answer looked at, as before the deferral
    (no weighed result ever taken for one that can no longer be charged)."""
    with (
        mock.patch.object(_lineindex, "DEFER_MAX", -1),
        mock.patch.object(_quotes.Quotes, "_chargeable", return_value=True),
    ):
        yield


def _log(path: Path) -> list[dict[str, Any]]:
    (log,) = list(path.rglob("*.jsonl"))
    return [orjson.loads(line) for line in log.read_bytes().splitlines()]


def _run(path: Path, histories: list[list[Any]], restarts: set[int], config: Any) -> Run:
    """Prepare each of ``histories`` in turn, the session reopened before each of ``restarts``."""
    session = Budget.open(path, config)
    copies = []
    for i, history in enumerate(histories):
        if i in restarts:
            session.close()
            session = Budget.open(path, config)
        copies.append(orjson.dumps(session.prepare(history, now=10.0 * i).messages))
    session.close()
    return copies, _log(path)


def _three_ways(base: Path, histories: list[list[Any]], restarts: set[int], config: Any) -> None:
    """Indexed eagerly, deferred, and deferred with restarts: the same copies and logs."""
    with _eager():
        eager = _run(base / "eager", histories, set(), config)
    deferred = _run(base / "deferred", histories, set(), config)
    reopened = _run(base / "reopened", histories, restarts, config)
    assert deferred == eager
    assert reopened[0] == eager[0]
    # A reopened session logs what the one that went on logs (its requests' records compared
    # without the gap, which a restart does not know for a history it cannot anchor).
    assert _requests(reopened[1]) == _requests(eager[1])


def _requests(log: list[dict[str, Any]]) -> list[Any]:
    return [(r["p"][12:], r.get("q"), r.get("k")) for r in log if r.get("t") == "req"]


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(fmt=st.sampled_from(FORMATS), plan=plans, data=st.data())
def test_deferred_index_charges_what_the_eager_one_does(
    tmp_path_factory: pytest.TempPathFactory, fmt: str, plan: Any, data: st.DataObject
) -> None:
    """Answers quoting earlier results (kept, spilled, small, shared lines), in every format,
    under priced spills with a small preview (more results weighed, kept or spilled): the
    deferred index logs and sends what the eager one does, across restarts too."""
    steps = _conversation(fmt, plan)
    histories: list[list[Any]] = []
    for step in steps:
        histories.append([*(histories[-1] if histories else []), *step])
    restarts = data.draw(st.sets(st.integers(1, len(histories) - 1)))
    preview = data.draw(st.sampled_from([2_000, 400]))
    config = BudgetConfig(preview_chars=preview, fsync=False)
    _three_ways(tmp_path_factory.mktemp("q"), histories, restarts, config)


def test_a_quote_of_a_line_a_fresh_result_repeats_is_charged_to_neither(tmp_path: Path) -> None:
    """A kept result's line repeated by a result arriving with the answer that quotes it: the
    fresh result, not indexed yet, is the line's latest holder, so nothing is charged, as when
    every result was indexed at once; the next request indexes it, and a later quote of the
    line is not charged to the kept one either."""
    plan = [(200, 0, 0, False), (200, 1, 100, False), (5, 1, 100, False)]
    steps = _conversation("anthropic", plan)
    texts = [steps[0][-1], steps[1][-1]]
    # The second result repeats the first one's quoted line: it holds it, later than the first.
    line = texts[0]["content"][0]["content"].splitlines()[100]
    texts[1]["content"][0]["content"] += f"\n{line}"
    histories: list[list[Any]] = []
    for step in steps:
        histories.append([*(histories[-1] if histories else []), *step])
    _three_ways(tmp_path, histories, {2}, BudgetConfig(fsync=False))


def test_recorded_traces_log_alike_with_the_deferred_index(
    tmp_path: Path, shared_trace_set: SharedTraces
) -> None:
    """Every recorded trace, request by request: the deferred index logs and sends what the
    eager one does, and a session reopened halfway what the one that went on does (the
    traces' answers quote their results: 40 results found needed on today's set)."""
    traces, _ = shared_trace_set
    assert traces
    for i, trace in enumerate(traces):
        messages = list(trace.messages)
        histories = [messages[: r.n_messages] for r in trace.requests if r.n_messages]
        config = BudgetConfig(model=trace.model, fsync=False)
        _three_ways(tmp_path / str(i), histories, {len(histories) // 2}, config)
