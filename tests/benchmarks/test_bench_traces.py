"""toolbudget's invariants on every request of every public trace in ``../shared/traces``.

On each request: the input is left unchanged (the replay hashes it), the previous request copy is
a byte-identical prefix of this one unless the report says a staleness batch ran, and every result
shown differently from its original can be read back exactly through its ref.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from benchmarks import strategies
from benchmarks.replay import replay_trace
from benchmarks.strategies._base import Messages, StrategySession
from benchmarks.strategies.toolbudget import ToolbudgetSession
from benchmarks.trace import Trace
from tests._shared import SharedTraces

# Slow: replays every recorded trace under every strategy.
pytestmark = [pytest.mark.traces, pytest.mark.slow]


def _uncounted(obj: Any) -> int:
    """Tokens are not what this test checks; counting them would only cost time."""
    return 0


@pytest.fixture(scope="module")
def traces(shared_trace_set: SharedTraces) -> list[Trace]:
    """Every trace of the public set (every file must load)."""
    found, skipped = shared_trace_set
    assert skipped == ()
    assert len(found) >= 30
    return list(found)


class _Checker:
    """Checks every request copy of one trace as the replay hands it over."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.previous: list[bytes] = []
        self.seen: dict[int, tuple[Any, bytes]] = {}
        self.batches = 0
        self.checked = 0

    def __call__(self, i: int, session: StrategySession, out: Messages) -> None:
        assert isinstance(session, ToolbudgetSession)
        report = session.report
        assert report is not None
        assert len(out) == self.trace.requests[i].n_messages
        # Messages the copy shares with the previous one are serialized once.
        memo: dict[int, tuple[Any, bytes]] = {}
        current = []
        for m in out:
            hit = self.seen.get(id(m))
            data = hit[1] if hit is not None and hit[0] is m else orjson.dumps(m)
            memo[id(m)] = (m, data)
            current.append(data)
        self.seen = memo
        if report.staleness_ran:
            self.batches += 1
        else:
            assert current[: len(self.previous)] == self.previous, (self.trace.name, i)
            assert report.prefix_stable, (self.trace.name, i)
        self.previous = current
        self.checked += 1


def test_toolbudget_invariants_hold_on_every_request_of_every_trace(
    traces: list[Trace], tmp_path: Path
) -> None:
    """Input unchanged, byte-stable prefixes outside batches, every replaced byte recoverable."""
    # Durability is not under test here; without fsync the 1,700-odd requests run in seconds.
    toolbudget = strategies.get("toolbudget", fsync=False)
    checked = 0
    for k, trace in enumerate(traces):
        check = _Checker(trace)
        got = replay_trace(trace, toolbudget, tmp_path / str(k), count=_uncounted, on_request=check)
        assert got.requests == check.checked == len(trace.requests)
        assert got.recoverable_chars == got.replaced_chars, trace.name
        # Every batch broke the prefix once, and nothing else did.
        assert got.prefix_breaks == check.batches == got.notes["staleness_batches"], trace.name
        checked += check.checked
    assert checked == sum(len(t.requests) for t in traces) > 1000
