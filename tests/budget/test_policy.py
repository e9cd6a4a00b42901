"""The cost model (budget.policy): every kind of decision priced, the figures worked out by hand."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from budget import Budget, BudgetConfig, ToolPolicy
from budget.policy import (
    RISK,
    Item,
    Observed,
    Outlook,
    Prices,
    allowance,
    best_cut,
    breach_chance,
    expected_remaining,
    fill_chance,
    floor_at,
    outlook,
    prices_for,
    readback_chance,
    readback_cost,
    readbacks_per_need,
    spill_verdict,
    stale_trim_after,
)
from tests.strategies import conversation

FAR = 10**12
"""A window so far off that reaching it is no risk worth a token."""
AUTO = Prices(write=1.0, read=0.1, ttl_s=300.0, regime="cached", explicit=False)
ANTHROPIC = Prices(write=1.25, read=0.1, ttl_s=300.0, regime="cached", explicit=True)
NONE = Prices(write=1.0, read=1.0, ttl_s=300.0, regime="uncached", explicit=False)


def look(requests: float, *, tokens: int = 50_000, window: int = FAR) -> Outlook:
    """An outlook of ``requests`` later requests at a prompt of ``tokens``."""
    return Outlook(made=20, tokens=tokens, window=window, growth=1.0, requests=requests)


# --- what the session expects of its future ------------------------------------------------------


def test_expected_requests_follow_lindy_up_to_the_payback_horizon_and_the_window() -> None:
    """9 requests made (m = 10): 10 ln(13.5/10.5) = 2.51 within 3 of the window; within 10 of
    it 10 ln(20.5/10.5) = 6.69, over m/2 = 5 (which a session outlives two times in three);
    none once the window is reached."""
    assert expected_remaining(9, 3) == pytest.approx(10 * math.log(13.5 / 10.5))
    assert expected_remaining(9, 3) == pytest.approx(2.513, abs=1e-3)
    assert expected_remaining(9, 10) == 5.0
    assert expected_remaining(9, 1_000) == 5.0
    assert expected_remaining(9, 0) == 0.0
    assert fill_chance(9, 30) == pytest.approx(10 / 40)
    assert fill_chance(9, 0) == 1.0


def test_the_outlook_measures_growth_from_the_first_request() -> None:
    """First request 10k, now 30k after 4: 5k a request; (100k - 30k) / 5k = 14 to the window,
    so m / 2 = 2.5 later requests; at 95k one request to go."""
    seen = Observed(requests=4, first_tokens=10_000)
    out = outlook(seen, tokens=30_000, window=100_000)
    assert out.growth == 5_000
    assert out.requests == 2.5  # 5 ln(19.5 / 5.5) = 6.3 > m / 2
    near = outlook(Observed(requests=4, first_tokens=75_000), tokens=95_000, window=100_000)
    # 5k a request, 1 request to go: 5 ln(6.5 / 5.5) = 0.84
    assert near.requests == pytest.approx(5 * math.log(6.5 / 5.5))
    # Before a second request the prior growth is the prompt itself: 30k, 70k / 30k to go.
    first = outlook(Observed(), tokens=30_000, window=100_000)
    assert (first.growth, first.requests) == (30_000, 0.5)


def test_prices_follow_the_cache_regime_the_usage_shows() -> None:
    """No usage: the configured (Anthropic) prices; reads and writes: explicit caching; reads
    without writes: automatic caching writes at the base price; 3 misses: no cache at all."""
    cfg: dict[str, Any] = {"write": 1.25, "read": 0.1, "ttl_s": 300.0}
    unknown = prices_for(Observed(), **cfg)
    assert (unknown.regime, unknown.new, unknown.carry) == ("unknown", 1.25, 0.1)
    explicit = prices_for(Observed(chances=5, reads=5, writes=5), **cfg)
    assert (explicit.regime, explicit.write, explicit.explicit) == ("cached", 1.25, True)
    automatic = prices_for(Observed(chances=5, reads=5), **cfg)
    assert (automatic.write, automatic.explicit) == (1.0, False)
    none = prices_for(Observed(chances=3), **cfg)
    assert (none.regime, none.new, none.carry) == ("uncached", 1.0, 1.0)
    assert prices_for(Observed(chances=2), **cfg).regime == "unknown"
    # A read after a 40-minute pause: the cache lives at least that long (1-hour writes).
    assert prices_for(Observed(reads=1, warm_pause_s=2_400.0), **cfg).ttl_s == 2_400.0


def test_usage_counts_chances_reads_writes_and_warm_pauses() -> None:
    """The first request's usage is no chance for a read; a read after a 600 s pause is a TTL
    of at least 600 s; a pause over the TTL is no chance either."""
    seen = Observed(gap_s=1.0).after_usage(
        prompt=10_000, cache_read=0, cache_write=10_000, answered=1, ttl_s=300.0
    )
    assert (seen.chances, seen.reads, seen.writes) == (0, 0, 1)
    warm = Observed(gap_s=600.0).after_usage(
        prompt=10_000, cache_read=9_000, cache_write=0, answered=2, ttl_s=300.0
    )
    assert (warm.chances, warm.reads, warm.warm_pause_s) == (0, 1, 600.0)
    small = Observed(gap_s=1.0).after_usage(
        prompt=1_000, cache_read=0, cache_write=0, answered=2, ttl_s=300.0
    )
    assert small.chances == 0  # under every provider's minimum cacheable prefix


@given(
    st.builds(
        Observed,
        requests=st.integers(0, 10**6),
        chances=st.integers(0, 10**6),
        reads=st.integers(0, 10**6),
        writes=st.integers(0, 10**6),
        warm_pause_s=st.floats(0, 1e7),
        hidden=st.integers(0, 10**6),
        readbacks=st.integers(0, 10**6),
        first_tokens=st.integers(0, 10**9),
        gap_s=st.none() | st.floats(0, 1e7),
        bank=st.floats(-1e12, 1e12),
        billed=st.floats(0, 1e12),
        pending_bill=st.floats(0, 1e12),
    )
)
def test_what_the_session_learned_survives_its_log_record(seen: Observed) -> None:
    """The request record's ``p`` gives back every count (a resumed session decides alike)."""
    assert Observed.from_record(seen.to_record()) == seen


