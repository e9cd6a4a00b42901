"""The ``toolbudget`` command: read back spilled outputs, remove old sessions, run the benchmark."""

from __future__ import annotations

import errno
import functools
import logging
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO, cast

import structlog
import typer

from budget import __version__, _proxy_command
from budget._config import config_reading
from budget._errors import BudgetError
from budget._gc_cli import gc
from budget._readback import ReadBack
from budget._traces_cli import traces_app
from budget._typer import FlagGroup, fail, writing_stdout
from spill._readonly import open_read_only

if TYPE_CHECKING:
    from rich.console import Console

    from benchmarks.importers import Skipped
    from benchmarks.replay import Engine
    from benchmarks.settings import BenchSettings
    from benchmarks.trace import Trace

READ_SETTINGS = ("read_page_chars", "read_tool_name")
"""The settings ``toolbudget read`` uses (the read-back's page size, the tool's name)."""

DEFAULT_BENCH_WINDOW = 128_000
"""A ``--window`` under this adds the compacting strategies (by default: each model's window)."""

app = typer.Typer(
    cls=FlagGroup,
    name="toolbudget",
    help="Keep an LLM agent's tool results inside its context budget, losing nothing.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(traces_app, name="traces")  # toolbudget traces fetch: budget/_traces_cli.py


def _version(value: bool) -> None:
    if value:
        typer.echo(f"toolbudget {__version__}")
        raise typer.Exit


@_proxy_command.with_proxy(app).callback()  # adds toolbudget proxy
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
    session: Annotated[str, typer.Argument(help="The session directory, or its URL.")],
    ref: Annotated[str, typer.Argument(help="The ref named in the envelope.")],
    offset: Annotated[int, typer.Option(help="Lines to skip.")] = 0,
    limit: Annotated[int | None, typer.Option(help="Most lines to print.")] = None,
    grep: Annotated[str | None, typer.Option(help="Only lines matching this regex.")] = None,
) -> None:
    """Print a spilled output (or some of its lines) exactly as the tool produced it.

    With --grep, each matching line is printed after its line number and a tab, as the read-back
    tool shows it to the model. Reading takes no lock and writes nothing: it works beside the
    agent that has the session open.
    """
    try:
        with open_read_only(session) as store:
            # Only what reading uses: a bad TOOLBUDGET_RESULT_CAP must not stop a read.
            reader = ReadBack(store, config_reading(READ_SETTINGS))
            if grep is None:
                text = reader.read(ref, offset=offset, limit=limit)
            else:
                chosen, _ = reader.lines(ref, offset=offset, limit=limit, grep=grep)
                text = "".join(f"{n:>6}\t{line.removesuffix(chr(10))}\n" for n, line in chosen)
            if not text and offset > 0 and offset >= (total := reader.lines(ref)[1]):
                # An empty print would read as an empty output: say the offset is past its end.
                typer.echo(f"note: --offset {offset} is past the end ({total} lines)", err=True)
    except BudgetError as exc:
        fail(str(exc))
    with writing_stdout():
        _write_exactly(text)


def _write_exactly(text: str) -> None:
    """Print ``text`` as it was stored, whatever it holds: the stream's own encoding where it can
    (undecodable bytes kept as surrogates come back as those bytes), else UTF-8 with each lone
    surrogate as its code point's bytes (a JSON string cut in the middle of an emoji holds one),
    where a plain write would raise and print nothing."""
    out = sys.stdout
    if out is None:  # started with descriptor 1 closed
        raise OSError(errno.EBADF, "it is closed")
    try:
        out.write(text)
        return
    except UnicodeEncodeError:
        pass
    out.flush()
    out.buffer.write(text.encode("utf-8", "surrogatepass"))
    out.buffer.flush()


app.command()(gc)  # budget/_gc_cli.py


# ``toolbudget bench``'s options, as module-level ``Annotated`` aliases (typer's docs,
# "CLI Options with Help") so that the command's signature reads as a list of its inputs.
_Traces = Annotated[
    Path | None,
    typer.Option(
        "--traces",
        help="A directory of recorded traces (any supported format, searched recursively). "
        "Without it, the built-in sessions are recorded on this machine and replayed.",
    ),
]
_Strategies = Annotated[
    str | None,
    typer.Option(
        "--strategies",
        help="Comma-separated strategy names (default: all). 'none' always runs.",
    ),
]
_Window = Annotated[
    int | None,
    typer.Option(
        "--window",
        min=1,
        help="Context window in tokens for every trace (default: each trace's recorded model's, "
        "as a session resolves it); overflows count above it. Under 128000 the compacting "
        "strategies run too (toolbudget-compact, langchain-summary, claude-code-compact).",
    ),
]
_JsonPath = Annotated[
    Path | None,
    typer.Option("--json", help="Write every figure to this JSON file (its directory must exist)."),
]
_Plots = Annotated[
    Path | None,
    typer.Option("--plots", help="Write PNG charts into this directory (created if missing)."),
]
_Limit = Annotated[
    int | None,
    typer.Option(
        "--limit",
        min=1,
        help="Replay only the first N traces (sorted by path; of --generate's, the first N).",
    ),
]
_Wide = Annotated[
    bool,
    typer.Option(
        "--wide", help="Every column of the table, however wide the terminal (default: fit)."
    ),
]
_Engine = Annotated[
    str,
    typer.Option(
        "--engine", help="Where the replays run: local (this process) or ray (one task each)."
    ),
]
_Address = Annotated[
    str | None,
    typer.Option(
        "--address", help="--engine ray: the cluster to join (default: start a local one)."
    ),
]
_Workers = Annotated[
    int | None,
    typer.Option(
        "--workers", min=1, help="--engine ray: CPUs of the local cluster (default: all)."
    ),
]
_Generate = Annotated[
    int | None,
    typer.Option(
        "--generate", min=1, help="Replay N synthetic sessions shaped like the public traces."
    ),
]
_Seed = Annotated[int, typer.Option("--seed", help="--generate: the corpus's seed.")]
_Set = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="KEY=VALUE",
        help="A toolbudget setting for this run (repeatable; wins over TOOLBUDGET_* variables).",
    ),
]


