"""The public recorded traces as the suite shares them: loaded once a worker by the
``shared_trace_set`` fixture (tests/conftest.py), as tuples a test cannot reorder in place."""

from __future__ import annotations

from pathlib import Path
from typing import TypeAlias

import orjson
import xxhash

from benchmarks.importers import Skipped, load_dir
from benchmarks.trace import Trace

__all__ = ["SharedTraces", "digest", "load_shared"]

SharedTraces: TypeAlias = tuple[tuple[Trace, ...], tuple[Skipped, ...]]
"""What ``load_dir`` returns (the traces, the files skipped), as tuples."""


def load_shared(traces: Path) -> SharedTraces:
    """``load_dir(traces)`` as tuples."""
    found, skipped = load_dir(traces)
    return tuple(found), tuple(skipped)


def digest(traces: tuple[Trace, ...]) -> str:
    """xxh3 of every trace's name, messages and request boundaries: a change made in place to
    one of them changes it."""
    hasher = xxhash.xxh3_64()
    for trace in traces:
        n_messages = [request.n_messages for request in trace.requests]
        hasher.update(orjson.dumps([trace.name, trace.messages, n_messages]))
    return hasher.hexdigest()