def test_the_updates_change_only_the_fields_they_name() -> None:
    """``now``, ``banked`` and ``after_request`` (one constructor call on the record's values)
    give ``replace``'s value: every other count is kept."""
    seen = Observed(
        requests=1, chances=2, reads=3, writes=4, warm_pause_s=5.0, hidden=6, readbacks=7,
        first_tokens=8, gap_s=9.0, bank=10.0, billed=11.0, pending_bill=12.0, exposed=13,
        needed=14, episodes=15, recalled=16,
    )  # fmt: skip
    assert seen.now(requests=20, readbacks=21, recalled=22) == dataclasses.replace(
        seen, requests=20, readbacks=21, recalled=22
    )
    assert seen.banked(bank=-1.0, billed=2.0, readbacks=3, pending=4.0, recalled=5) == (
        dataclasses.replace(seen, bank=-1.0, billed=2.0, readbacks=3, pending_bill=4.0, recalled=5)
    )
    assert seen.after_request(gap_s=None, hidden=2) == dataclasses.replace(
        seen, gap_s=None, hidden=seen.hidden + 2
    )


def test_a_damaged_record_is_no_observation() -> None:
    """A record of the wrong shape, a negative count or a bool is refused (None), not trusted."""
    good = Observed(requests=3).to_record()
    assert Observed.from_record(good[:-3]) is None  # 13 fields: no layout ever written
    assert Observed.from_record([*good[:1], -1, *good[2:]]) is None
    assert Observed.from_record([True, *good[1:]]) is None
    assert Observed.from_record("p") is None
    assert Observed.from_record([*good[:9], float("nan"), *good[10:]]) is None  # a bank of NaN
    assert Observed.from_record([*good[:10], -1.0, *good[11:]]) is None  # a negative bill


def test_a_record_from_before_the_bank_starts_with_an_empty_one() -> None:
    """A 9-field ``p`` (logs written before the bank) is read with nothing banked or billed."""
    old = Observed(requests=3, hidden=2).to_record()[:9]
    seen = Observed.from_record(old)
    assert seen is not None and (seen.hidden, seen.bank, seen.billed) == (2, 0.0, 0.0)


def test_the_readback_chance_is_the_prior_then_the_sessions_own_rate() -> None:
    """Fresh 1/2, stale 1/10 (errors 2/3, 2/10); 20 hidden and none read back: 1/22; 10 of 20
    read back: the stale chance 11/30."""
    fresh, stale = Observed(), Observed()
    assert readback_chance(fresh, fresh=True, is_error=False) == pytest.approx(0.5)
    assert readback_chance(fresh, fresh=True, is_error=True) == pytest.approx(2 / 3)
    assert readback_chance(stale, fresh=False, is_error=False) == pytest.approx(0.1)
    assert readback_chance(stale, fresh=False, is_error=True) == pytest.approx(0.2)
    quiet = Observed(hidden=20)
    assert readback_chance(quiet, fresh=True, is_error=False) == pytest.approx(1 / 22)
    read = Observed(hidden=20, readbacks=10, recalled=10)
    assert readback_chance(read, fresh=False, is_error=False) == pytest.approx(11 / 30)


def test_a_result_read_back_again_weighs_once_in_the_chance_and_again_per_need() -> None:
    """Ten read-backs of five results: the chance counts the five results, the read-backs per
    need count the ten, so the repeats are never counted in both (the risk is their product)."""
    repeated = Observed(hidden=20, readbacks=10, recalled=5)
    once_each = Observed(hidden=20, readbacks=5, recalled=5)
    chance = readback_chance(repeated, fresh=False, is_error=False)
    assert (
        chance == readback_chance(once_each, fresh=False, is_error=False) == pytest.approx(6 / 30)
    )
    assert readbacks_per_need(repeated) == pytest.approx((1 + 10) / (1 + 5))
    assert readbacks_per_need(once_each) == pytest.approx(1.0)
    # The product is what a spill risks: the repeats raise it once, through the per-need count.
    assert chance * readbacks_per_need(repeated) == pytest.approx(6 / 30 * 11 / 6)


# --- a fresh result: spill or keep -------------------------------------------------------------


def test_a_fresh_10k_token_result_is_spilled_and_a_3k_one_kept() -> None:
    """Cached at 1.25 / 0.1, 10 later requests, a 50k prompt, 5k-token pages, 650-token envelope,
    nothing hidden yet (read back one time in two):

    10,000 tokens: saving 9,350 x (1.25 + 0.1 x 10) = 21,037.5; a read-back 0.1 x 50,000 +
    1.25 x 5,000 + 0.1 x 5,000 x 10 = 16,250 at 0.5 = 8,125: net 12,912.5, spill.
    3,000 tokens: saving 2,350 x 2.25 = 5,287.5; read-back 5,000 + 3,750 + 3,000 = 11,750 at
    0.5 = 5,875: net -587.5, keep.
    """
    big = spill_verdict(
        ANTHROPIC, look(10), Observed(), tokens=10_000, envelope_tokens=650, is_error=False,
        page_tokens=5_000,
    )  # fmt: skip
    assert (big.choice, big.saving, big.readback_risk) == ("spill", 21_037.5, 8_125.0)
    assert big.net == pytest.approx(12_912.5, abs=0.01) and big.window_gain < 0.01
    small = spill_verdict(
        ANTHROPIC, look(10), Observed(), tokens=3_000, envelope_tokens=650, is_error=False,
        page_tokens=5_000,
    )  # fmt: skip
    assert (small.choice, small.saving, small.readback_risk) == ("keep", 5_287.5, 5_875.0)
    assert small.net == pytest.approx(-587.5, abs=0.01)


