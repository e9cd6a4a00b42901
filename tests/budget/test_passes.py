"""Each pass on its own: pure functions from a context to decisions, figures worked out by hand."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from budget import BudgetConfig, Decision, ToolPolicy
from budget._view import ToolResult
from budget.passes import Candidate, Costs, PassContext, Staleness
from budget.passes.aggregate import aggregate
from budget.passes.cap import cap
from budget.passes.staleness import BATCH, staleness
from budget.policy import Item, Observed, Outlook, Prices
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


def test_cap_keeps_whole_an_output_its_envelope_would_outgrow() -> None:
    """With a 2,000-character preview and a tool cap of 1, a 2,100-character output stays whole
    (its envelope, preview and frame, would be longer) and a 3,000-character one is spilled."""
    config = BudgetConfig(preview_chars=2_000, tools={"cat": ToolPolicy(cap=1)})
    fresh = [result("a", 2_100, tool="cat"), result("b", 3_000, tool="cat", order=1)]
    out = cap(ctx(fresh, config=config))
    assert [(d.call_id, d.reason) for d in out] == [("b", "cap")]
    assert len(out[0].text or "") < 3_000


def test_a_priced_spill_whose_envelope_would_outgrow_its_output_keeps_it_whole() -> None:
    """A 2,650-character output the cost model would spill (a long session ahead), whose
    envelope names a 400-character file path (``include_path``): the frame outgrows the 600
    characters priced, the envelope the output, so it stays whole; a 4,000-character one goes."""
    config = BudgetConfig(preview_chars=2_000, include_path=True)
    fresh = [result("a", 2_650), result("b", 4_000, order=1)]
    # 10,000 results kept whole and none needed: a spill's read-back risk is next to nothing.
    costs = replace(_costs([], requests=20), observed=Observed(bank=1e9, exposed=10_000))
    out = cap(ctx(fresh, config=config, costs=costs, path_of=lambda ref: "/s" * 200 + ref))
    assert [(d.call_id, d.reason) for d in out] == [("b", "pays")]


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


def _stale(n: int = 3, **kw: object) -> Staleness:
    """``n`` eligible results of 8,000 characters, oldest first."""
    cands = tuple(
        Candidate(
            result(f"old{i}", 8_000, order=i),
            Decision(f"old{i}", "kept", "fits", 8_000, tool="bash"),
            1_925,
        )
        for i in range(n)
    )
    base = Staleness(cands, 1_925 * n, 50_000, 60_000, 200_000, 1_000.0, 990.0, 10, False)
    return replace(base, **kw)  # type: ignore[arg-type]


CACHED = Prices(write=1.0, read=0.1, ttl_s=300.0, regime="cached", explicit=False)


def _costs(items: list[Item], *, requests: float, tokens: int = 50_000, bank: float = 1e9) -> Costs:
    """The cost model's inputs for a hand-worked batch (a window too far off to matter; by
    default a bank that covers any re-write)."""
    look = Outlook(made=20, tokens=tokens, window=10**12, growth=1.0, requests=requests)
    return Costs(CACHED, look, Observed(bank=bank), 40_000, False, lambda: items, {})


ITEMS = [
    Item(reclaim=2_000, before=10_000, page=1_000, is_error=False),
    Item(reclaim=6_000, before=30_000, page=1_000, is_error=False),
    Item(reclaim=1_000, before=36_000, page=1_000, is_error=False),
]
"""Three eligible results; tests/budget/test_policy.py works their cuts out by hand."""


def test_staleness_waits_when_the_bank_does_not_cover_the_re_write() -> None:
    """The same batch with 1,000 banked (its re-write is 2,000; nothing billed yet, so the
    allowance is 1,000 + 0.5% x 1,000 = 1,005): 995 short, which its 700 a request pays back in
    1.42 requests, a session of 21 ends that soon 1.42 / 22.42 = 6.3% of the time, over the 5%
    risk: no trim, and the verdict says it was refused for want of bank."""
    costs = _costs(ITEMS, requests=20, bank=1_000.0)
    assert staleness(ctx([], staleness=_stale(), costs=costs)) == []
    (verdict,) = costs.verdicts.values()
    assert (verdict.choice, verdict.cut, verdict.covered) == ("wait", 1, False)


def test_staleness_trims_from_the_cut_the_cost_model_chose() -> None:
    """Over 20 requests the cut at the second result pays best: it and the third are trimmed."""
    costs = _costs(ITEMS, requests=20)
    out = staleness(ctx([], staleness=_stale(), costs=costs))
    assert [(d.call_id, d.kind, d.reason) for d in out] == [
        ("old1", "trimmed", "pays"),
        ("old2", "trimmed", "pays"),
    ]
    assert out[0].ref == ref_for("x" * 8_000)
    verdict = costs.verdicts[BATCH]
    assert (verdict.choice, verdict.cut, round(verdict.net)) == ("trim", 1, 10_400)


def test_staleness_waits_when_no_cut_pays() -> None:
    """Over 3 requests no cut pays: nothing is trimmed, the verdict says wait."""
    costs = _costs(ITEMS, requests=3)
    assert staleness(ctx([], staleness=_stale(), costs=costs)) == []
    assert costs.verdicts[BATCH].choice == "wait"


def test_an_overflow_or_the_window_trims_everything_eligible_without_a_price() -> None:
    """Forced (an overflow) trims all, cost model or not; over the window too ("window")."""
    forced = staleness(ctx([], staleness=_stale(forced=True)))
    assert [(d.call_id, d.reason) for d in forced] == [(f"old{i}", "forced") for i in range(3)]
    over = _costs(ITEMS, requests=0, tokens=10**12)
    out = staleness(ctx([], staleness=_stale(), costs=over))
    assert [(d.call_id, d.reason) for d in out] == [(f"old{i}", "window") for i in range(3)]
    assert BATCH not in over.verdicts  # no price decided it


def test_staleness_without_a_cost_model_or_switched_off_trims_nothing() -> None:
    """No cost model (hard limits only), staleness off, or nothing eligible: no batch."""
    assert staleness(ctx([], staleness=_stale())) == []
    off = CFG.model_copy(update={"staleness": False})
    assert (
        staleness(ctx([], config=off, staleness=_stale(), costs=_costs(ITEMS, requests=20))) == []
    )
    assert staleness(ctx([], staleness=_stale(0), costs=_costs([], requests=20))) == []


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
