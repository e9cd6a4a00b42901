"""``benchmarks.perf_base``: ``prepare`` +1 round timed in two checkouts' worker processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.perf import bench_against_base

_ROOT = Path(__file__).resolve().parents[2]


def test_a_checkout_against_itself_reports_both_sides() -> None:
    """This checkout timed against itself runs both workers to the end and reports a median
    for each side, their ratio and the requests that ran a batch."""
    f = bench_against_base(_ROOT, rounds=8, requests=4, result_chars=400)
    assert f.ours > 0 and f.peer is not None and f.peer > 0
    assert f.ratio == pytest.approx(f.peer / f.ours)
    assert f.extra["times_base"] == pytest.approx(f.ours / f.peer)
    assert f.extra["requests"] == 4
    assert 0 <= f.extra["batch_requests"] <= 4
    assert f.met == (f.ours / f.peer <= 1.2)


def test_a_base_that_is_no_checkout_is_refused(tmp_path: Path) -> None:
    """A base directory without the package fails with the worker's failure named, rather than
    waiting on a worker that never starts."""
    with pytest.raises(RuntimeError, match="did not start"):
        bench_against_base(tmp_path, rounds=8, requests=2, result_chars=400)