def test_a_kept_result_would_be_trimmed_once_stale_as_soon_as_that_pays_back() -> None:
    """5 protected rounds, 5,000 tokens added a request, 3,000 hidden: at 1.25 / 0.1 trimming it
    alone re-writes 1.15 x 25,000 = 28,750 for 300 a request, 95.83 requests after the 5; at
    OpenAI's 1.0 / 0.5 (GPT-4o) 0.5 x 25,000 = 12,500 for 1,500: 8.33 after; without a cache
    nothing is re-written: 5. Nothing hidden, or nothing carried: never."""
    grows = Outlook(made=20, tokens=50_000, window=FAR, growth=5_000.0, requests=10.0)
    gpt4o = Prices(write=1.0, read=0.5, ttl_s=300.0, regime="cached", explicit=False)
    assert stale_trim_after(ANTHROPIC, grows, 3_000, 5) == pytest.approx(5 + 28_750 / 300)
    assert stale_trim_after(gpt4o, grows, 3_000, 5) == pytest.approx(5 + 12_500 / 1_500)
    assert stale_trim_after(NONE, grows, 3_000, 5) == 5.0
    free = Prices(write=1.25, read=0.0, ttl_s=300.0, regime="cached", explicit=True)
    assert stale_trim_after(ANTHROPIC, grows, 0, 5) == stale_trim_after(free, grows, 9, 5)
    assert stale_trim_after(free, grows, 9, 5) == math.inf


def test_a_spills_saving_is_carried_only_until_the_stale_trim() -> None:
    """The 10,000-token result above, kept, would be trimmed after 3 requests: its spill saves
    9,350 x (1.25 + 0.1 x 3) = 14,492.5 (not 21,037.5 over all 10); the read-back risk is the
    same 8,125: net 6,367.5, still a spill. After 1 request: 9,350 x 1.35 = 12,622.5."""
    kw: dict[str, Any] = {
        "tokens": 10_000, "envelope_tokens": 650, "is_error": False, "page_tokens": 5_000,
    }  # fmt: skip
    soon = spill_verdict(ANTHROPIC, look(10), Observed(), trim_after=3.0, **kw)
    assert soon.saving == pytest.approx(14_492.5) and soon.readback_risk == 8_125.0
    assert soon.choice == "spill" and soon.net == pytest.approx(6_367.5, abs=0.01)
    sooner = spill_verdict(ANTHROPIC, look(10), Observed(), trim_after=1.0, **kw)
    assert sooner.saving == pytest.approx(12_622.5)
    assert spill_verdict(ANTHROPIC, look(10), Observed(), **kw).saving == 21_037.5


def test_a_spill_is_kept_until_the_bank_or_the_sessions_age_covers_its_read_back() -> None:
    """8,000 tokens, as above: saving 7,350 x 2.25 = 16,537.5 against 8,125 risked, net
    8,412.5. At worst it is read back at once and the session ends: the prompt without it,
    0.1 x 42,650, plus 1.25 x 5,000, less the write it saved now, 1.25 x 7,350: 1,327.5.

    With nothing banked that shortfall takes 1,327.5 / 735 = 1.806 requests of carried saving
    to pay back: 2 requests, as they come whole. At the first request (m = 1) the session ends
    that soon 2 / 3 of the time, read back one time in two: 33% > 5%, kept. After 20 requests
    (m = 21): 0.5 x 2 / 23 = 4.3% <= 5%, spilled. An allowance of 1,327.5 covers it outright."""

    def spilled(tokens: int, room: float, made: int = 20) -> Any:
        at = Outlook(made=made, tokens=50_000, window=FAR, growth=1.0, requests=10)
        return spill_verdict(
            ANTHROPIC, at, Observed(), tokens=tokens, envelope_tokens=650, is_error=False,
            page_tokens=5_000, allowance=room,
        )  # fmt: skip

    first = spilled(8_000, 0.0, made=0)
    assert (first.choice, first.covered) == ("keep", False)
    assert first.worst_case == pytest.approx(1_327.5)
    assert first.net == pytest.approx(8_412.5, abs=0.01)
    assert breach_chance(0, 1_327.5, 735.0, 0.5) == pytest.approx(0.5 * 2 / 3)
    assert breach_chance(20, 1_327.5, 735.0, 0.5) == pytest.approx(0.5 * 2 / 23)
    assert (spilled(8_000, 0.0).choice, spilled(8_000, 1_327.5, made=0).choice) == ("spill",) * 2
    # The 10k-token result saves more now than its read-back costs: covered with nothing banked.
    assert spilled(10_000, 0.0, made=0).choice == "spill"
    assert spilled(10_000, 0.0).worst_case == pytest.approx(-1_372.5)


def test_the_window_risk_makes_a_spill_pay_near_the_window() -> None:
    """A 6,000-token result at a 190k prompt: saving 5,350 x 2.25 = 12,037.5 against a read-back
    of 0.5 x (19,000 + 6,250 + 5,000) = 15,125: kept far from the window. In a 200k window
    growing 1k a request (m = 21) reaching it goes from 21/31 to 21/36.35 likely: at 270k a
    fill that gains 26,920, and the spill pays (net 23,832)."""

    def verdict(window: int, growth: float) -> Any:
        at = Outlook(made=20, tokens=190_000, window=window, growth=growth, requests=10)
        return spill_verdict(
            ANTHROPIC, at, Observed(), tokens=6_000, envelope_tokens=650, is_error=False,
            page_tokens=5_000,
        )  # fmt: skip

    far = verdict(FAR, 1.0)
    assert (far.choice, far.readback_risk) == ("keep", 15_125)
    near = verdict(200_000, 1_000.0)
    assert near.window_gain == pytest.approx(270_000 * (21 / 31 - 21 / 36.35))
    assert near.window_gain == pytest.approx(26_920, abs=1)
    assert near.choice == "spill" and near.net == pytest.approx(23_832, abs=1)


