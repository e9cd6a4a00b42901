"""The self-calibrating token estimate: the fit, its bounds, and the session that keeps it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from budget import Budget, Report
from budget._calibration import (
    FACTOR_BOUNDS,
    MIN_PAIRS,
    OVERHEAD_BOUNDS,
    WINDOW,
    Anchor,
    Calibration,
    learn,
    observe,
    restore,
)
from budget._tokens import estimate_tokens
from budget._usage import ProviderUsage

MODEL = "claude-sonnet-4-5"
HIDDEN = 1_000
"""Tokens the simulated provider counts on every request that no message shows."""


def _fed(pairs: list[tuple[int, int]]) -> Calibration:
    cal = Calibration(MODEL)
    for est, actual in pairs:
        cal = observe(cal, est, actual)
    return cal


def test_no_correction_before_enough_pairs() -> None:
    """Until MIN_PAIRS pairs the estimate is left as it is."""
    cal = _fed([(100, 1_000)] * (MIN_PAIRS - 1))
    assert not cal.active
    assert cal.growth(100) == 100


def test_hand_worked_factor_and_overhead() -> None:
    """Ratios 1.3, 1.2, 1.1 give a factor 1.2; residuals 10, 0, -30 an overhead of 0."""
    cal = _fed([(100, 130), (200, 240), (300, 330)])
    assert cal.factor == pytest.approx(1.2)
    assert cal.overhead == 0
    assert cal.growth(1_000) == 1_200


def test_hand_worked_bounds() -> None:
    """A tenfold miss is taken as factor 1.5 plus 850 tokens; a tenfold overshoot as 0.8 - 500."""
    under = _fed([(100, 1_000)] * 3)
    assert (under.factor, under.overhead) == (1.5, 850)
    assert under.growth(100) == 1_000
    over = _fed([(1_000, 100)] * 3)
    assert (over.factor, over.overhead) == (0.8, -500)
    assert over.growth(1_000) == 300


def test_one_outlier_does_not_swing_it() -> None:
    """A 50-fold outlier among 1.2-fold pairs leaves the factor at 1.2 and no overhead."""
    cal = _fed([(1_000, 1_200), (1_000, 50_000), (1_000, 1_200)])
    assert cal.factor == pytest.approx(1.2)
    assert cal.overhead == 0


def test_correct_keeps_the_full_estimate_as_floor() -> None:
    """The corrected anchored estimate is prompt + corrected growth, never below the floor."""
    cal = _fed([(100, 150)] * 3)
    usage = ProviderUsage(input_tokens=10_000)
    assert cal.correct(10_200, 0, usage) == 10_300
    assert cal.correct(10_200, 12_000, usage) == 12_000
    assert cal.correct(10_200, 0, None) == 10_200


@given(
    st.lists(st.tuples(st.integers(-(10**7), 10**7), st.integers(-(10**7), 10**7)), max_size=60),
    st.integers(0, 10**7),
)
def test_correction_stays_within_bounds(pairs: list[tuple[int, int]], estimate: int) -> None:
    """Whatever pairs are observed, the fit stays within its bounds and its window."""
    cal = _fed(pairs)
    assert len(cal.pairs) <= WINDOW
    assert FACTOR_BOUNDS[0] <= cal.factor <= FACTOR_BOUNDS[1]
    assert OVERHEAD_BOUNDS[0] <= cal.overhead <= OVERHEAD_BOUNDS[1]
    grown = cal.growth(estimate)
    if cal.active:
        low = FACTOR_BOUNDS[0] * estimate + OVERHEAD_BOUNDS[0]
        assert max(0, low) - 1 <= grown <= FACTOR_BOUNDS[1] * estimate + OVERHEAD_BOUNDS[1] + 1
    else:
        assert grown == estimate


def test_learn_takes_a_pair_only_for_the_anchored_request() -> None:
    """A pair needs a new usage and a longer history; a divergence resets what was learned."""
    cal = _fed([(100, 150)] * 3)
    first = ProviderUsage(input_tokens=1_000)
    anchor = Anchor(first, 200, 4)
    second = ProviderUsage(input_tokens=1_300)
    assert learn(cal, anchor, first, 6, diverged=False) == (cal, False)  # a retry's usage
    assert learn(cal, anchor, second, 4, diverged=False) == (cal, False)  # no new message
    assert learn(cal, None, second, 6, diverged=False) == (cal, False)
    after, changed = learn(cal, anchor, second, 6, diverged=False)
    assert changed and after.pairs[-1] == (200, 300)
    assert learn(cal, anchor, second, 6, diverged=True) == (Calibration(MODEL), True)


def test_restore_skips_malformed_and_resets_for_another_model() -> None:
    """The last well-formed record wins; another model's record gives a fresh calibration."""
    good = _fed([(100, 150)] * 3).to_record(3)
    bad = {"t": "cal", "n": 4, "model": MODEL, "pairs": [[1, True]]}
    cal, skipped = restore([good, {"t": "req", "n": 3}, bad], MODEL)
    assert skipped == 1 and cal.pairs == ((100, 150),) * 3 and cal.factor == 1.5
    assert restore([good], "gpt-4.1") == (Calibration("gpt-4.1"), 0)


