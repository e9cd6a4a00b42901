"""``toolbudget gc``: remove the sessions not used for a while, in a directory or under a URL."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from budget._errors import BudgetError
from budget._typer import duration
from spill import FsspecStore, gc_sessions
from spill._sessiondir import LOG_NAME

__all__ = ["gc"]


def gc(
    root: Annotated[
        str,
        typer.Argument(help="The directory holding session directories, or their URL (s3://...)."),
    ],
    older_than: Annotated[str, typer.Option(help="Age, like 12h or 7d.")] = "7d",
) -> None:
    """Remove session directories not used for a while (locked ones are left alone)."""
    age = duration(older_than)
    skipped: list[tuple[str, str]] = []

    def skip(path: object, why: str) -> None:
        skipped.append((str(path), why))

    try:
        if "://" in root:
            # Object storage has no lock saying a session is open: age alone decides there.
            removed = [str(p) for p in _gc_urls(root, age, skip)]
        else:
            removed = [str(p) for p in _gc_local(Path(root), age, skip)]
    except BudgetError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    for path in removed:
        typer.echo(f"removed {path}")
    for path, why in skipped:
        typer.echo(f"skipped {path}: {why}", err=True)
    typer.echo(f"{len(removed)} session(s) removed, {len(skipped)} skipped")
    if not removed and "://" not in root and (Path(root) / LOG_NAME).is_file():
        # A session's own log: not a root of them.
        typer.echo(f"note: {root} is a session directory; gc takes the one holding it", err=True)


def _gc_local(root: Path, age: float, skip: Callable[[object, str], None]) -> list[Path]:
    if not root.is_dir():
        # gc_sessions treats a missing root as nothing to do; on the command line it is a typo.
        typer.echo(f"error: no directory at {root}", err=True)
        raise typer.Exit(2)
    return gc_sessions(root, older_than_s=age, now=time.time(), on_skip=skip)


def _gc_urls(root: str, age: float, skip: Callable[[object, str], None]) -> list[str]:
    scheme, _, rest = root.partition("://")
    if scheme.lower() in ("file", "local") and not os.path.isdir(rest):
        # A typo, as for a path: an object store has no directories to be missing.
        typer.echo(f"error: no directory at {root}", err=True)
        raise typer.Exit(2)
    return FsspecStore.gc_sessions(root, older_than_s=age, now=time.time(), on_skip=skip)
