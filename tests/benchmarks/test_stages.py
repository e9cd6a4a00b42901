"""``benchmarks.stages``: the time of chosen functions per +1 round request, timed in place."""

from __future__ import annotations

import importlib

from benchmarks.stages import STAGES, measure


def test_each_stage_is_timed_on_each_request_and_put_back() -> None:
    """Every default stage is found, the spill and the request copy are timed once a request
    (a short history runs no trim batch), and the wrapped functions are put back afterwards."""
    cap = importlib.import_module("budget.passes.cap")
    copies = importlib.import_module("budget.session._copies")
    spill, apply = cap.spill, copies.Copies.apply
    median_us, got = measure(STAGES, rounds=40, requests=6, chars=8_000)
    assert [s.stage for s in got] == list(STAGES)
    assert median_us > 0
    by_stage = {s.stage: s for s in got}
    assert by_stage["budget.passes.cap:spill"].calls_per_request == 1
    assert by_stage["budget.session._copies:Copies.apply"].calls_per_request == 1
    assert all(s.us_per_request >= 0 for s in got)
    assert cap.spill is spill
    assert copies.Copies.apply is apply
