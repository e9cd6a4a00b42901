"""The shared default token counter of the benchmarks."""

from __future__ import annotations

import importlib

import orjson

from benchmarks._count import count_tokens


def test_count_tokens_uses_the_library_estimator_when_present() -> None:
    """``count_tokens`` gives ``budget.estimate_tokens`` when it exists, else JSON bytes / 4."""
    message = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "déjà vu\n" * 50}],
    }
    estimator = getattr(importlib.import_module("budget"), "estimate_tokens", None)
    expected = estimator(message) if estimator else len(orjson.dumps(message)) // 4
    assert count_tokens(message) == expected
    assert count_tokens("x" * 4000) > count_tokens("x" * 400) > 0
