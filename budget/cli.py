"""The ``toolbudget`` command: read back spilled outputs, remove old sessions, run the benchmark."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Annotated, TextIO, cast

import structlog
import typer

from budget import __version__
from budget._config import BudgetConfig
from budget._errors import BudgetError
from budget._readback import ReadBack
from spill import gc_sessions
from spill._readonly import ReadOnlyStore

app = typer.Typer(
    name="toolbudget",
    help="Keep an LLM agent's tool results inside its context budget, losing nothing.",
    no_args_is_help=True,
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"toolbudget {__version__}")
        raise typer.Exit


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log every decision.")] = False,
) -> None:
    level = logging.DEBUG if verbose else logging.WARNING
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(cast("TextIO", _Stderr())),
    )


class _Stderr:
    """Whatever ``sys.stderr`` is when an event is written (test runners swap and close it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


@app.command()
def read(
    session: Annotated[Path, typer.Argument(help="The session directory.")],
    ref: Annotated[str, typer.Argument(help="The ref named in the envelope.")],
    offset: Annotated[int, typer.Option(help="Lines to skip.")] = 0,
    limit: Annotated[int | None, typer.Option(help="Most lines to print.")] = None,
    grep: Annotated[str | None, typer.Option(help="Only lines matching this pattern.")] = None,
) -> None:
    """Print a spilled output (or some of its lines) exactly as the tool produced it.

    With --grep, each matching line is printed after its line number and a tab, as the read-back
    tool shows it to the model. Reading takes no lock and writes nothing: it works beside the
    agent that has the session open.
    """
    try:
        with ReadOnlyStore(session) as store:
            reader = ReadBack(store, BudgetConfig())
            if grep is None:
                text = reader.read(ref, offset=offset, limit=limit)
            else:
                chosen, _ = reader.lines(ref, offset=offset, limit=limit, grep=grep)
                text = "".join(f"{n:>6}\t{line.removesuffix(chr(10))}\n" for n, line in chosen)
    except BudgetError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    sys.stdout.write(text)


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _duration(text: str) -> float:
    unit = text[-1:]
    if unit in _UNITS and text[:-1].replace(".", "", 1).isdigit():
        return float(text[:-1]) * _UNITS[unit]
    raise typer.BadParameter(f"{text!r} is not a duration like 30m, 12h or 7d")


@app.command()
def gc(
    root: Annotated[Path, typer.Argument(help="The directory holding session directories.")],
    older_than: Annotated[str, typer.Option(help="Age, like 12h or 7d.")] = "7d",
) -> None:
    """Remove session directories not used for a while (locked ones are left alone)."""
    removed = gc_sessions(root, older_than_s=_duration(older_than), now=time.time())
    for path in removed:
        typer.echo(f"removed {path}")
    typer.echo(f"{len(removed)} session(s) removed")


@app.command()
def bench(
    traces: Annotated[
        Path | None,
        typer.Option(
            help="A directory of recorded traces (any supported format, searched recursively). "
            "Without it, the built-in sessions are recorded on this machine and replayed."
        ),
    ] = None,
    strategies: Annotated[
        str | None,
        typer.Option(help="Comma-separated strategy names (default: all). 'none' always runs."),
    ] = None,
    window: Annotated[
        int, typer.Option(min=1, help="Context window in tokens: overflows are counted above it.")
    ] = 128_000,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Write every figure to this JSON file.")
    ] = None,
    plots: Annotated[
        Path | None, typer.Option(help="Write PNG charts into this directory.")
    ] = None,
    limit: Annotated[
        int | None, typer.Option(min=1, help="Replay only the first N traces (sorted by path).")
    ] = None,
) -> None:
    """Replay recorded agent traces under toolbudget and other agents' strategies, side by side."""
    # Imported here: the benchmarks (and matplotlib, langchain) are not needed by other commands.
    from rich.console import Console  # noqa: PLC0415

    from benchmarks import strategies as registry  # noqa: PLC0415
    from benchmarks.importers import Skipped, load_dir  # noqa: PLC0415
    from benchmarks.recorder import record_builtin  # noqa: PLC0415
    from benchmarks.report import render, run_bench, write_json, write_plots  # noqa: PLC0415

    names = registry.names()
    if strategies is not None:
        names = [n.strip() for n in strategies.split(",") if n.strip()]
        unknown = [n for n in names if n not in registry.STRATEGIES]
        if unknown or not names:
            typer.echo(
                f"error: unknown strategy {', '.join(unknown) or '(none given)'}; "
                f"known: {', '.join(registry.names())}",
                err=True,
            )
            raise typer.Exit(2)
    console = Console()
    if not console.is_terminal:
        # Piped or captured: rich would fold the 13 columns into 80; keep every figure readable.
        console = Console(width=max(console.width, 160))
    err = Console(stderr=True)
    try:
        if traces is None:
            skipped: list[Skipped] = []
            with err.status("recording the built-in sessions…"):
                found = record_builtin()
        else:
            found, skipped = load_dir(traces)
        if limit is not None:
            found = found[:limit]
        if not found:
            typer.echo(f"error: no trace found under {traces}", err=True)
            raise typer.Exit(2)
        result = run_bench(found, names, skipped=skipped, window=window, console=err)
    except BudgetError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    render(result, console)
    if json_path is not None:
        write_json(result, json_path)
        console.print(f"wrote {json_path}")
    if plots is not None:
        for path in write_plots(result, plots):
            console.print(f"wrote {path}")


def main() -> None:
    """Entry point of the ``toolbudget`` console script."""
    app()
