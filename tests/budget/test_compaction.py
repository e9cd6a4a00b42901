"""Compaction (SPEC §11): its settings, the tail it keeps and the copy it projects."""

from __future__ import annotations

import pytest

from budget import BudgetConfig, ConfigError


def test_compaction_is_off_by_default_with_claude_codes_thresholds() -> None:
    """The shipped settings: off, a 20k output reserve, a 13k margin (3k manual), breaker at 3."""
    cfg = BudgetConfig()
    assert cfg.compaction == "off"
    assert (cfg.compact_reserve_tokens, cfg.compact_margin_tokens) == (20_000, 13_000)
    assert cfg.compact_manual_margin_tokens == 3_000
    assert (cfg.compact_tail_tokens, cfg.compact_tail_messages) == (10_000, 5)
    assert cfg.compact_tail_max_tokens == 40_000
    assert cfg.compact_breaker_failures == 3


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"compaction": "sometimes"}, "compaction"),
        ({"compact_reserve_tokens": 0}, "compact_reserve_tokens"),
        ({"compact_margin_tokens": -1}, "compact_margin_tokens"),
        ({"compact_tail_messages": 0}, "compact_tail_messages"),
        ({"compact_breaker_failures": 0}, "compact_breaker_failures"),
        ({"compact_tail_tokens": 50_000}, "compact_tail_max_tokens"),
        ({"compact_manual_margin_tokens": 20_000}, "compact_manual_margin_tokens"),
    ],
)
def test_a_bad_compaction_setting_is_refused_by_name(
    settings: dict[str, object], named: str
) -> None:
    """Each out-of-range or incoherent compaction setting raises ConfigError naming the field."""
    with pytest.raises(ConfigError, match=named):
        BudgetConfig(**settings)
