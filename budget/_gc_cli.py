"""``toolbudget gc``: remove the sessions not used for a while, in a directory or under a URL."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Annotated

import typer

from budget._errors import BudgetError
from budget._typer import duration, fail, writing_stdout
from spill import FsspecStore, gc_sessions
from spill._objfs import local_dir
from spill._sessiondir import LOG_NAME

__all__ = ["gc"]


def gc(
    root: Annotated[
        str,
        typer.Argument(help="The directory holding session directories, or their URL (s3://...)."),
    ],
    older_than: Annotated[str, typer.Option(help="Age, like 12h or 7d.")] = "7d",
) -> None:
    """Remove session directories not used for a while (locked ones are left alone).

    Object storage has no lock to say a session is open: there (s3://...) age alone decides, so
    give --older-than longer than any pause of a live agent.
    """
    age = duration(older_than)
    url = "://" in root
    skipped: list[tuple[str, str]] = []

    def skip(path: object, why: str) -> None:
        skipped.append((str(path), why))

    try:
        where = local_dir(root) if url else Path(root)  # "" is ".", which gc_sessions refuses
        if where is not None and not os.path.isdir(where):
            # The collectors take a missing root for nothing to do; on the command line it is a
            # typo (an object store has no directory to be missing).
            fail(f"no directory at {root}")
        now = time.time()
        if url:
            # Object storage has no lock saying a session is open: age alone decides there.
            removed = FsspecStore.gc_sessions(root, older_than_s=age, now=now, on_skip=skip)
        else:
            found = gc_sessions(Path(root), older_than_s=age, now=now, on_skip=skip)
            removed = [str(p) for p in found]
    except BudgetError as exc:
        fail(str(exc))
    with writing_stdout():
        for path in removed:
            typer.echo(f"removed {path}")
        for path, why in skipped:
            typer.echo(f"skipped {path}: {why}", err=True)
        typer.echo(f"{len(removed)} session(s) removed, {len(skipped)} skipped")
    if not removed and not url and (Path(root) / LOG_NAME).is_file():
        # A session's own log: not a root of them.
        typer.echo(f"note: {root} is a session directory; gc takes the one holding it", err=True)
