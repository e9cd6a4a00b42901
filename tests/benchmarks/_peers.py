"""The small settings the replay and strategy tests run every peer strategy with."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["peer_options"]


def peer_options(count: Callable[[Any], int]) -> dict[str, dict[str, Any]]:
    """Each peer strategy's options, by name in registry order after ``none`` and ``toolbudget``,
    small enough that a few short rounds make every one act; ``count`` counts tokens where the
    strategy takes a counter."""
    return {
        "claude-code": {"cap_chars": 300, "group_budget_chars": 500, "preview_chars": 50},
        "anthropic-context-editing": {"trigger": 100, "keep": 1, "count": count},
        "langchain": {"trigger": 100, "keep": 1},
        "swe-agent": {},
        "swe-agent-0.7": {"n": 2},
        "observation-masking": {"window": 1},
        "opencode": {"protect": 100, "minimum": 10, "count": count},
        "gemini-cli": {"protect": 100, "minimum": 10, "count": count},
        "codex": {"mode": "tokens", "limit": 50},
        "openai-agents": {"recent_turns": 1, "max_output_chars": 100},
        "cc-reducer-proxy": {"cap_chars": 200, "cap_turns": 0, "stale_turns": 1, "stale_chars": 50},
        "squeezr": {"dedup_min_chars": 10},
    }
