"""Throughput of the bench's engines: traces replayed per second, local against Ray, as N grows.

``python -m benchmarks throughput`` generates the synthetic corpus of :mod:`benchmarks.synthetic`
(``--n 100 --n 1000 ...``, one seed) and replays it under a few strategies (``--strategies``,
default ``none,toolbudget``: the baseline and the library, the two every run has) on each engine
side by side: the local engine (:class:`benchmarks.replay.LocalEngine`, one process) and the Ray
engine (:class:`benchmarks.ray_engine.RayEngine`) on a local cluster of 1 and of 2 workers
(``--workers``). It reports, per N and engine: seconds of replay, traces per second, the speed-up
over the local engine measured in the same run, and whether the replays equal the local engine's
(every field but the timings). Generating the corpus and starting the cluster are timed apart and
not counted in the replay's seconds (the cluster is started once per worker count).

Large corpora are replayed in chunks of ``--chunk`` sessions (generated just before their turn),
so memory holds one chunk at a time; every engine replays the same chunks. ``--budget-s`` stops
adding chunks to a measurement once it has run that long: the figure is then over the sessions
replayed, and the row says how many (an extrapolation to N is marked as one).

It reports and never fails on a figure: a shared or loaded machine gives lower figures, so the
load average is printed with them. Ratios between engines from one run are what to compare.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from benchmarks.ray_engine import RayEngine, import_ray
from benchmarks.replay import Engine, LocalEngine, Replay, build_strategies, jobs_for
from benchmarks.synthetic import iter_generate
from benchmarks.trace import Trace

__all__ = ["Measurement", "command", "main", "measure", "same_replays"]

TIMING_FIELDS = frozenset({"times_s"})
"""The fields of a :class:`Replay` that differ between runs (the rest must be equal)."""


@dataclass(frozen=True, slots=True)
class Measurement:
    """One engine on one corpus size."""

    n: int
    engine: str
    traces: int
    """Sessions replayed (fewer than ``n`` when the time budget stopped it)."""
    replays: int
    seconds: float
    traces_per_s: float
    cluster_start_s: float | None
    identical: bool | None
    """Whether every replay equals the local engine's (timings aside); None for the local one."""


def same_replays(a: Sequence[Replay], b: Sequence[Replay]) -> bool:
    """Whether ``a`` and ``b`` are equal in every field but the timings."""

    def strip(r: Replay) -> dict[str, Any]:
        return {
            f.name: getattr(r, f.name) for f in dataclasses.fields(r) if f.name not in TIMING_FIELDS
        }

    return len(a) == len(b) and all(strip(x) == strip(y) for x, y in zip(a, b, strict=True))


def _chunks(n: int, seed: int, size: int) -> Iterator[list[Trace]]:
    chunk: list[Trace] = []
    for trace in iter_generate(n, seed=seed):
        chunk.append(trace)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _run(
    engine: Engine, n: int, seed: int, names: Sequence[str], chunk: int, budget_s: float | None
) -> tuple[float, int, list[Replay]]:
    """Seconds of replay, sessions replayed, and the replays of the corpus on ``engine``."""
    chosen = build_strategies(names)
    spent = 0.0
    done = 0
    replays: list[Replay] = []
    with tempfile.TemporaryDirectory(prefix="toolbudget-throughput-") as tmp:
        for k, traces in enumerate(_chunks(n, seed, chunk)):
            jobs = jobs_for(traces, chosen, Path(tmp) / f"chunk{k:05d}")
            started = time.perf_counter()
            replays.extend(engine.replay(jobs))
            spent += time.perf_counter() - started
            done += len(traces)
            if budget_s is not None and spent >= budget_s:
                break
    return spent, done, replays


def measure(
    sizes: Sequence[int],
    workers: Sequence[int],
    *,
    seed: int = 0,
    names: Sequence[str] = ("toolbudget",),
    chunk: int = 500,
    budget_s: float | None = None,
    echo: Any = print,
) -> list[Measurement]:
    """Every engine on every size (see the module's docstring)."""
    out: list[Measurement] = []
    ray = import_ray()
    for n in sizes:
        spent, done, local = _run(LocalEngine(), n, seed, names, chunk, budget_s)
        row = Measurement(n, "local", done, len(local), spent, done / spent, None, None)
        echo(_line(row))
        out.append(row)
        for w in workers:
            started = time.perf_counter()
            ray.init(
                address="local",
                num_cpus=w,
                include_dashboard=False,
                logging_level=logging.ERROR,
                log_to_driver=False,
            )
            start_s = time.perf_counter() - started
            try:
                spent, done_ray, replays = _run(RayEngine(), n, seed, names, chunk, budget_s)
            finally:
                ray.shutdown()
            same = same_replays(local[: len(replays)], replays[: len(local)])
            row = Measurement(
                n, f"ray x{w}", done_ray, len(replays), spent, done_ray / spent, start_s, same
            )
            echo(_line(row))
            out.append(row)
    return out


