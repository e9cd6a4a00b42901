"""The one token counter the benchmarks share by default.

``count_tokens`` calls ``budget.estimate_tokens`` once the library provides it, so every strategy
and the cache simulator switch to the real estimator without a change here; until then it falls
back to a quarter of the object's compact JSON size, the usual rough ratio for English and code.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import cache
from typing import Any

import orjson

__all__ = ["Counter", "count_tokens", "counter_for"]

Counter = Callable[[Any], int]
"""Counts the tokens of a JSON-like object (a string, a message, a content block, a list)."""


def _fallback(obj: Any) -> int:
    return len(orjson.dumps(obj)) // 4


@cache
def _estimator() -> Counter:
    # Resolved once per process: a failing import on every call would cost more than counting.
    try:
        module = importlib.import_module("budget")
    except ImportError:  # pragma: no cover - the budget package ships with the benchmarks
        return _fallback
    found = getattr(module, "estimate_tokens", None)
    return found if callable(found) else _fallback


def count_tokens(obj: Any) -> int:
    """Estimated tokens of ``obj``: the library's estimator when present, else JSON bytes / 4."""
    return _estimator()(obj)


def counter_for(model: str | None) -> Counter:
    """A counter for prompts sent to ``model``: the estimator with that model's tokenizer
    family (the replay counts what the provider would), or :func:`count_tokens` if unknown."""
    if not model:
        return count_tokens
    from budget import estimate_tokens  # the library ships with the benchmarks

    def count(obj: Any) -> int:
        return estimate_tokens(obj, model=model)

    return count
