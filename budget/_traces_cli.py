"""``toolbudget traces``: the public recorded traces behind README's headline figure.

The download itself is :mod:`benchmarks.fetch`, imported when the command runs (as ``bench``
imports the benchmarks): ``import budget.cli`` loads no benchmark code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from budget._errors import BudgetError
from budget._typer import FlagGroup, fail
from spill._paths import refuse_current_dir

__all__ = ["traces_app"]


traces_app = typer.Typer(
    cls=FlagGroup,
    help="The public recorded traces behind README's headline figure.",
    no_args_is_help=True,
)


@traces_app.command("fetch")
def traces_fetch(
    directory: Annotated[Path, typer.Argument(help="Where to put them (created if missing).")],
    source: Annotated[
        str | None,
        typer.Option(help="Fetch from this mirror of the raw-file endpoint instead."),
    ] = None,
) -> None:
    """Download the public trace set (29 files, 16 MB), checking each file's git blob hash.

    From public repositories at pinned commits; a rerun fetches only what is missing or cut off.

    Then: toolbudget bench --traces DIRECTORY
    """
    from benchmarks.fetch import BASE_URL, fetch_traces  # noqa: PLC0415

    try:  # an unset variable would fill the current directory with 29 files
        refuse_current_dir(directory, "directory", "for the traces", "traces")
    except BudgetError as exc:
        fail(str(exc))
    if directory.exists() and not directory.is_dir():
        fail(f"{directory} is a file; name a directory for the traces")
    try:
        done = fetch_traces(directory, base_url=source or BASE_URL, say=typer.echo)
    except BudgetError as exc:
        fail(str(exc))
    got = sum(f.bytes for f in done.fetched)
    typer.echo(
        f"{len(done.fetched)} file(s) fetched ({got:,} bytes), {len(done.present)} already "
        f"there and checked; run: toolbudget bench --traces {directory}"
    )