@app.command()
def bench(
    traces: _Traces = None,
    strategies: _Strategies = None,
    window: _Window = None,
    json_path: _JsonPath = None,
    plots: _Plots = None,
    limit: _Limit = None,
    wide: _Wide = False,
    engine: _Engine = "local",
    address: _Address = None,
    workers: _Workers = None,
    generate: _Generate = None,
    seed: _Seed = 0,
    sets: _Set = None,
) -> None:
    """Replay recorded agent traces under toolbudget and other agents' strategies, side by side."""
    # Imported here: the benchmarks (and matplotlib, langchain) are not needed by other commands.
    from rich.console import Console  # noqa: PLC0415

    from benchmarks.report import render, run_bench, written_first  # noqa: PLC0415

    names = _chosen_strategies(strategies, window)
    settings = _bench_settings(sets, window)
    # Every argument is checked before the replay, which can take minutes: fail now, not after.
    _check_arguments(json_path, plots, traces)
    names = _runnable(names)
    console = _table_console(Console, wide=wide)
    err = Console(stderr=True)
    runner = _bench_engine(engine, address, workers)
    skipped: list[Any] = []
    try:
        if generate is not None:
            found = _generated(generate, seed, traces, limit, err)
        else:
            found, skipped = _load_traces(traces, limit, json_path, err)
        result = run_bench(
            found,
            names,
            skipped=skipped,
            window=window,
            console=err,
            engine=runner,
            settings=settings,
        )
    except BudgetError as exc:
        fail(str(exc))
    paths, failed = written_first(result, json_path, plots)
    with writing_stdout():
        render(result, console, wide=wide)
        for path in paths:
            console.print(f"wrote {path}", markup=False)  # a path the user typed, not markup
    if failed is not None:
        fail(failed)
    _exit_if_ours_failed(result.skipped)


def _exit_if_ours_failed(skipped: Sequence[Skipped]) -> None:
    """Exit 1, after the figures, when toolbudget's own replay failed on some trace."""
    ours = sorted({s.path for s in skipped if (s.strategy or "").startswith("toolbudget")})
    if ours:
        # A peer that cannot take a trace is the peer's limit; toolbudget failing is our defect:
        # the figures above leave those traces out, and the run must not pass for a clean one.
        typer.echo(
            f"error: toolbudget's own replay failed on {len(ours)} trace(s), left out of every "
            f"figure above: {', '.join(ours[:5])}{' …' if len(ours) > 5 else ''}",
            err=True,
        )
        raise typer.Exit(1)


def _bench_settings(sets: list[str] | None, window: int | None) -> BenchSettings:
    """toolbudget's settings for the run (:func:`benchmarks.settings.resolve`), read now, when
    the command runs: a bad ``--set`` or ``TOOLBUDGET_*`` value is one line and exit code 2."""
    from benchmarks.settings import resolve  # noqa: PLC0415

    try:
        return resolve(sets or (), window=window)
    except BudgetError as exc:
        fail(str(exc))


