"""``prepare()`` adding one round to a long history: this checkout against another one.

Issue 30 asks that a request adding one round at 800 rounds stay within 1.2x of a base commit.
The two checkouts cannot be imported in one interpreter (both are ``budget``), so each runs in
its own worker process (:mod:`benchmarks._perf_worker`, its source run with that checkout first
on the path, timing that checkout's own ``benchmarks.perf`` workload), and the requests are
interleaved one by one, the order alternating, so that load drifts on a shared machine affect
both alike. Each side's figure is the statistic the scaling row of :mod:`benchmarks.perf`
reports: the median CPU time of the requests that ran no staleness batch, or of all of them when
every request ran one; the median of all requests is in ``extra`` as well.

Make the base checkout with ``git worktree add --detach DIR COMMIT``; run::

    python -m benchmarks perf --base DIR          # a row of the perf table (bench_against_base)
    python -m benchmarks.perf_base DIR [--rounds N] [--requests N] [--chars N]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Annotated

import typer

__all__ = ["TARGET", "BaseTimes", "command", "measure"]

TARGET = 1.2
"""Issue 30: ``prepare`` +1 round at 800 rounds within 1.2x of the base commit."""
_HERE = Path(__file__).resolve().parents[1]
_WORKER = Path(__file__).with_name("_perf_worker.py")


def _start(tree: Path, rounds: int, requests: int, chars: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    args = [sys.executable, "-c", _WORKER.read_text(), str(rounds), str(requests), str(chars)]
    return subprocess.Popen(
        args, cwd=tree, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


def _ask(proc: subprocess.Popen[str]) -> tuple[int, bool]:
    stdin, stdout = _pipes(proc)
    stdin.write("go\n")
    stdin.flush()
    cpu, batch = stdout.readline().split()
    return int(cpu), batch == "1"


def _pipes(proc: subprocess.Popen[str]) -> tuple[IO[str], IO[str]]:
    if proc.stdin is None or proc.stdout is None:  # pragma: no cover - started with both pipes
        raise RuntimeError("worker started without pipes")
    return proc.stdin, proc.stdout


def _figure_us(times: list[tuple[int, bool]]) -> float:
    """The scaling row's statistic: the median of the requests without a batch, else of all."""
    plain = [cpu for cpu, batch in times if not batch]
    return statistics.median(plain or [cpu for cpu, _ in times]) / 1e3


@dataclass(frozen=True, slots=True)
class BaseTimes:
    """The medians of one interleaved run (µs of thread CPU time per request)."""

    ours_us: float
    """This checkout's scaling-row statistic (see the module)."""
    base_us: float
    ours_all_us: float
    """The median of all requests, batch or not."""
    base_all_us: float
    ours_batches: int
    """Requests that ran a staleness batch."""
    base_batches: int

    @property
    def times_base(self) -> float:
        """How many times the base's time ours is (issue 30: at most :data:`TARGET`)."""
        return self.ours_us / self.base_us


def measure(
    base: Path, rounds: int = 800, requests: int = 120, result_chars: int = 8_000
) -> BaseTimes:
    """The +1-round ``prepare()`` of this checkout and of ``base``, interleaved (see module)."""
    trees = {"ours": _HERE, "base": base.resolve()}
    procs = {side: _start(tree, rounds, requests, result_chars) for side, tree in trees.items()}
    times: dict[str, list[tuple[int, bool]]] = {side: [] for side in trees}
    try:
        for proc in procs.values():
            ready = _pipes(proc)[1].readline().strip()
            if ready != "ready":
                raise RuntimeError(f"a perf worker did not start (in {trees}): {ready!r}")
        for i in range(requests):
            for side in ("ours", "base") if i % 2 == 0 else ("base", "ours"):
                times[side].append(_ask(procs[side]))
    finally:
        for proc in procs.values():
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=60)
    every = {side: statistics.median(c for c, _ in t) / 1e3 for side, t in times.items()}
    return BaseTimes(
        ours_us=_figure_us(times["ours"]),
        base_us=_figure_us(times["base"]),
        ours_all_us=every["ours"],
        base_all_us=every["base"],
        ours_batches=sum(b for _, b in times["ours"]),
        base_batches=sum(b for _, b in times["base"]),
    )


def command(
    base: Annotated[Path, typer.Argument(help="The other checkout (git worktree add --detach).")],
    rounds: Annotated[int, typer.Option(help="History length in rounds.")] = 800,
    requests: Annotated[int, typer.Option(help="Timed requests on each side.")] = 120,
    chars: Annotated[int, typer.Option(help="Characters of each tool result.")] = 8_000,
) -> None:
    """``prepare()`` +1 round, this checkout against another, interleaved."""
    t = measure(base, rounds, requests, chars)
    print(
        f"prepare +1 round at {rounds:,} rounds: ours {t.ours_us:.0f} µs, base {t.base_us:.0f} µs:"
        f" {t.times_base:.2f}× (target ≤ {TARGET}×)"
    )
    print(
        f"all requests: ours {t.ours_all_us:.0f} µs ({t.ours_batches} with a batch), base "
        f"{t.base_all_us:.0f} µs ({t.base_batches}): {t.ours_all_us / t.base_all_us:.2f}×"
    )


if __name__ == "__main__":
    from benchmarks._command import run_alone

    run_alone(command, "benchmarks.perf_base")