def _line(m: Measurement) -> str:
    start = "" if m.cluster_start_s is None else f", cluster start {m.cluster_start_s:.1f} s"
    same = "" if m.identical is None else f", identical to local: {m.identical}"
    part = "" if m.traces == m.n else f" (of {m.n}: time budget reached)"
    return (
        f"N={m.n:>6} {m.engine:<8} {m.traces:>6} traces{part} in {m.seconds:8.1f} s: "
        f"{m.traces_per_s:7.2f} traces/s{start}{same}"
    )


def table(rows: Sequence[Measurement]) -> str:
    """A Markdown table of ``rows``, with each engine's speed-up over local at the same N."""
    local = {m.n: m.traces_per_s for m in rows if m.engine == "local"}
    lines = [
        "| N | engine | traces replayed | seconds | traces/s | × local | identical |",
        "|---:|---|---:|---:|---:|---:|---|",
    ]
    for m in rows:
        ratio = m.traces_per_s / local[m.n] if local.get(m.n) else None
        lines.append(
            f"| {m.n:,} | {m.engine} | {m.traces:,} | {m.seconds:.1f} | {m.traces_per_s:.2f} | "
            f"{'—' if ratio is None else f'{ratio:.2f}'} | "
            f"{'—' if m.identical is None else ('yes' if m.identical else 'NO')} |"
        )
    return "\n".join(lines)


def main(
    *,
    sizes: Sequence[int] = (100, 1000),
    workers: Sequence[int] = (1, 2),
    seed: int = 0,
    names: Sequence[str] = ("toolbudget",),
    chunk: int = 500,
    budget_s: float | None = None,
    json_path: Path | None = None,
) -> int:
    """Run :func:`measure`, print the table (and write the JSON); 0 whatever the figures."""
    load = os.getloadavg()
    print(
        f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
        f"strategies: none + {', '.join(names)}; seed {seed}"
    )
    rows = measure(sizes, workers, seed=seed, names=names, chunk=chunk, budget_s=budget_s)
    print(table(rows))
    if json_path is not None:
        doc = {
            "cpus": os.cpu_count(),
            "load_average": load,
            "strategies": ["none", *names],
            "seed": seed,
            "rows": [dataclasses.asdict(m) for m in rows],
        }
        json_path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    return 0


def command(
    n: Annotated[
        list[int] | None, typer.Option("--n", min=1, help="Corpus sizes (repeat the option).")
    ] = None,
    workers: Annotated[
        list[int] | None,
        typer.Option("--workers", min=1, help="Ray local-cluster sizes (repeat the option)."),
    ] = None,
    seed: Annotated[int, typer.Option(help="The synthetic corpus's seed.")] = 0,
    strategies: Annotated[
        str, typer.Option(help="Comma-separated strategies besides none.")
    ] = "toolbudget",
    chunk: Annotated[
        int, typer.Option(min=1, help="Sessions generated and replayed at once.")
    ] = 500,
    budget_s: Annotated[
        float | None,
        typer.Option("--budget-s", help="Stop a measurement after this many seconds of replay."),
    ] = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Also write the figures here.")
    ] = None,
) -> None:
    """Traces per second of the bench's engines, local against Ray, on a synthetic corpus."""
    from budget._errors import BudgetError

    try:
        import_ray()
    except BudgetError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    names = [s.strip() for s in strategies.split(",") if s.strip()]
    code = main(
        sizes=n or [100, 1000],
        workers=workers or [1, 2],
        seed=seed,
        names=names,
        chunk=chunk,
        budget_s=budget_s,
        json_path=json_path,
    )
    raise typer.Exit(code)


if __name__ == "__main__":
    from benchmarks._command import run_alone

    run_alone(command, "benchmarks.throughput")