# --- a batch: where it starts, or wait ---------------------------------------------------------

ITEMS = [
    Item(reclaim=2_000, before=10_000, page=1_000, is_error=False),
    Item(reclaim=6_000, before=30_000, page=1_000, is_error=False),
    Item(reclaim=1_000, before=36_000, page=1_000, is_error=False),
]
"""Three eligible results in a request whose first 40,000 tokens are cached."""


def test_the_cut_search_picks_the_hand_computed_best_cut() -> None:
    """Automatic caching (write 1.0, read 0.1), 20 later requests, read-back 0.1 x (5,000 + 1,000
    + 0.1 x 1,000 x 20) = 800 a result:

    * cut at C: reclaim 1,000, re-write 3,000 - 400 = 2,600, saving 2,000: net -1,400;
    * cut at B: reclaim 7,000, re-write (10,000 - 7,000) - 1,000 = 2,000, saving 14,000, risk
      1,600: net 10,400;
    * cut at A: reclaim 9,000, re-write 21,000 - 3,000 = 18,000, saving 18,000, risk 2,400:
      net -2,400. The best is B: B and C trimmed, A kept.
    """
    v = best_cut(AUTO, look(20), Observed(), ITEMS, cached_end=40_000, cold=False)
    assert (v.choice, v.cut, v.reclaim_tokens) == ("trim", 1, 7_000)
    assert (v.saving, v.rewrite_cost, v.readback_risk) == (14_000, 2_000, 1_600)
    assert v.net == pytest.approx(10_400, abs=0.01)
    assert readback_cost(AUTO, look(20), 1_000) == 8_000


def test_a_batch_is_refused_for_want_of_bank_then_taken_once_the_bank_covers_it() -> None:
    """The cut at B (net 10,400) re-writes 2,000 at worst (the session ends after this
    request) and saves 7,000 x 0.1 = 700 a request. Nothing banked, billed 200,000: an
    allowance of 0.5% x 200,000 = 1,000, short by 1,000, paid back in 1.43 requests: 2, as
    requests come whole, which a session of m = 21 fails to last 2 / 23 = 8.7% of the time (C
    and A: worse): over the 5% risk, wait, refused for want of bank. Banked 300: 300 + 0.5% x
    200,300 = 1,301.5, short by 698.5, 0.998 requests, so 1: 1 / 22 = 4.5%, taken."""
    poor = Observed(bank=0.0, billed=200_000.0)
    assert allowance(poor) == pytest.approx(1_000)
    rich = Observed(bank=300.0, billed=200_000.0)
    assert allowance(rich) == pytest.approx(1_301.5)
    v = best_cut(AUTO, look(20), poor, ITEMS, cached_end=40_000, cold=False,
                 allowance=allowance(poor))  # fmt: skip
    assert (v.choice, v.cut, v.covered, v.worst_case) == ("wait", 1, False, 2_000)
    assert v.net == pytest.approx(10_400, abs=0.01)  # it would pay, on average
    assert breach_chance(20, 1_000, 700, 1.0) == pytest.approx(2 / 23)
    t = best_cut(AUTO, look(20), rich, ITEMS, cached_end=40_000, cold=False,
                 allowance=allowance(rich))  # fmt: skip
    assert (t.choice, t.cut, t.covered, t.worst_case) == ("trim", 1, True, 2_000)
    taken = breach_chance(20, 698.5, 700, 1.0)
    assert taken == pytest.approx(1 / 22) and taken < RISK


def test_an_uncovered_best_cut_gives_way_to_the_best_covered_one() -> None:
    """Over 200 requests the cut at A is best: 180,000 - 18,000 - 3 x 0.1 x (5,000 + 1,000 +
    0.1 x 1,000 x 200) = 154,200, against B's 140,000 - 2,000 - 5,200 = 132,800. A bank of
    2,000 covers B's re-write, not A's 18,000: B runs."""
    wide = best_cut(AUTO, look(200), Observed(), ITEMS, cached_end=40_000, cold=False)
    assert wide.cut == 0 and wide.net == pytest.approx(154_200, abs=0.01)
    v = best_cut(AUTO, look(200), Observed(), ITEMS, cached_end=40_000, cold=False,
                 allowance=2_000.0)  # fmt: skip
    assert (v.choice, v.cut, v.rewrite_cost) == ("trim", 1, 2_000)
    assert v.net == pytest.approx(132_800, abs=0.01)
    # A cold cache re-writes nothing it would not write anyway: covered with nothing banked.
    cold = best_cut(AUTO, look(20), Observed(), ITEMS, cached_end=40_000, cold=True,
                    allowance=0.0)  # fmt: skip
    assert (cold.choice, cold.cut, cold.covered) == ("trim", 0, True)


def test_the_cut_search_waits_when_no_cut_pays() -> None:
    """Over 3 requests B saves 2,100 against 2,000 re-written and 2 x 630 risked: wait."""
    v = best_cut(AUTO, look(3), Observed(), ITEMS, cached_end=40_000, cold=False)
    assert (v.choice, v.cut) == ("wait", 1)
    assert v.net == pytest.approx(2_100 - 2_000 - 1_260, abs=0.01)
    assert best_cut(AUTO, look(3), Observed(), [], cached_end=0, cold=False).choice == "wait"


