"""``python -m benchmarks perf|soak|store-perf|object-store|proxy|synthetic-shape|throughput|tokens``:
the benchmarks' one command line.

Each command loads its benchmark module only when it runs, so ``python -m benchmarks tokens``
does not import the soak or the perf suite. ``python -m benchmarks.perf`` (and ``.soak``,
``.store_perf``, ``.object_store``, ``.tokens``) still work: they run the same command on its
own (:func:`alias`).
``toolbudget bench`` (the savings comparison users run) lives in ``budget/cli.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = ["COMMANDS", "alias", "app", "main"]

app = typer.Typer(
    name="python -m benchmarks",
    help="toolbudget's benchmarks: speed, crash soak, session and object stores, engines, tokens.",
    no_args_is_help=True,
    add_completion=False,
)


def perf(
    quick: Annotated[bool, typer.Option(help="Smaller sizes, under a minute.")] = False,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Also write the figures here.")
    ] = None,
    traces: Annotated[
        Path | None, typer.Option(help="Recorded traces (default ../shared/traces).")
    ] = None,
    workdir: Annotated[Path | None, typer.Option("--dir", help="Where to create sessions.")] = None,
) -> None:
    """Performance against SPEC §10's numbers, side by side with LangChain."""
    from benchmarks import perf as module

    raise typer.Exit(module.main(quick=quick, json_path=json_path, traces=traces, workdir=workdir))


class Kill(StrEnum):
    """How the soak kills a session: at a numbered store call, or after a random delay."""

    ops = "ops"
    timer = "timer"


def soak(
    trials: Annotated[int, typer.Option(min=1)] = 200,
    seed: Annotated[int, typer.Option()] = 1,
    rounds: Annotated[int, typer.Option(min=8)] = 40,
    max_crashes: Annotated[int, typer.Option(min=1)] = 3,
    kill: Annotated[Kill, typer.Option()] = Kill.ops,
    workdir: Annotated[
        str | None, typer.Option(help="Where sessions go (default: a temp dir).")
    ] = None,
    real_fsync: Annotated[bool, typer.Option(help="Perform fsync calls too.")] = False,
    keep: Annotated[bool, typer.Option(help="Keep each trial's session directory.")] = False,
    phase: Annotated[
        str | None,
        typer.Option(help="Draw each first kill among this store method's calls (e.g. put_many)."),
    ] = None,
    json_path: Annotated[
        str | None, typer.Option("--json", help="Also write the figures to this JSON file.")
    ] = None,
    quiet: Annotated[bool, typer.Option()] = False,
) -> None:
    """Crash soak: SIGKILL a session at random points, resume, compare every byte."""
    from benchmarks import soak as module

    code = module.main(
        trials=trials,
        seed=seed,
        rounds=rounds,
        max_crashes=max_crashes,
        kill=kill.value,
        workdir=workdir,
        real_fsync=real_fsync,
        keep=keep,
        phase=phase,
        json_path=json_path,
        quiet=quiet,
    )
    raise typer.Exit(code)


def store_perf(
    repeat: Annotated[int, typer.Option(help="Runs per figure.")] = 7,
    workdir: Annotated[
        Path | None, typer.Option("--dir", help="Where to create the sessions.")
    ] = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Also write the figures here.")
    ] = None,
) -> None:
    """Session-store performance: resume from the decision log, and spill throughput."""
    from benchmarks import store_perf as module

    raise typer.Exit(module.main(repeat=repeat, workdir=workdir, json_path=json_path))


def object_store(
    repeat: Annotated[int, typer.Option(min=1, help="Runs per figure.")] = 5,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Also write the figures here.")
    ] = None,
) -> None:
    """Object-store sessions (FsspecStore on moto's S3 on loopback) beside LocalStore."""
    from benchmarks import object_store as module

    raise typer.Exit(module.main(repeat=repeat, json_path=json_path))


def tokens(
    traces: Annotated[Path | None, typer.Option(help="Traces directory.")] = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Write the results here.")
    ] = None,
) -> None:
    """Accuracy of the token estimates against the usage the recorded traces report."""
    from benchmarks import tokens as module

    if traces is None:
        raise typer.Exit(module.main(json_path=json_path))
    raise typer.Exit(module.main(traces_dir=traces, json_path=json_path))


def throughput(
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
    from benchmarks import throughput as module
    from benchmarks.ray_engine import import_ray
    from budget._errors import BudgetError

    try:
        import_ray()
    except BudgetError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    names = [s.strip() for s in strategies.split(",") if s.strip()]
    code = module.main(
        sizes=n or [100, 1000],
        workers=workers or [1, 2],
        seed=seed,
        names=names,
        chunk=chunk,
        budget_s=budget_s,
        json_path=json_path,
    )
    raise typer.Exit(code)


def synthetic_shape(
    traces: Annotated[
        Path | None, typer.Option(help="Recorded traces (default ../shared/traces).")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Where to write the table (default: print it)."),
    ] = None,
) -> None:
    """Fit the synthetic corpus's table of summary statistics to recorded traces."""
    import orjson

    from benchmarks import synthetic
    from benchmarks.importers import load_dir

    found, _ = load_dir(traces if traces is not None else Path("../shared/traces"))
    if not found:
        typer.echo(f"error: no trace found under {traces}", err=True)
        raise typer.Exit(2)
    data = orjson.dumps(synthetic.fit(found), option=orjson.OPT_INDENT_2) + b"\n"
    if out is None:
        sys.stdout.write(data.decode())
    else:
        out.write_bytes(data)
        typer.echo(f"wrote {out} ({len(found)} traces)")


def proxy(
    rounds: Annotated[str, typer.Option(help="Conversation sizes, comma-separated.")] = "50,800",
    memory_requests: Annotated[int, typer.Option(min=100)] = 1_000,
    stream_rounds: Annotated[int, typer.Option(min=1)] = 100,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Also write the figures here.")
    ] = None,
) -> None:
    """The proxy's added latency, first streamed byte and memory, against direct calls."""
    from benchmarks import proxy as module

    sizes = [int(r) for r in rounds.split(",") if r.strip()]
    raise typer.Exit(
        module.main(
            rounds=sizes,
            json_path=json_path,
            memory_requests=memory_requests,
            stream_rounds=stream_rounds,
        )
    )


COMMANDS: dict[str, Callable[..., Any]] = {
    "perf": perf,
    "soak": soak,
    "store-perf": store_perf,
    "synthetic-shape": synthetic_shape,
    "throughput": throughput,
    "object-store": object_store,
    "proxy": proxy,
    "tokens": tokens,
}
"""The commands by name, as typed after ``python -m benchmarks``."""

for _name, _command in COMMANDS.items():
    app.command(_name)(_command)


def alias(name: str) -> None:
    """Run command ``name`` alone on ``sys.argv``, for ``python -m benchmarks.<module>``."""
    single = typer.Typer(add_completion=False)
    single.command()(COMMANDS[name])
    single(args=sys.argv[1:], prog_name=f"python -m benchmarks.{name.replace('-', '_')}")


def main() -> None:
    """Entry point of ``python -m benchmarks``."""
    app()
