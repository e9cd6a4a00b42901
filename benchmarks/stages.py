"""Where ``prepare()`` adding one round spends its time, stage by stage, in µs of thread CPU.

A sampling profiler's shares (py-spy, pyinstrument) of the +1 round workload weigh a deep stack
of small Python calls above its cost (the token estimate's walk looked like 16% of ``prepare``,
four estimates timed in place are 11%). This times chosen functions in place instead: each is
wrapped (one ``time.thread_time_ns`` pair a call, about 0.2 µs) while the workload of
:mod:`benchmarks.perf_base` runs in this process, and each stage's time per request is reported
beside the request's own. Stages nest (a stage's time includes the stages it calls).

Run::

    python -m benchmarks.stages [--rounds N] [--requests N] [--chars N] [--stage MODULE:NAME]...

A stage is ``module:function`` or ``module:Class.method``, looked up where it is called from
(a function imported by name into another module is wrapped there: name that module).
"""

from __future__ import annotations

import gc
import importlib
import math
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any

import typer

__all__ = ["STAGES", "StageTime", "command", "measure"]

STAGES = (
    "budget.session._pipeline:Pipeline.scan",
    "budget.session._passrun:Passes.decide",
    "budget.session._passrun:Passes._context",
    "budget.passes.cap:spill",
    "budget.passes._context:envelope",
    "budget.passes.cap:weigh",
    "budget.passes._context:stub",
    "budget.session._quotes:Quotes.note",
    "budget.session._bodies:Bodies.materialize",
    "budget.session._outcome:Outcome.request_records",
    "budget.session._copies:Copies.apply",
    "budget.session._history:History.estimate",
    "budget.session._journal:Journal.append",
    "budget.session._tail:Tail.keep",
)
"""The stages of a spilling +1 round request at 800 rounds timed by default."""


@dataclass(frozen=True, slots=True)
class StageTime:
    """One stage's calls and time over the timed requests."""

    stage: str
    calls_per_request: float
    us_per_request: float
    """Mean time a request spent in the stage (all its calls)."""
    median_call_us: float


@contextmanager
def _wrapped(stages: Sequence[str], times: dict[str, list[int]]) -> Iterator[None]:
    """Each stage replaced by a wrapper appending its calls' CPU times, restored on exit."""
    undo: list[Callable[[], None]] = []
    try:
        for stage in stages:
            module_name, _, name = stage.partition(":")
            owner: Any = importlib.import_module(module_name)
            *path, attr = name.split(".")
            for part in path:
                owner = getattr(owner, part)
            original = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)
            setattr(owner, attr, _timing(original, times.setdefault(stage, [])))
            undo.append(partial(setattr, owner, attr, original))
        yield
    finally:
        for restore in reversed(undo):
            restore()


def _timing(func: Callable[..., Any], into: list[int]) -> Callable[..., Any]:
    clock = time.thread_time_ns

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = clock()
        try:
            return func(*args, **kwargs)
        finally:
            into.append(clock() - started)

    return timed


def measure(
    stages: Sequence[str] = STAGES, rounds: int = 800, requests: int = 400, chars: int = 8_000
) -> tuple[float, list[StageTime]]:
    """(the median request's µs, each stage's times) over ``requests`` +1 round requests."""
    from benchmarks.perf import _warm_slot

    per = max(1, min(requests, rounds // 4))
    slots = [
        _warm_slot(rounds, per, chars, fresh_list=False) for _ in range(math.ceil(requests / per))
    ]
    times: dict[str, list[int]] = {}
    total: list[int] = []
    with _wrapped(stages, times):
        gc.collect()
        gc.disable()
        try:
            for i in range(requests):
                call = slots[i // per].step()
                started = time.thread_time_ns()
                call()
                total.append(time.thread_time_ns() - started)
        finally:
            gc.enable()
    for slot in slots:
        slot.session.close()
    return statistics.median(total) / 1e3, [
        StageTime(
            stage,
            len(times[stage]) / requests,
            sum(times[stage]) / requests / 1e3,
            statistics.median(times[stage]) / 1e3 if times[stage] else 0.0,
        )
        for stage in stages
    ]


def command(
    rounds: Annotated[int, typer.Option(help="History length in rounds.")] = 800,
    requests: Annotated[int, typer.Option(help="Timed requests.")] = 400,
    chars: Annotated[int, typer.Option(help="Characters of each tool result.")] = 8_000,
    stage: Annotated[
        list[str] | None, typer.Option(help="module:function or module:Class.method to time.")
    ] = None,
) -> None:
    """``prepare()`` +1 round, the time of each stage per request."""
    median_us, got = measure(stage or STAGES, rounds, requests, chars)
    print(f"prepare +1 round at {rounds:,} rounds: median {median_us:.0f} µs a request")
    for s in got:
        print(
            f"{s.us_per_request:8.1f} µs a request  {s.calls_per_request:4.1f} calls"
            f"  (median call {s.median_call_us:6.1f} µs)  {s.stage}"
        )


if __name__ == "__main__":
    from benchmarks._command import run_alone

    run_alone(command, "benchmarks.stages")
