"""The public surface is curated: ``__all__`` is pinned so that changes to it are deliberate."""

from __future__ import annotations

import budget
import spill


def test_budget_public_names_are_pinned() -> None:
    """budget exports exactly these names, and each of them exists."""
    assert sorted(budget.__all__) == [
        "Budget",
        "BudgetConfig",
        "BudgetError",
        "ConfigError",
        "ContextOverflow",
        "Decision",
        "DecisionReport",
        "Format",
        "FormatError",
        "FormatUnknown",
        "InputError",
        "Prepared",
        "QuotaExceeded",
        "ReadToolResult",
        "RefError",
        "Report",
        "SessionLocked",
        "SessionReader",
        "StoreError",
        "TokenizerProfile",
        "ToolPolicy",
        "detect_format",
        "estimate_tokens",
        "get_format",
        "tiktoken_estimator",
        "tiktoken_text_tokens",
        "tokenizer_profile",
        "wrap_tool",
    ]
    for name in budget.__all__:
        assert getattr(budget, name) is not None


def test_every_error_derives_from_budget_error() -> None:
    """The error tree has one root."""
    errors = [
        getattr(budget, n)
        for n in budget.__all__
        if n.endswith(("Error", "Locked", "Exceeded", "Overflow", "Unknown"))
    ]
    assert len(errors) == 10
    for err in errors:
        assert issubclass(err, budget.BudgetError)


def test_spill_public_names_are_pinned() -> None:
    """spill exports the store interface, the three stores, ref helpers and gc."""
    assert {
        "Store",
        "LocalStore",
        "MemoryStore",
        "FsspecStore",
        "ref_for",
        "validate_ref",
        "gc_sessions",
    } <= set(spill.__all__)
