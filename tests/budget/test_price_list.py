"""The providers' published prompt-cache prices by model (``budget.policy.price_list``), and a
session told its model pricing with them unless the caller set prices of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from budget import Budget, BudgetConfig
from budget.policy import ANTHROPIC, PriceList, price_list
from tests.strategies import conversation


@pytest.mark.parametrize(
    ("model", "write", "read", "explicit"),
    [
        ("claude-sonnet-4-5-20250929", 1.25, 0.1, True),
        ("anthropic/claude-3-5-sonnet-20241022", 1.25, 0.1, True),
        ("gpt-5.5", 1.0, 0.1, False),
        ("gpt-5-mini", 1.0, 0.1, False),
        ("gpt-4.1-mini", 1.0, 0.25, False),
        ("openai/gpt-4o-mini", 1.0, 0.5, False),
        ("gpt-4o-2024-08-06", 1.0, 0.5, False),
        ("o3-mini", 1.0, 0.5, False),
        ("openrouter/o4-mini", 1.0, 0.5, False),
        ("google/gemini-3-pro-preview", 1.0, 0.1, False),
        ("gemini-2.5-flash", 1.0, 0.1, False),
        ("gemini-2.0-flash", 1.0, 0.25, False),
    ],
)
def test_each_makers_list_by_model_name(
    model: str, write: float, read: float, explicit: bool
) -> None:
    """A model name, bare or behind a router's prefix, gets its maker's published prices:
    Anthropic 1.25 / 0.1 with explicit breakpoints, OpenAI and Google automatic caching with no
    write surcharge and the family's cached-input price."""
    got = price_list(model)
    assert (got.write, got.read, got.explicit) == (write, read, explicit)


@pytest.mark.parametrize("model", [None, "", "openrouter/llama-4-maverick", "opus-mistral-7b"])
def test_a_model_whose_maker_the_name_does_not_tell_is_priced_as_anthropic(
    model: str | None,
) -> None:
    """Unknown: Anthropic's list, the careful side (a read price taken too low leaves a saving
    unclaimed; one taken too high would trim what never pays back)."""
    assert price_list(model) is ANTHROPIC


def test_the_callers_prices_replace_the_lists() -> None:
    """A write or read price the caller set wins over the list; the other stays the list's."""
    assert price_list("gpt-4o", read=0.1) == PriceList(
        1.0, 0.1, explicit=False, source="openai gpt-4o, the caller's prices"
    )
    assert price_list(None, write=2.0).write == 2.0
    assert price_list(None, write=2.0).read == 0.1


def _saving_per_hidden_token(tmp_path: Path, **cfg: Any) -> tuple[float, float]:
    """(the verdict's saving per hidden token, its expected later requests) for a first request
    whose one result (10,000 characters) the cost model weighs."""
    text = "".join(f"{i:05d} " + "y" * 53 + "\n" for i in range(166))  # 9,960 characters
    with Budget.open(tmp_path, BudgetConfig(fsync=False, **cfg)) as session:
        msgs = conversation([[text]])
        (decision,) = session.prepare(msgs, now=0).report.decisions
    verdict = decision.cost
    assert verdict is not None and verdict.reclaim_tokens > 0
    return verdict.saving / verdict.reclaim_tokens, verdict.expected_requests


def test_a_session_prices_with_its_models_list_unless_the_caller_set_prices(
    tmp_path: Path,
) -> None:
    """Before any usage a fresh result's saving is its hidden tokens at the write price now plus
    the read price on each later request: Anthropic's 1.25 + 0.1n for Claude (and for a model
    not given), GPT-4o's 1.0 + 0.5n, and the caller's read price over the model's."""
    claude, n = _saving_per_hidden_token(tmp_path / "a", model="claude-sonnet-4-5")
    assert claude == pytest.approx(1.25 + 0.1 * n)
    assert _saving_per_hidden_token(tmp_path / "b")[0] == pytest.approx(claude)
    gpt, m = _saving_per_hidden_token(tmp_path / "c", model="gpt-4o")
    assert m == n
    assert gpt == pytest.approx(1.0 + 0.5 * n)
    own, _ = _saving_per_hidden_token(tmp_path / "d", model="gpt-4o", cache_read_price=0.1)
    assert own == pytest.approx(1.0 + 0.1 * n)