def test_a_cold_cache_trims_everything_eligible() -> None:
    """Expired anyway, keeping re-writes too: A's re-write is 21,000 - 30,000 = -9,000, net
    18,000 + 9,000 - 2,400 = 24,600, over B's 19,400 and C's 2,200."""
    v = best_cut(AUTO, look(20), Observed(), ITEMS, cached_end=40_000, cold=True)
    assert (v.cut, v.rewrite_cost) == (0, -9_000)
    assert v.net == pytest.approx(24_600, abs=0.01)


def test_explicit_breakpoints_price_a_cut_past_the_lookback_as_a_whole_rewrite() -> None:
    """Anthropic, lookup reaching back to token 35,000, a 5,000-token header: B's cut re-writes
    all 45,000 (1.25 x 38,000 - 4,500 = 43,000) and C's only 4,000 (3,750 - 400 = 3,350, net
    2,000 - 3,350 - 825 = -2,175): wait. An expired entry re-writes all too."""
    v = best_cut(
        ANTHROPIC, look(20), Observed(), ITEMS, cached_end=40_000, cold=False, reach=35_000,
        header=5_000,
    )  # fmt: skip
    assert (v.choice, v.cut) == ("wait", 2)
    assert v.net == pytest.approx(-2_175, abs=0.01)
    whole = best_cut(
        ANTHROPIC, look(20), Observed(), ITEMS[1:2], cached_end=40_000, cold=False, reach=35_000,
        header=5_000,
    )  # fmt: skip
    assert whole.rewrite_cost == pytest.approx(1.25 * 39_000 - 0.1 * 45_000)
    expired = Item(reclaim=1_000, before=36_000, page=1_000, is_error=False, alive=False)
    dead = best_cut(ANTHROPIC, look(20), Observed(), [expired], cached_end=40_000, cold=False)
    assert dead.rewrite_cost == pytest.approx(1.25 * 39_000 - 0.1 * 40_000)


def test_without_a_cache_every_aged_result_is_trimmed() -> None:
    """No cache: a trim saves now too (A: 21,000 - 30,000 = -9,000) and 9,000 on each of 20
    requests, against 3 x 0.1 x (50,000 + 1,000 + 20,000): net 167,700, the cut at A."""
    v = best_cut(NONE, look(20), Observed(), ITEMS, cached_end=40_000, cold=False)
    assert (v.choice, v.cut, v.rewrite_cost) == ("trim", 0, -9_000)
    assert v.net == pytest.approx(180_000 + 9_000 - 21_300, abs=0.01)


# --- the session: the model at work, explained --------------------------------------------------