# -- in a session ----------------------------------------------------------------------------


def _history(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Summarize the repository."}]
    for i in range(turns):
        messages.append({"role": "assistant", "content": f"Looking at part {i} of the code."})
        messages.append({"role": "user", "content": f"Part {i}: " + "def f(x): return x\n" * 20})
    return messages


def _drive(session: Budget, turns: int) -> tuple[list[dict[str, Any]], list[Report], int]:
    """Requests of a growing history; each answered with a prompt HIDDEN tokens over the raw
    estimate. Returns the history, the reports and the last simulated prompt."""
    messages = _history(turns)
    reports: list[Report] = []
    prompt: int | None = None
    for n in range(1, len(messages) + 1, 2):
        usage = None if prompt is None else {"input_tokens": prompt, "output_tokens": 0}
        report = session.prepare(messages[:n], usage=usage, now=float(n)).report
        reports.append(report)
        prompt = report.tokens_after_raw + HIDDEN
    assert prompt is not None
    return messages, reports, prompt


def _usage(prompt: int) -> dict[str, int]:
    return {"input_tokens": prompt, "output_tokens": 0}


def test_session_learns_a_hidden_overhead() -> None:
    """A session whose provider counts 1,000 hidden tokens a request learns to add them."""
    with Budget.in_memory({"model": MODEL}) as session:
        _, reports, _ = _drive(session, 8)
    first, last = reports[2], reports[-1]
    assert first.tokens_after == first.tokens_after_raw  # no pairs yet
    # The simulated provider's count of the last request is its raw estimate plus HIDDEN.
    actual = last.tokens_after_raw + HIDDEN
    assert abs(last.tokens_after - actual) < 0.2 * HIDDEN


def test_resume_keeps_the_correction(tmp_path: Path) -> None:
    """A session reopened from its directory applies the correction it learned before."""
    path = tmp_path / "session"
    with Budget.open(path, {"model": MODEL, "fsync": False}) as session:
        messages, _, prompt = _drive(session, 8)
    more = [*messages, {"role": "assistant", "content": "Done."}, {"role": "user", "content": "Ok"}]
    with Budget.open(path, {"model": MODEL, "fsync": False}) as resumed:
        report = resumed.prepare(more, usage=_usage(prompt), now=100.0).report
    assert report.request == 10  # the calibration records left the request count as it was
    assert report.tokens_after - report.tokens_after_raw > HIDDEN // 2
    with Budget.open(tmp_path / "fresh", {"model": MODEL, "fsync": False}) as fresh:
        cold = fresh.prepare(more, usage=_usage(prompt), now=100.0).report
    assert cold.tokens_after == cold.tokens_after_raw


def test_model_change_resets_the_correction(tmp_path: Path) -> None:
    """Reopened for another model, the session starts without a correction."""
    path = tmp_path / "session"
    with Budget.open(path, {"model": MODEL, "fsync": False}) as session:
        messages, _, prompt = _drive(session, 8)
    more = [*messages, {"role": "assistant", "content": "Done."}, {"role": "user", "content": "Ok"}]
    with Budget.open(path, {"model": "gpt-4.1", "fsync": False}) as other:
        report = other.prepare(more, usage=_usage(prompt), now=100.0).report
    assert report.tokens_after == report.tokens_after_raw


@pytest.mark.parametrize("edit", ["shorter", "not_a_prefix"])
def test_divergence_resets_the_correction(edit: str) -> None:
    """A history that is shorter or rewrites an earlier message drops what was learned."""
    with Budget.in_memory({"model": MODEL}) as session:
        messages, reports, prompt = _drive(session, 8)
        assert reports[-1].tokens_after > reports[-1].tokens_after_raw
        if edit == "shorter":
            history = messages[:-4]
        else:
            history = [{"role": "user", "content": "Another task."}, *messages[1:]]
            history += [{"role": "assistant", "content": "Done."}, {"role": "user", "content": "?"}]
        report = session.prepare(history, usage=_usage(prompt), now=100.0).report
        assert report.tokens_after == report.tokens_after_raw


def _pressure_run(hidden: int) -> Report:
    """Requests with an old 1,500-line result (under the cap), answered ``hidden`` tokens over the estimate; the
    last one's usage puts the raw estimate one token under the pressure threshold."""
    config: dict[str, Any] = {
        "model": MODEL,
        "window": 100_000,
        "pressure": 0.5,
        "protect_rounds": 1,
        "min_reclaim_tokens": 1_000,
        "cache_read_price": 0.0,  # the pays-for-itself trigger never fires
        "fsync": False,
    }
    old = "".join(f"line {i:05d} of an old listing\n" for i in range(1_500))
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Go."}]

    def turn(i: int) -> list[dict[str, Any]]:
        call = {"type": "tool_use", "id": f"c{i}", "name": "ls", "input": {}}
        text = old if i == 0 else f"result {i}"
        answer = {"type": "tool_result", "tool_use_id": f"c{i}", "content": text}
        return [
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [answer]},
        ]

    with Budget.in_memory(config) as session:
        prompt: int | None = None
        for i in range(8):
            messages += turn(i)
            usage = None if prompt is None else _usage(prompt)
            report = session.prepare(list(messages), usage=usage, now=float(i)).report
            assert not report.staleness_ran
            prompt = report.tokens_after_raw + hidden
        added = turn(8)
        grown = sum(estimate_tokens(m, model=MODEL) for m in added)
        last = 50_000 - 1 - grown
        return session.prepare([*messages, *added], usage=_usage(last), now=9.0).report


