"""The token counters the benchmarks share: the library's own estimator.

``count_tokens`` counts with no model named (each character class at its costliest, as
:func:`budget.estimate_tokens` does by default); ``counter_for(model)`` counts prompts sent to
``model`` with its tokenizer family, which is how a replay counts what the provider would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from budget import estimate_tokens

__all__ = ["Counter", "count_tokens", "counter_for"]

Counter = Callable[[Any], int]
"""Counts the tokens of a JSON-like object (a string, a message, a content block, a list)."""


def count_tokens(obj: Any) -> int:
    """Estimated tokens of ``obj`` for a model of unknown family."""
    return estimate_tokens(obj)


def counter_for(model: str | None) -> Counter:
    """A counter for prompts sent to ``model`` (:func:`count_tokens` when it is unknown)."""
    if not model:
        return count_tokens

    def count(obj: Any) -> int:
        return estimate_tokens(obj, model=model)

    return count
