"""Each pass on its own: pure functions from a context to decisions, figures worked out by hand."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import pytest

from budget import BudgetConfig, Decision, ToolPolicy
from budget._view import ToolResult
from budget.passes import Candidate, PassContext, Staleness
from budget.passes.aggregate import aggregate
from budget.passes.cap import cap
from budget.passes.staleness import staleness, trigger
from spill import ref_for

CFG = BudgetConfig(
    result_cap=1_000,
    preview_chars=100,
    group_budget=3_000,
    tools={"cat": ToolPolicy(cap=2_000), "secret": ToolPolicy(exempt=True)},
)


def result(
    call_id: str, chars: int, *, tool: str = "bash", group: int = 1, order: int = 0
) -> ToolResult:
    return ToolResult(call_id, tool, group + 1, order, group, 0, "x" * chars, False, 0, order)


def ctx(fresh: list[ToolResult], **kw: object) -> PassContext:
    base = PassContext(
        config=CFG,
        fresh=tuple(fresh),
        decided=MappingProxyType({}),
        group_frozen_chars={},
        staleness=Staleness((), 0, 0, 0, 100_000, 0.0, None, 0, False),
        ref_for=ref_for,
        path_of=lambda _ref: None,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def test_cap_spills_strictly_longer_results_only() -> None:
    """At the cap a result stays; one character more and it is spilled with reason cap."""
    out = cap(ctx([result("a", 1_000), result("b", 1_001, order=1)]))
    assert [(d.call_id, d.kind, d.reason) for d in out] == [("b", "spilled", "cap")]
    assert out[0].ref == ref_for("x" * 1_001)


def test_cap_follows_per_tool_policies_and_halving() -> None:
    """A tool's own cap and exemption apply; after an overflow caps are halved."""
    fresh = [result("c", 1_500, tool="cat"), result("s", 90_000, tool="secret", order=1)]
    assert cap(ctx(fresh)) == []
    assert [d.call_id for d in cap(ctx(fresh, cap_scale=0.5))] == ["c"]


def test_aggregate_spills_largest_first_ties_earlier_first_until_the_group_fits() -> None:
    """900+2,000+2,000+800 = 5,700: each 2,000 becomes a ~560-char envelope, so b then c suffice."""
    fresh = [
        result("a", 900, order=0),
        result("b", 2_000, order=1),
        result("c", 2_000, order=2),
        result("d", 800, order=3),
    ]
    out = aggregate(ctx(fresh))
    assert [(d.call_id, d.reason) for d in out] == [("b", "aggregate"), ("c", "aggregate")]
    after = 5_700 - sum(2_000 - len(d.text or "") for d in out)
    assert after <= 3_000 < after + 2_000 - len(out[1].text or "")


def test_aggregate_counts_frozen_results_but_never_revisits_them() -> None:
    """Frozen 2,500 + fresh 700 + 600 = 3,800: both fresh results go, the frozen ones stay."""
    fresh = [result("a", 700, order=0), result("b", 600, order=1)]
    out = aggregate(ctx(fresh, group_frozen_chars={1: 2_500}))
    # Envelopes of ~560 characters save 140 and 40: still over, so both are spilled, a first.
    assert [d.call_id for d in out] == ["a", "b"]
    assert aggregate(ctx([result("c", 10, order=2)], group_frozen_chars={1: 9_000})) == []


def test_aggregate_does_not_spill_a_result_smaller_than_its_envelope() -> None:
    """Spilling a tiny result would grow the group, so it is left alone."""
    fresh = [result(f"r{i}", 90, order=i) for i in range(40)]  # 3,600 in 90-char pieces
    assert aggregate(ctx(fresh)) == []


def test_pays_for_itself_weighs_the_expected_later_requests() -> None:
    """With a coin-flip horizon (factor 1.0) the same trim pays: 12k * 0.1 * 20 = 24k > 19.5k."""
    coin_flip = CFG.model_copy(update={"expected_requests_factor": 1.0})
    stale = _stale(requests_so_far=20, rewrite_tokens=30_000)
    assert trigger(ctx([], staleness=stale)) is None
    assert trigger(ctx([], staleness=stale, config=coin_flip)) == "pays"


def _stale(**kw: object) -> Staleness:
    r = result("old", 8_000)
    d = Decision("old", "kept", "fits", 8_000, tool="bash")
    base = Staleness(
        eligible=(Candidate(r, d, 1_925),),
        reclaim_tokens=12_000,
        rewrite_tokens=50_000,
        estimate_tokens=60_000,
        window=200_000,
        now=1_000.0,
        last_request_at=990.0,
        requests_so_far=10,
        forced=False,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, None),  # warm, 60k < 120k, 12k*0.1*10 = 12k < (50k-12k)*1.25 - 5k = 42.5k
        ({"last_request_at": 700.0}, "cold_cache"),  # 300 s since the last request
        ({"estimate_tokens": 120_000}, "pressure"),  # 0.6 * 200k
        # 12k * 0.1 * (50 * 0.5) = 30k saved > (20k - 12k) * 1.25 - 2k = 8k re-written
        ({"requests_so_far": 50, "rewrite_tokens": 20_000}, "pays"),
        # 12k * 0.1 * (20 * 0.5) = 12k < (30k - 12k) * 1.25 - 3k = 19.5k: not with 2/3 odds
        ({"requests_so_far": 20, "rewrite_tokens": 30_000}, None),
        ({"reclaim_tokens": 9_999, "last_request_at": 0.0}, None),  # under the minimum
        ({"forced": True, "reclaim_tokens": 5}, "forced"),
        ({"eligible": ()}, None),
    ],
)
def test_staleness_triggers(changes: dict[str, object], expected: str | None) -> None:
    """Cold cache, pressure and pays-for-itself fire only over the minimum reclaim."""
    c = ctx([], staleness=_stale(**changes))
    assert trigger(c) == expected
    out = staleness(c)
    if expected is None:
        assert out == []
    else:
        assert [(d.call_id, d.kind, d.reason) for d in out] == [("old", "trimmed", expected)]
        assert out[0].ref == ref_for("x" * 8_000)


def test_aggregate_never_lets_one_group_take_more_than_half_a_small_window() -> None:
    """Under a 1,000-token window a group is held to 2,000 characters, not the 3,000 setting."""
    fresh = [result("a", 900), result("b", 900, order=1), result("c", 900, order=2)]
    roomy = ctx(fresh)
    assert aggregate(roomy) == []  # 2,700 characters fit the setting under a 100k window
    small = replace(roomy, staleness=replace(roomy.staleness, window=1_000))
    assert small.group_budget() == 2_000
    spilled = {d.call_id: d for d in aggregate(small)}
    assert spilled and list(spilled) == sorted(spilled)  # largest first, ties earlier first
    shown = sum(len(spilled[r.call_id].text or "") if r.call_id in spilled else 900 for r in fresh)
    assert shown <= 2_000
