"""The timing loop the store benchmarks share: wall seconds of each of ``repeat`` calls."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["times"]


def times(run: Callable[[], object], repeat: int) -> list[float]:
    """Wall seconds (``time.perf_counter``) of each of ``repeat`` calls of ``run``, in order."""
    out = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        out.append(time.perf_counter() - started)
    return out
