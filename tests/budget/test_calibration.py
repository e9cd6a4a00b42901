"""The self-calibrating token estimate: the fit, its bounds, and the session that keeps it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from budget import Budget, Report
from budget.tokens._calibration import (
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
from budget.tokens._tokens import estimate_tokens
from budget.tokens._usage import ProviderUsage

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
    """Ratios 1.1-1.3 have quartiles 1.15 and 1.25, both over 1: factor 1.15; what is left, 15,
    10 and -15 tokens, has quartiles -2.5 and 12.5, straddling 0: no overhead."""
    cal = _fed([(100, 130), (200, 240), (300, 330)])
    assert cal.factor == pytest.approx(1.15)
    assert cal.overhead == 0
    assert cal.growth(1_000) == 1_150


def test_a_session_whose_errors_straddle_zero_is_left_as_it_is() -> None:
    """Growths estimated 5% under, 5% and 10% over show no consistent bias: no correction (the
    median fit took a factor of 1.05 from them, noise that made the typical error worse)."""
    cal = _fed([(1_000, 950), (1_000, 1_050), (1_000, 1_100)])
    assert cal.active
    assert (cal.factor, cal.overhead) == (1.0, 0)
    assert cal.growth(1_000) == 1_000
    assert cal.correct(51_000, 0, ProviderUsage(input_tokens=50_000)) == 51_000


def test_a_consistent_overestimate_is_taken_off_each_request() -> None:
    """A provider that counts 200 tokens fewer than estimated on every request is corrected down
    by 200 (the rule that the correction only adds kept that overestimate)."""
    cal = _fed([(300, 100), (1_000, 800), (2_000, 1_800), (500, 300)])
    assert (cal.factor, cal.overhead) == (1.0, -200)
    assert cal.correct(51_000, 0, ProviderUsage(input_tokens=50_000)) == 50_800


def test_hand_worked_bounds() -> None:
    """A tenfold miss is taken as factor 1.5 plus 850 tokens; a tenfold overshoot as factor 1
    (the factor never scales down) minus 500 tokens, the most taken off a request."""
    under = _fed([(100, 1_000)] * 3)
    assert (under.factor, under.overhead) == (1.5, 850)
    assert under.growth(100) == 1_000
    over = _fed([(1_000, 100)] * 3)
    assert (over.factor, over.overhead) == (1.0, -500)
    assert over.growth(1_000) == 500


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


@given(
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)), max_size=40),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.integers(0, 10**7),
)
def test_corrected_estimate_is_at_most_500_under_the_raw_and_never_under_the_floor(
    pairs: list[tuple[int, int]], base: int, growth: int, floor: int
) -> None:
    """Whatever the pairs, a corrected estimate is at least the floor and the raw estimate less
    500 tokens (the factor never scales a growth down)."""
    cal = _fed(pairs)
    raw = base + growth
    floor = min(floor, raw)  # the raw estimate is the larger of the full and the anchored one
    corrected = cal.correct(raw, floor, ProviderUsage(input_tokens=base))
    assert corrected >= floor
    assert corrected >= raw + OVERHEAD_BOUNDS[0]


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


def _drive(
    session: Budget, turns: int, hidden: int = HIDDEN, system: int = 0
) -> tuple[list[dict[str, Any]], list[Report], int]:
    """Requests of a growing history; each answered with a prompt ``hidden`` tokens over the raw
    estimate, the first one also ``system`` tokens of a system prompt and tools the messages do
    not show. Returns the history, the reports and the last simulated prompt."""
    messages = _history(turns)
    reports: list[Report] = []
    prompt: int | None = None
    for n in range(1, len(messages) + 1, 2):
        usage = None if prompt is None else {"input_tokens": prompt, "output_tokens": 0}
        report = session.prepare(messages[:n], usage=usage, now=float(n)).report
        reports.append(report)
        prompt = report.tokens_after_raw + hidden + (system if prompt is None else 0)
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


def test_session_learns_that_its_provider_counts_less() -> None:
    """A session whose provider counts 100 of the ~150 tokens estimated for each request's growth
    fewer (and a 5,000-token system prompt, so the anchored estimate, not the full one, counts)
    learns to take them off: the correction no longer only adds."""
    with Budget.in_memory({"model": MODEL}) as session:
        _, reports, _ = _drive(session, 8, hidden=-100, system=5_000)
    last = reports[-1]
    assert last.tokens_after_raw > 5_000
    assert abs(last.tokens_after - (last.tokens_after_raw - 100)) < 20


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
    last one's usage puts the raw estimate one token under the window."""
    config: dict[str, Any] = {
        "model": MODEL,
        "window": 50_000,
        "protect_rounds": 1,
        "cache_read_price": 0.0,  # nothing carried costs anything: no priced batch pays
        "cache_write_price": 1e-9,  # nor does the window's risk (what a fill costs)
        "fsync": False,
        "tools": {"ls": {"cap": 100_000}},  # the old result stays whole when fresh
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
            usage = None if prompt is None else _cached_usage(prompt)
            report = session.prepare(list(messages), usage=usage, now=float(i)).report
            assert not report.staleness_ran
            prompt = report.tokens_after_raw + hidden
        added = turn(8)
        grown = sum(estimate_tokens(m, model=MODEL) for m in added)
        last = 50_000 - 1 - grown
        return session.prepare([*messages, *added], usage=_cached_usage(last), now=9.0).report


def _cached_usage(prompt: int) -> dict[str, int]:
    """A usage of ``prompt`` tokens read from the cache but one written: an Anthropic session's."""
    return {
        "input_tokens": 0,
        "cache_creation_input_tokens": 1,
        "cache_read_input_tokens": prompt - 1,
    }


def test_the_window_limit_weighs_the_raw_estimate_a_resume_restores_alike() -> None:
    """A raw estimate one token under the window trims nothing, whatever the session learned
    (the correction is not restored alike after a resume, and a trim must be: the provider's
    overflow error, then a forced batch, covers what the raw estimate missed)."""
    assert not _pressure_run(0).staleness_ran
    learned = _pressure_run(HIDDEN)
    assert not learned.staleness_ran and learned.tokens_after > learned.window


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


def test_the_correction_lowers_by_at_most_500_tokens_and_not_below_the_floor() -> None:
    """Growth reported at 0.8x a 1,000 estimate takes 200 off (11,000 -> 10,800), not below the
    full estimate; at 0.1x, 500 at most; at 1.2x it scales the growth up (11,200)."""
    usage = ProviderUsage(input_tokens=10_000)
    low, lower, high = Calibration("m"), Calibration("m"), Calibration("m")
    for _ in range(3):
        low = observe(low, 1_000, 800)
        lower = observe(lower, 1_000, 100)
        high = observe(high, 1_000, 1_200)
    assert (low.factor, low.overhead) == (1.0, -200)
    assert low.correct(11_000, 5_000, usage) == 10_800
    assert low.correct(11_000, 10_900, usage) == 10_900
    assert lower.correct(11_000, 5_000, usage) == 10_500
    assert (high.factor, high.overhead) == (1.2, 0)
    assert high.correct(11_000, 5_000, usage) == 11_200
