"""The promise's two figures are settings: ``promise_tolerance`` and ``promise_risk``.

The cost policy takes a decision that can lose only when the bank covers its worst case or its
chance of breaching the promise is at most ``promise_risk`` (``budget.policy.allowance``,
``breach_chance``); these tests run real sessions on disk with each setting.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from budget import Budget, BudgetConfig, BudgetError
from budget.policy import RISK, TOLERANCE, Observed, Outlook, Prices, spill_verdict

MID = "\n".join(f"row {i:04d}: " + "value " * 12 for i in range(160))
"""About 13,000 characters: under the 50,000-character cap, weighed by the cost model."""
BRIEF = "Keep every row's value as it is; " * 200
"""A user message of ~6,600 characters: the first request's bill (what a tolerance is a share of)."""


def _call(call_id: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [
        {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": "cat t"}}]}  # fmt: skip


def _result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": call_id, "content": text}]}  # fmt: skip


def _decided(path: Path, config: BudgetConfig) -> str:
    """The decision on a mid-size result met on the second request of a new session."""
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "Look at the table. " + BRIEF},
        _call("c0"),
        _result("c0", "ok"),
    ]
    with Budget.open(path, config) as session:
        session.prepare(history, now=1.0)
        session.prepare([*history, _call("c1"), _result("c1", MID)], now=2.0)
        decision = session.decision("c1")
    assert decision is not None
    return decision.kind


def test_the_defaults_are_the_policys_constants() -> None:
    """``BudgetConfig()`` carries the promise the policy documents: 0.5% and one in twenty."""
    config = BudgetConfig()
    assert (config.promise_tolerance, config.promise_risk) == (TOLERANCE, RISK)


@pytest.mark.parametrize(
    "bad",
    [
        {"promise_risk": 1.5},
        {"promise_risk": -0.1},
        {"promise_tolerance": -0.01},
        {"promise_tolerance": math.inf},
        {"promise_tolerance": math.nan},
    ],
)
def test_a_promise_setting_out_of_range_is_refused(bad: dict[str, float]) -> None:
    """A chance outside [0, 1] or a tolerance that is negative or not finite is a config error."""
    with pytest.raises(BudgetError):
        BudgetConfig(**bad)


def test_a_spill_its_breach_chance_forbids_at_the_default_runs_when_the_risk_is_allowed(
    tmp_path: Path,
) -> None:
    """Early in a session a mid-size result's spill pays on average but could breach the promise:
    kept whole at the defaults, spilled with ``promise_risk=1`` (its net alone decides)."""
    assert _decided(tmp_path / "default", BudgetConfig()) == "kept"
    assert _decided(tmp_path / "any", BudgetConfig(promise_risk=1.0)) == "spilled"


def test_a_larger_tolerance_covers_what_the_default_does_not(tmp_path: Path) -> None:
    """The same spill is covered once the tolerance (a share of the bill so far) covers its worst
    case: the whole first request's bill is more than a read-back of a page can lose."""
    assert _decided(tmp_path / "narrow", BudgetConfig()) == "kept"
    assert _decided(tmp_path / "wide", BudgetConfig(promise_tolerance=1.0)) == "spilled"


def test_the_verdicts_breach_limit_is_its_own_argument_not_the_readback_risk() -> None:
    """``max_breach`` bounds the breach chance only: a verdict whose read-back risk (in billed
    tokens) is far above 1 is still refused at the default limit."""
    prices = Prices(write=1.25, read=0.1, ttl_s=300.0, regime="cached")
    look = Outlook(made=2, tokens=5_000, window=200_000, growth=1_000.0, requests=1.5)
    common: dict[str, Any] = {
        "tokens": 3_000,
        "envelope_tokens": 600,
        "is_error": False,
        "page_tokens": 3_000,
        "allowance": 0.0,
    }
    strict = spill_verdict(prices, look, Observed(requests=2), **common)
    loose = spill_verdict(prices, look, Observed(requests=2), **common, max_breach=1.0)
    assert strict.readback_risk > 1 and strict.net > 0
    assert (strict.choice, strict.covered) == ("keep", False)
    assert (loose.choice, loose.covered) == ("spill", True)