def _chosen_strategies(strategies: str | None, window: int | None) -> list[str]:
    """The strategy names ``--strategies`` gives (all by default, with the compacting ones under
    a window small enough to force compaction); exits on an unknown one."""
    from benchmarks import strategies as registry  # noqa: PLC0415

    known = [*registry.names(), *registry.compacting_names()]
    if strategies is None:
        names = registry.names()
        if window is not None and window < DEFAULT_BENCH_WINDOW:
            names += registry.compacting_names()
        return names
    names = [n.strip() for n in strategies.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        fail(f"unknown strategy {', '.join(unknown) or '(none given)'}; known: {', '.join(known)}")
    return names


def _runnable(names: list[str]) -> list[str]:
    """The strategies whose extra is installed; each other one is skipped with a line why."""
    from benchmarks import strategies as registry  # noqa: PLC0415

    runnable = []
    for name in names:
        why = registry.missing(name)
        if why is None:
            runnable.append(name)
        else:
            typer.echo(f"skipping {name}: {why}", err=True)
    return runnable


def _load_traces(
    traces: Path | None, limit: int | None, json_path: Path | None, err: Any
) -> tuple[list[Any], list[Any]]:
    """(the traces to replay, the files skipped): recorded here without ``--traces``; exits
    when ``--json`` names one of those traces' files (the JSON would overwrite it)."""
    from benchmarks.importers import load_dir  # noqa: PLC0415
    from benchmarks.recorder import record_builtin  # noqa: PLC0415

    if traces is None:
        skipped: list[Skipped] = []
        with err.status("recording the built-in sessions…"):
            found = record_builtin()
    else:
        found, skipped = load_dir(traces)
        if json_path is not None and json_path.exists():
            clobbered = next((t for t in found if json_path.samefile(traces / t.path)), None)
            if clobbered is not None:
                where = f"the trace {clobbered.path} under --traces"
                fail(f"--json {json_path} is {where}; name another file")
    for s in skipped:
        # Most reasons name their file first (the JSON keeps them whole): once is enough here.
        why = s.reason if traces is None else s.reason.removeprefix(f"{traces / s.path}: ")
        typer.echo(f"skipped {s.path}: {why}", err=True)
    if limit is not None:
        found = found[:limit]
    if not found:
        why = f" ({len(skipped)} file(s) skipped, reasons above)" if skipped else ""
        fail(f"no trace found under {traces}{why}")
    return found, skipped


def _bench_engine(name: str, address: str | None, workers: int | None) -> Engine:
    """The engine ``--engine`` names, its options checked before anything runs."""
    from benchmarks.replay import LocalEngine  # noqa: PLC0415

    if name == "local":
        if address is not None or workers is not None:
            fail("--address and --workers are options of --engine ray")
        return LocalEngine()
    if name != "ray":
        fail(f"unknown engine {name!r}; known: local, ray")
    from benchmarks.ray_engine import RayEngine, import_ray  # noqa: PLC0415

    try:
        import_ray()
        return RayEngine(address=address, workers=workers)
    except BudgetError as exc:
        fail(str(exc))


def _generated(
    n: int, seed: int, traces: Path | None, limit: int | None, err: Console
) -> list[Trace]:
    """``--generate N``: the synthetic corpus of ``seed`` (:mod:`benchmarks.synthetic`)."""
    from benchmarks.synthetic import generate  # noqa: PLC0415

    if traces is not None:
        fail("--generate replaces --traces: give one of them")
    if limit is not None:
        n = min(n, limit)  # the corpus's first sessions: generate(n) is a prefix of a larger one
    with err.status(f"generating {n:,} synthetic sessions (seed {seed})…"):
        return generate(n, seed=seed)


def _check_arguments(json_path: Path | None, plots: Path | None, traces: Path | None) -> None:
    """Refuse a missing traces directory and unwritable outputs before anything runs or is said."""
    if traces is not None and not traces.is_dir():
        fail(f"traces directory {traces} does not exist or is not a directory")
    if json_path is not None:
        if json_path.is_dir():
            fail(f"--json {json_path} is a directory; name a file")
        if not json_path.parent.is_dir():
            # Refused rather than created: a typo in the path should not leave directories behind.
            fail(f"--json {json_path}: no directory {json_path.parent} (create it first)")
        # As --plots: a file or directory that takes no write would fail after the whole replay.
        where = json_path if json_path.exists() else json_path.parent
        if not os.access(where, os.W_OK):
            fail(f"--json {json_path}: cannot write {where}")
    if plots is not None:
        if plots.exists() and not plots.is_dir():
            fail(f"--plots {plots} is a file; name a directory for the PNG charts")
        # Created if missing: where it would be made must be a directory that takes new files,
        # or the charts fail after the whole replay.
        base = next(p for p in (plots, *plots.parents) if p.exists())
        if not base.is_dir():
            fail(f"--plots {plots}: {base} is a file, not a directory")
        if not os.access(base, os.W_OK | os.X_OK):
            fail(f"--plots {plots}: cannot write in {base}")
        try:
            import matplotlib  # noqa: F401, PLC0415
        except ImportError:
            fail("--plots needs matplotlib: pip install 'toolbudget[bench]' (or matplotlib itself)")


def _table_console(console_type: type[Console], *, wide: bool) -> Console:
    """Standard output's console: the terminal's width (or ``COLUMNS``), unbounded when piped."""
    console = console_type()
    if wide or (not console.is_terminal and "COLUMNS" not in os.environ):
        # Nothing folds a pipe: keep every column whole (rich would otherwise assume 80).
        console = console_type(width=max(console.width, 400))
    return console


def main() -> None:
    """Entry point of the ``toolbudget`` console script."""
    # A warning the user can act on (TOOLBUDGET_X names no setting) is one line, once: not
    # Python's file, line and source of the library code that noticed it, once per caller.
    warnings.showwarning = _warning_line
    app()


def _warning_line(message: Warning | str, *_where: object, **_kw: object) -> None:
    _warn_once(str(message))


@functools.cache  # once per text: the libraries' own filters can outrank a "once" filter
def _warn_once(text: str) -> None:
    typer.echo(f"warning: {text}", err=True)
