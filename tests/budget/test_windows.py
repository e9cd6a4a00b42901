"""Tests for context-window resolution and the built-in model table."""

from __future__ import annotations

import pytest

from budget._errors import ConfigError
from budget.tokens._windows import DEFAULT_WINDOW, MODEL_WINDOWS, resolve_window, table_window


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("claude-sonnet-4-5-20250929", 200_000),
        ("claude-sonnet-4-5-20250929[1m]", 1_000_000),
        ("anthropic/claude-sonnet-4", 200_000),
        ("us.anthropic.claude-opus-4-1-20250805-v1:0", 200_000),
        ("claude-opus-4-20250514", 200_000),
        ("claude-opus-4-7", 1_000_000),
        ("Claude-Haiku-4-5-20251001", 200_000),
        ("claude-3-5-sonnet-20241022", 200_000),
        ("openai/gpt-4.1-mini", 1_047_576),
        ("gpt-4o-2024-08-06", 128_000),
        ("gpt-5-2025-08-07", 400_000),
        ("openai/gpt-5-codex", 400_000),
        ("gpt-5.5", 1_000_000),
        ("o4-mini", 200_000),
        ("openrouter/openai/o3", 200_000),
        ("google/gemini-3-pro-preview", 1_048_576),
        ("gemini-2.5-flash", 1_048_576),
        ("deepseek/deepseek-chat", 128_000),
        ("qwen/qwen3-coder-480b-a35b-instruct", 262_144),
        ("openai/openrouter-llama-4-maverick", 1_000_000),
        ("meta-llama/llama-3.3-70b-instruct", 131_072),
        ("mistralai/mistral-large-2411", 131_072),
        ("codestral-latest", 256_000),
    ],
)
def test_table_matches_current_models(model: str, window: int) -> None:
    """Known model names resolve by longest prefix despite provider prefixes and dated suffixes."""
    assert table_window(model) == window


def test_unknown_models_fall_back() -> None:
    """Unknown names match nothing; 'gpt-4' does not claim 'gpt-4o' names, nor 'o3' inside words."""
    assert table_window("my-local-model") is None
    assert table_window(None) is None
    assert table_window("gpt-4o-mini") == 128_000
    assert table_window("foo3") is None
    assert resolve_window("my-local-model") == DEFAULT_WINDOW == 128_000


def test_table_is_plain_positive_data() -> None:
    """Every table entry is a lowercase prefix with a positive window, listed once."""
    prefixes = [p for p, _ in MODEL_WINDOWS]
    assert len(prefixes) == len(set(prefixes))
    assert all(p == p.lower() and w > 0 for p, w in MODEL_WINDOWS)


def test_resolution_order() -> None:
    """Explicit beats discovery, discovery beats the table, the table beats the default."""
    calls: list[str] = []

    def discover() -> int | None:
        calls.append("asked")
        return 150_000

    cache: dict[str, int] = {}
    assert resolve_window("gpt-4o", explicit=90_000, discover=discover, cache=cache) == 90_000
    assert calls == []
    assert resolve_window("gpt-4o", discover=discover, cache=cache) == 150_000
    assert cache == {"window:gpt-4o": 150_000}
    # The cached answer is reused without asking the provider again.
    assert resolve_window("gpt-4o", discover=discover, cache=cache) == 150_000
    assert calls == ["asked"]
    assert resolve_window("gpt-4o") == 128_000


def test_failed_discovery_falls_back_and_is_not_retried() -> None:
    """A discovery callable that raises or answers nothing leaves the table in charge, once."""
    calls: list[str] = []

    def broken() -> int | None:
        calls.append("asked")
        raise RuntimeError("provider unreachable")

    cache: dict[str, int] = {}
    assert resolve_window("claude-opus-4-5", discover=broken, cache=cache) == 200_000
    assert resolve_window("claude-opus-4-5", discover=broken, cache=cache) == 200_000
    assert calls == ["asked"]
    assert resolve_window("x-model", discover=lambda: None) == DEFAULT_WINDOW


@pytest.mark.parametrize("bad", [0, -5, True])
def test_invalid_explicit_window(bad: int) -> None:
    """A non-positive explicit window is a ConfigError naming the setting."""
    with pytest.raises(ConfigError, match="window"):
        resolve_window("gpt-4o", explicit=bad)