def _rounds(n: int, chars: int) -> list[dict[str, Any]]:
    """``n`` rounds of a build log of ``chars`` characters, each from a call of its own (the same
    call again would be a re-run, shown as its diff from the last)."""
    history = conversation(
        [[f"{r:03d} " + "log line of a build output\n" * (chars // 28)] for r in range(n)]
    )
    for message in history[1::2]:
        for block in message["content"]:
            if block["type"] == "tool_use":
                block["input"] = {"target": block["id"]}
    return history


def _drive(config: dict[str, Any], usage: dict[str, int], path: Path) -> list[Any]:
    """Prepare a 14-round session request by request (5 s apart), each with a new usage of the
    shape of ``usage`` (one more output token each): every report."""
    history = _rounds(14, 6_000)
    reports = []
    with Budget.open(path, {"fsync": False, **config}) as session:
        for end in range(3, len(history) + 1, 2):
            answered = {**usage, "output_tokens": end}
            reports.append(session.prepare(history[:end], usage=answered, now=5.0 * end).report)
    return reports


def test_a_session_without_cache_reads_trims_results_as_they_age(tmp_path: Path) -> None:
    """Usage that never shows a cache read (a deployment without prompt caching): after three
    chances the regime is uncached and each result is trimmed as it leaves the protected rounds
    (reason no_cache); the same session reading its cache mostly waits, batching them."""
    none = {"input_tokens": 20_000}
    reports = _drive({}, none, tmp_path / "none")
    ran = [r for r in reports if r.staleness_ran]
    assert ran and {r.staleness_reason for r in ran} == {"no_cache"}
    assert all(r.staleness_cost is not None and r.staleness_cost.regime == "uncached" for r in ran)
    assert sum(r.trimmed_now for r in ran) >= 5 and len(ran) >= 4  # one at a time, as they age
    cached = {"input_tokens": 10, "cache_read_input_tokens": 20_000}
    warm = _drive({}, cached, tmp_path / "cached")
    batches = [r for r in warm if r.staleness_ran]
    assert len(batches) < len(ran) and all(r.staleness_reason == "pays" for r in batches)
    assert sum(r.staleness_cost is not None and r.staleness_cost.choice == "wait" for r in warm) > 3


def _drive_small(usage: dict[str, int], path: Path, **config: Any) -> list[Any]:
    """``_drive`` on 14 rounds of 1,900-character results: under the 2,000-character floor."""
    history = _rounds(14, 1_900)
    reports = []
    with Budget.open(path, {"fsync": False, **config}) as session:
        for end in range(3, len(history) + 1, 2):
            answered = {**usage, "output_tokens": end}
            reports.append(session.prepare(history[:end], usage=answered, now=5.0 * end).report)
    return reports


def test_without_a_cache_results_under_the_floor_are_trimmed_as_they_age(tmp_path: Path) -> None:
    """The stale floor spares a cache re-write for little: with no cache there is none, so once
    the usage shows no cache the 1,900-character results are trimmed as they age (no_cache);
    the same session reading its cache never trims one (all under the floor)."""
    uncached = _drive_small({"input_tokens": 5_000}, tmp_path / "none")
    ran = [r for r in uncached if r.staleness_ran]
    assert ran and {r.staleness_reason for r in ran} == {"no_cache"}
    assert sum(r.trimmed_now for r in ran) >= 3
    cached = _drive_small({"input_tokens": 10, "cache_read_input_tokens": 5_000}, tmp_path / "c")
    assert not any(r.staleness_ran for r in cached)
    assert all(r.staleness_cost is None or r.staleness_cost.reclaim_tokens == 0 for r in cached)


def test_a_trim_reclaims_the_result_less_its_stub_as_made(tmp_path: Path) -> None:
    """Counted one token a character, a 1,813-character result trimmed without a cache reclaims
    1,813 - 300 = 1,513 (its stub is made to ``stub_chars``), not 1,813 - 112 (a stub priced at
    300 + 150 characters over 4), and the batch saves that on each later request (carry 1.0)."""
    history = _rounds(14, 1_900)
    none = {"input_tokens": 5_000}
    with Budget.open(tmp_path / "s", {"fsync": False}, text_tokens=len) as session:
        for end in range(3, len(history) + 1, 2):
            report = session.prepare(history[:end], usage={**none, "output_tokens": end}).report
            if report.staleness_ran:
                break
    trimmed = [d for d in report.decisions if d.kind == "trimmed"]
    cost = report.staleness_cost
    assert len(trimmed) == 1 and cost is not None and cost.regime == "uncached"
    assert (trimmed[0].chars_before, trimmed[0].chars_after) == (1_813, 300)
    assert cost.reclaim_tokens == 1_513
    assert cost.saving == pytest.approx(1_513 * 1.0 * cost.expected_requests)


def test_the_floor_falls_as_the_read_price_rises(tmp_path: Path) -> None:
    """The floor is a carried cost: 2,000 characters at 0.1x reads are 400 at GPT-4o's 0.5x, so
    the 1,900-character results a 0.1x cache never weighs are a batch's candidates at 0.5x; it
    never falls under the stub (300) unless the setting does, nor rises at a cheaper read."""
    assert floor_at(2_000, 0.5) == pytest.approx(400)
    assert floor_at(2_000, 1.0, 300) == 300
    assert floor_at(0, 0.5, 300) == 0
    assert floor_at(2_000, 0.1) == floor_at(2_000, 0.01) == floor_at(2_000, 0.0) == 2_000
    read = {"input_tokens": 10, "cache_read_input_tokens": 5_000}
    dear = _drive_small(read, tmp_path / "dear", cache_read_price=0.5)
    weighed = [r.staleness_cost for r in dear if r.staleness_cost is not None]
    assert any(c.reclaim_tokens > 0 for c in weighed)


def test_an_overflow_trims_results_under_the_floor(tmp_path: Path) -> None:
    """After the provider refused the prompt, the forced batch trims every aged result with
    tokens to reclaim, those under the floor too (the 1,900-character rounds)."""
    history = _rounds(14, 1_900)
    usage = {"input_tokens": 10, "cache_read_input_tokens": 5_000}
    with Budget.open(tmp_path / "s", {"fsync": False}) as session:
        for end in range(3, len(history) + 1, 2):
            answered = {**usage, "output_tokens": end}
            before = session.prepare(history[:end], usage=answered, now=5.0 * end).report
        session.on_overflow(None)
        report = session.prepare(history, usage=answered, now=999).report
    assert before.trimmed == 0
    assert report.staleness_ran and report.trimmed_now >= 8


@pytest.mark.parametrize("read", [0.0, 0.001])
def test_an_overflow_trims_over_the_setting_whatever_the_read_price(
    read: float, tmp_path: Path
) -> None:
    """A batch the price does not choose (the provider refused the prompt) trims every result
    over ``stale_floor`` outside the protected rounds, even where reads cost (next to) nothing."""
    history = _rounds(14, 6_000)
    usage = {"input_tokens": 10, "cache_read_input_tokens": 5_000}
    with Budget.open(tmp_path / "s", {"fsync": False, "cache_read_price": read}) as session:
        for end in range(3, len(history) + 1, 2):
            answered = {**usage, "output_tokens": end}
            session.prepare(history[:end], usage=answered, now=5.0 * end)
        session.on_overflow(None)
        # The refused request again, with the usage already seen: still the overflow's retry.
        report = session.prepare(history, usage=answered, now=999).report
    assert report.staleness_ran and report.trimmed_now >= 8


def test_every_priced_decision_carries_its_two_costs(tmp_path: Path) -> None:
    """A priced spill and a priced keep say what they compared; a ceiling spill and an explicit
    cap carry no price (a hard limit decided them)."""
    history = conversation([["x\n" * 25_000, "y\n" * 2_000, "z\n" * 40_000]])
    config = BudgetConfig(fsync=False, result_cap=60_000, tools={"cat": ToolPolicy(cap=10)})
    with Budget.open(tmp_path / "s", config) as session:
        report = session.prepare(history, now=0.0).report
    by_id = {d.call_id: d for d in report.decisions}
    spilled, kept = by_id["call_0_0"], by_id["call_0_1"]
    assert spilled.reason == "pays" and spilled.cost is not None
    assert spilled.cost.choice == "spill" and spilled.cost.net > 0
    assert spilled.cost.saving - spilled.cost.readback_risk + spilled.cost.window_gain == (
        pytest.approx(spilled.cost.net)
    )
    assert kept.kind == "kept" and kept.cost is not None and kept.cost.choice == "keep"
    assert (by_id["call_0_2"].reason, by_id["call_0_2"].cost) == ("cap", None)  # the ceiling
    capped = conversation([["x\n" * 40_000]], tool="cat")
    with Budget.open(tmp_path / "c", config) as session:
        decision = session.prepare(capped, now=0.0).report.decisions[0]
    assert (decision.reason, decision.cost) == ("cap", None)


def test_price_spills_off_makes_result_cap_a_plain_cap_again(tmp_path: Path) -> None:
    """The same 50,000-character result the cost policy spills is kept whole (reason fits,
    no price) when ``price_spills`` is off; over the cap it is spilled either way."""
    history = conversation([["x\n" * 25_000, "z\n" * 40_000]])
    for price, first in ((True, ("spilled", "pays")), (False, ("kept", "fits"))):
        config = BudgetConfig(fsync=False, result_cap=60_000, price_spills=price)
        with Budget.open(tmp_path / f"s-{price}", config) as session:
            decisions = session.prepare(history, now=0.0).report.decisions
        got = {d.call_id: (d.kind, d.reason) for d in decisions}
        assert got == {"call_0_0": first, "call_0_1": ("spilled", "cap")}
        plain = next(d for d in decisions if d.call_id == "call_0_0")
        assert (plain.cost is None) is (not price)


def _net_of_cut(prices: Prices, at: Outlook, items: list[Item], j: int, cached_end: int) -> float:
    """One cut priced from scratch, term by term (what the cut search folds into one pass)."""
    trimmed = items[j:]
    reclaim = sum(it.reclaim for it in trimmed)
    in_cache = sum(it.reclaim for it in trimmed if it.before < cached_end)
    span = max(cached_end - items[j].before, 0)
    rewrite = prices.new * (span - in_cache) - prices.read * span
    risk = sum(
        readback_chance(Observed(), fresh=False, is_error=it.is_error)
        * readback_cost(prices, at, it.page)
        for it in trimmed
    )
    return reclaim * prices.carry * at.requests + at.window_gain(prices, reclaim) - rewrite - risk


@given(
    st.lists(
        st.tuples(st.integers(1, 20_000), st.integers(0, 5_000), st.booleans()),
        min_size=1,
        max_size=12,
    ),
    st.floats(0, 60),
)
def test_the_cut_search_finds_the_best_cut_of_a_brute_force_search(
    raw: list[tuple[int, int, bool]], requests: float
) -> None:
    """On any eligible results (oldest first), the cut chosen is the one whose net, priced
    from scratch, is largest (the later one on a tie), and it runs only when that is positive."""
    items, at = [], 0
    for reclaim, gap, error in raw:
        items.append(Item(reclaim=reclaim, before=at, page=reclaim + 100, is_error=error))
        at += gap + reclaim
    cached_end = at
    outlook_ = Outlook(made=20, tokens=at + 20_000, window=at + 200_000, growth=500.0,
                       requests=requests)  # fmt: skip
    v = best_cut(AUTO, outlook_, Observed(), items, cached_end=cached_end, cold=False)
    nets = [_net_of_cut(AUTO, outlook_, items, j, cached_end) for j in range(len(items))]
    best = max(nets)
    assert v.cut is not None
    assert v.net == pytest.approx(best, rel=1e-9, abs=1e-6)
    assert v.cut == max(
        j for j, n in enumerate(nets) if n == pytest.approx(best, rel=1e-9, abs=1e-6)
    )
    assert v.choice == ("trim" if best > 0 else "wait")


# --- the bank: what a decision may lose, learned by the session and logged ------------------------


def _banked_history() -> list[dict[str, Any]]:
    """40 rounds of ~4,600-character results, kept under a 5,000-character tool cap, after one
    8,100-character result the cap spills: its few hidden tokens are the session's whole bank."""
    return conversation(
        [
            ["big " + "log line of a build output\n" * 300]
            if r == 0
            else [f"{r:03d} " + "log line of a build output\n" * 171]
            for r in range(40)
        ]
    )


BANKED: dict[str, Any] = {"fsync": False, "tools": {"bash": ToolPolicy(cap=5_000)}}
CACHED = {"input_tokens": 10, "cache_read_input_tokens": 20_000}


def _banked_run(path: Path, *, reopen_every: int = 0) -> tuple[list[Any], list[Any]]:
    """The session over :func:`_banked_history` (2 rounds a request, 5 s apart), reopened from
    its log every ``reopen_every`` requests (0: never): every copy and every report."""
    history = _banked_history()
    copies, reports = [], []
    session = Budget.open(path, BANKED)
    try:
        for i, end in enumerate(range(3, len(history) + 1, 2)):
            if reopen_every and i and i % reopen_every == 0:
                session.close()
                session = Budget.open(path, BANKED)
            usage = {**CACHED, "output_tokens": end}
            out = session.prepare(history[:end], usage=usage, now=5.0 * end)
            copies.append(out.messages)
            reports.append(out.report)
    finally:
        session.close()
    return copies, reports


def _log_records(path: Path) -> list[dict[str, Any]]:
    (log,) = list(path.rglob("*.jsonl"))
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_a_session_waits_for_its_bank_before_a_batch_that_pays(tmp_path: Path) -> None:
    """Batches that pay on average (net > 0) wait while the bank (the spilled result's hidden
    tokens x requests since, plus 0.5% of the bill) does not cover their re-write; once it
    does, a batch runs, covered, and its re-write comes off the bank (logged in ``p``)."""
    _copies, reports = _banked_run(tmp_path / "s")
    costs = [r.staleness_cost for r in reports]
    refused = [i for i, c in enumerate(costs) if c and c.choice == "wait" and c.net > 0]
    assert refused and all(costs[i] is not None and not costs[i].covered for i in refused)
    taken = [i for i, r in enumerate(reports) if r.staleness_ran]
    assert taken and min(taken) > min(refused)
    first = costs[min(taken)]
    assert first is not None and first.covered and first.worst_case > 0
    banks = [rec["p"][9] for rec in _log_records(tmp_path / "s") if rec.get("t") == "req"]
    # Each request banks the tokens hidden from it, at the cache-read price: it only grows...
    assert all(b2 > b1 for b1, b2 in itertools.pairwise(banks[: min(taken)]))
    # ...until the batch pays its re-write out of it.
    assert banks[min(taken)] < banks[min(taken) - 1]


def test_a_resumed_session_keeps_its_bank_and_decides_alike(tmp_path: Path) -> None:
    """Reopened from its log every 3 requests, the session's copies, decisions and logged
    ``p`` (the bank among them) are those of the session that went on."""
    went_on = _banked_run(tmp_path / "live")
    resumed = _banked_run(tmp_path / "resumed", reopen_every=3)
    assert resumed[0] == went_on[0]
    assert [r.staleness_cost for r in resumed[1]] == [r.staleness_cost for r in went_on[1]]
    live_p = [r["p"] for r in _log_records(tmp_path / "live") if r.get("t") == "req"]
    resumed_p = [r["p"] for r in _log_records(tmp_path / "resumed") if r.get("t") == "req"]
    assert resumed_p == live_p and any(p[9] > 0 for p in live_p)


def test_observed_updates_keep_every_field_they_do_not_name() -> None:
    """``now``, ``banked`` and ``after_request`` build positionally (a constructor call, for
    speed): each keeps every field it does not set, so a field added later is not reset."""
    import dataclasses

    fields = [f.name for f in dataclasses.fields(Observed)]
    seen = Observed(**{name: i + 1 for i, name in enumerate(fields)})
    made = {
        ("requests", "readbacks", "recalled"): seen.now(requests=100, readbacks=101, recalled=7),
        ("bank", "billed", "readbacks", "pending_bill", "recalled"): seen.banked(
            bank=100.0, billed=101.0, readbacks=102, pending=103.0, recalled=8
        ),
        ("gap_s", "hidden"): seen.after_request(gap_s=100.0, hidden=1),
    }
    for named, value in made.items():
        for name in fields:
            if name not in named:
                assert getattr(value, name) == getattr(seen, name), (named, name)


def test_a_log_before_results_read_back_were_counted_reads_each_readback_as_one_result() -> None:
    """A ``p`` of 15 fields (before ``recalled``) restores it as its read-backs, the model then;
    16 fields restore it as logged, and more results read back than read-backs is refused."""
    record = Observed(requests=3, hidden=5, readbacks=4, recalled=2).to_record()
    assert len(record) == 16
    restored = Observed.from_record(record)
    assert restored is not None and restored.recalled == 2
    old = Observed.from_record(record[:15])
    assert old is not None and old.recalled == old.readbacks == 4
    assert Observed.from_record([*record[:15], 5]) is None


def _after_logs(path: Path, config: dict[str, Any], outputs: list[str], step: int) -> list[Any]:
    """Twelve rounds of 6 kB build logs (a cache read growing ``step`` tokens a request), then
    one round per text of ``outputs``: the reports of those last requests."""
    log = "a line of the build log, as it was printed\n" * 140
    history: list[dict[str, Any]] = [{"role": "user", "content": "go"}]

    def round_of(cid: str, text: str) -> list[dict[str, Any]]:
        call = {"type": "tool_use", "id": cid, "name": "bash", "input": {"cmd": cid}}
        block = {"type": "tool_result", "tool_use_id": cid, "content": text}
        return [{"role": "assistant", "content": [call]}, {"role": "user", "content": [block]}]

    reports = []
    with Budget.open(path, {"fsync": False, "model": "claude-sonnet-4-5", **config}) as session:
        for r in range(12):
            history += round_of(f"c{r}", f"c{r}\n{log}")
            usage = {"input_tokens": 10, "cache_read_input_tokens": step * r + 1_000}
            session.prepare(history, usage={**usage, "output_tokens": 5}, now=5.0 * r)
        for k, text in enumerate(outputs):
            history += round_of(f"big{k}", text)
            reports.append(session.prepare(history, now=70.0 + k).report)
    return reports


def test_a_huge_fresh_output_spilled_at_once_forces_no_window_batch(tmp_path: Path) -> None:
    """A 700,000-character output arriving in a 128k window is spilled by the cap pass: the
    request it leaves is far from the window, so no batch trims the old results (the estimate
    counted it whole before the passes had decided it)."""
    [report] = _after_logs(tmp_path / "s", {"window": 128_000}, ["x" * 700_000], 2_000)
    assert [(d.kind, d.reason) for d in report.decisions if d.call_id == "big0"] == [
        ("spilled", "cap")
    ]
    assert report.trimmed_now == 0 and report.staleness_reason != "window"


def _refused_session(path: Path, quota: int | None) -> list[Any]:
    """Two rounds of a 60,000-character output each after the logs, in a 40k window, with a
    store of ``quota`` bytes."""
    config = {"window": 40_000, "quota_bytes": quota}
    return _after_logs(path, config, ["y" * 60_000, "z" * 60_000], 1_600)


def test_a_store_that_refused_a_spill_is_not_counted_on_for_the_window(tmp_path: Path) -> None:
    """Two large outputs: spilled, both requests stay under the window untrimmed; refused by the
    store (its quota), the first stays whole and still fits, and the second, no longer counted
    on as spilled, brings a window batch (the store refusing what it can of the trims' bodies
    too, the request ends a few hundred tokens over: the provider's refusal then forces more)."""
    stored = _refused_session(tmp_path / "stored", None)
    assert [(r.trimmed_now, r.tokens_after < 40_000) for r in stored] == [(0, True), (0, True)]
    refused = _refused_session(tmp_path / "refused", 50_000)
    kinds = [d.kind for r in refused for d in r.decisions if d.call_id.startswith("big")]
    assert kinds == ["kept_unspillable", "kept_unspillable"]
    assert refused[0].tokens_after < 40_000
    assert refused[1].staleness_reason == "window" and refused[1].trimmed_now >= 5