def test_pressure_trigger_uses_the_corrected_estimate() -> None:
    """A raw estimate just under the pressure threshold trims once the session has learned that
    its provider counts 1,000 tokens more each request; without that lesson it does not."""
    assert not _pressure_run(0).staleness_ran
    report = _pressure_run(HIDDEN)
    assert report.staleness_ran and report.staleness_reason == "pressure"


def test_resume_takes_a_calibration_a_crash_left_unclosed(tmp_path: Path) -> None:
    """A calibration record after the last request record (a request cut off) still counts."""
    path = tmp_path / "session"
    with Budget.open(path, {"model": MODEL, "fsync": False}) as session:
        messages, _, prompt = _drive(session, 8)
        tail = _fed([(100, 1_000)] * 3)
        session.store.append_log([tail.to_record(10)])
    more = [*messages, {"role": "assistant", "content": "Done."}, {"role": "user", "content": "Ok"}]
    with Budget.open(path, {"model": MODEL, "fsync": False}) as resumed:
        report = resumed.prepare(more, usage=_usage(prompt), now=100.0).report
    assert report.tokens_after == prompt + tail.growth(report.tokens_after_raw - prompt)


def test_the_correction_never_lowers_the_anchored_estimate() -> None:
    """Growth reported at 0.8x the estimate leaves an 11,000 estimate at 11,000; at 1.2x, 11,200."""
    usage = ProviderUsage(input_tokens=10_000)
    low = Calibration("m")
    high = Calibration("m")
    for _ in range(3):
        low = observe(low, 1_000, 800)
        high = observe(high, 1_000, 1_200)
    assert (low.factor, low.overhead) == (0.8, 0)
    assert low.correct(11_000, 5_000, usage) == 11_000
    assert (high.factor, high.overhead) == (1.2, 0)
    assert high.correct(11_000, 5_000, usage) == 11_200
