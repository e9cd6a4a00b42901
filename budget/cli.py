"""The ``toolbudget`` command: read back spilled outputs, remove old sessions, run the benchmark."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Annotated

import structlog
import typer

from budget import __version__
from budget._config import BudgetConfig
from budget._errors import BudgetError
from budget._readback import ReadBack
from spill import LocalStore, gc_sessions

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
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )


@app.command()
def read(
    session: Annotated[Path, typer.Argument(help="The session directory.")],
    ref: Annotated[str, typer.Argument(help="The ref named in the envelope.")],
    offset: Annotated[int, typer.Option(help="Lines to skip.")] = 0,
    limit: Annotated[int | None, typer.Option(help="Most lines to print.")] = None,
    grep: Annotated[str | None, typer.Option(help="Only lines matching this pattern.")] = None,
) -> None:
    """Print a spilled output (or some of its lines) exactly as the tool produced it."""
    if not session.is_dir():
        typer.echo(f"error: no session directory at {session}", err=True)
        raise typer.Exit(2)
    try:
        with LocalStore(session, lock_timeout=5.0) as store:
            text = ReadBack(store, BudgetConfig()).read(ref, offset=offset, limit=limit, grep=grep)
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


def main() -> None:
    """Entry point of the ``toolbudget`` console script."""
    app()
