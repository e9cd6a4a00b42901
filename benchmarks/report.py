"""What ``toolbudget bench`` shows: a progress bar, terminal tables, a JSON file, PNG charts.

The JSON file is ``{"summary": [...], "traces": [...], "skipped": [...], "bound": {...},
"calibration": [...], "oracle": {...}, "settings": {...}, "attribution": {...},
"previews": {...}}``: one summary
object per strategy over all traces (exactly :data:`benchmarks.replay.ROW_KEYS`), one object per
trace and strategy (the same keys plus ``trace``, ``file`` and ``format``), the files or traces
under the traces directory that were not scored (``path``, ``reason``), ``bound``: the hindsight
bound of :mod:`benchmarks.bound` (``protect_rounds``, ``billed_tokens``, ``billed_ratio`` over
``none``, ``shares``: each strategy's ``(1 - ratio) / (1 - bound)``, and ``traces``: the bound per
trace), for each trace with recorded usage the baseline's simulated cache against the recording
(:class:`benchmarks.calibration.Calibration`), ``oracle``: the hindsight oracle of
:mod:`benchmarks.oracle` (overall, per format and per trace, with each strategy's share of its
saving), ``settings``: toolbudget's effective settings and their sources
(:mod:`benchmarks.settings`), and ``attribution``: where ``none``'s and toolbudget's billed
tokens go (:mod:`benchmarks.attribution`), and ``previews``: the preview hit rate per shape
(:mod:`benchmarks.previews`). A figure that has no value is ``null``.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import signal
import stat
import string
import tempfile
import textwrap
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson
import structlog
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from benchmarks._count import Counter as TokenCounter
from benchmarks._count import counter_for
from benchmarks._table import report_table
from benchmarks.attribution import AGE_BUCKETS, EXTRA_ROWS, SIZE_BUCKETS, Attribution, combine
from benchmarks.bound import PROTECT_ROUNDS, PROTECT_TURNS, bound_billed, share_of_saving
from benchmarks.calibration import Calibration, calibrate, calibration_table
from benchmarks.importers import Skipped
from benchmarks.oracle import OracleTrace, oracle_trace
from benchmarks.oracle import summary as oracle_summary
from benchmarks.previews import PreviewHits, preview_hits, previews_table
from benchmarks.replay import (
    BASELINE,
    DEFAULT_WINDOW,
    RECENT_ROUNDS,
    Engine,
    Replay,
    Row,
    build_strategies,
    run,
    summarize,
    summarize_by_format,
    trace_rows,
    trace_window,
)
from benchmarks.settings import BenchSettings, resolve
from benchmarks.trace import Trace
from budget._errors import BudgetError, InputError

__all__ = ["BenchResult", "as_json", "render", "run_bench", "write_json", "write_plots"]


@dataclass(frozen=True, slots=True)
class BenchResult:
    """Everything one benchmark run measured."""

    replays: tuple[Replay, ...]
    summary: tuple[Row, ...]
    by_format: dict[str, list[Row]]
    skipped: tuple[Skipped, ...]
    window: int | None
    """``--window``, or None: each trace ran in its recorded model's window (``windows``)."""
    bounds: dict[str, float] = field(default_factory=dict)
    """The hindsight bound's billed tokens per trace (:mod:`benchmarks.bound`)."""

    settings: BenchSettings | None = None
    """toolbudget's effective settings and where each came from (:mod:`benchmarks.settings`)."""
    oracles: tuple[OracleTrace, ...] = ()
    """The hindsight oracle on each trace (:mod:`benchmarks.oracle`)."""

    def oracle(self) -> dict[str, Any]:
        """The oracle over every trace and per format, and each strategy's share of its saving."""
        ratios = {row.strategy: row.billed_ratio for row in self.summary}
        by_format = {
            fmt: {row.strategy: row.billed_ratio for row in rows}
            for fmt, rows in self.by_format.items()
        }
        return oracle_summary(self.oracles, ratios, by_format)

    def attribution(self) -> dict[str, Attribution]:
        """Per attributed strategy (``none``, toolbudget), its billed tokens by bucket."""
        parts: dict[str, list[Attribution]] = {}
        for r in self.replays:
            if r.attribution is not None:
                parts.setdefault(r.strategy, []).append(r.attribution)
        return {name: combine(group) for name, group in parts.items()}

    def bound(self) -> dict[str, Any]:
        """The bound over every trace, as a ratio to ``none``, and each strategy's share of it."""
        base = sum(r.billed_tokens for r in self.replays if r.strategy == BASELINE)
        total = sum(self.bounds.values())
        ratio = total / base if base else None
        shares = {
            row.strategy: share_of_saving(row.billed_ratio, ratio)
            for row in self.summary
            if row.billed_ratio is not None and ratio is not None
        }
        cfg = None if self.settings is None else self.settings.config
        return {
            "protect_rounds": PROTECT_ROUNDS if cfg is None else cfg.protect_rounds,
            "protect_turns": PROTECT_TURNS if cfg is None else cfg.protect_turns,
            "billed_tokens": total,
            "billed_ratio": ratio,
            "shares": shares,
            "traces": dict(self.bounds),
        }

    calibration: tuple[Calibration, ...] = ()
    previews: PreviewHits | None = None
    """Preview hit rates per shape, head + tail against the shapes (:mod:`benchmarks.previews`)."""

    @property
    def windows(self) -> dict[str, int]:
        """The window each trace ran in, by trace name."""
        return {r.trace: r.window for r in self.replays}


SCRATCH_PREFIX = "toolbudget-bench-"


@contextmanager
def _terminate_as_exit() -> Iterator[None]:
    """SIGTERM (``kill``, a job scheduler's stop, ``timeout``) raised as :class:`SystemExit`
    while inside, so the scratch directory is removed as on Ctrl-C: by default SIGTERM ends the
    process without running ``finally`` blocks, and every killed bench left its spilled bodies
    under the temporary directory. Only from the main thread (where Python delivers signals);
    the previous handler is restored on the way out."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def scratch_dir() -> Iterator[Path]:
    """A new private directory for the replay's sessions, removed afterwards.

    Its random part is lowercase letters only, always 10 of them. The toolbudget strategy's
    envelopes name the spilled file (``include_path``), and the estimator weighs letters, digits
    and ``_`` differently: under :func:`tempfile.mkdtemp`'s mixed names the same replay billed a
    few dozen tokens more or less from one run to the next.
    """
    base = Path(tempfile.gettempdir())
    for _ in range(100):
        letters = "".join(secrets.choice(string.ascii_lowercase) for _ in range(10))
        path = base / f"{SCRATCH_PREFIX}{letters}"
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            continue
        try:
            with _terminate_as_exit():
                yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)
        return
    raise FileExistsError(f"no free name for a {SCRATCH_PREFIX}* directory under {base}")


@contextmanager
def replayed_events() -> Iterator[None]:
    """The replayed sessions' warnings kept from the user's terminal unless ``--verbose`` asked
    for every event: a provider's refusal the replay simulates is a warning in a live session,
    and a run at a small ``--window`` printed hundreds of them above the figures. Errors still
    show."""
    config = structlog.get_config()
    wrapper = config["wrapper_class"]
    if not structlog.is_configured() or wrapper is structlog.make_filtering_bound_logger(
        logging.DEBUG
    ):
        # Unconfigured (the bench run from an application's code, not the command line), the
        # events go to the application's stdlib logging, whose levels are its own: configuring
        # structlog here would route them to structlog's default printer on stdout for good.
        yield
        return
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    try:
        yield
    finally:
        structlog.configure(wrapper_class=wrapper)


def run_bench(
    traces: Sequence[Trace],
    names: Sequence[str],
    *,
    skipped: Sequence[Skipped] = (),
    window: int | None = DEFAULT_WINDOW,
    console: Console | None = None,
    max_requests: int | None = None,
    count: TokenCounter | None = None,
    workdir: Path | None = None,
    engine: Engine | None = None,
    settings: BenchSettings | None = None,
) -> BenchResult:
    """Replay ``traces`` under the named strategies (and the baseline) with a progress bar, on
    ``engine`` (default: :class:`~benchmarks.replay.LocalEngine`, the replays in this process).

    ``window``: the window every trace runs in (``--window``); None: each trace runs in its
    recorded model's (:func:`~benchmarks.replay.trace_window`), the windowed strategies (and
    the oracle) told it. ``settings``: toolbudget's (``--set`` and the environment,
    :func:`benchmarks.settings.resolve`; read here when not given). The bound keeps the rounds
    and caps toolbudget runs with.
    """
    settings = settings if settings is not None else resolve(window=window)
    ours = dict(settings.overrides)
    overrides = {"toolbudget": ours, "toolbudget-compact": ours}
    windows = {tr.name: trace_window(tr, window) for tr in traces}
    groups: dict[int, list[Trace]] = {}
    for tr in traces:
        groups.setdefault(windows[tr.name], []).append(tr)
    total = sum(
        len(t.requests) if max_requests is None else min(max_requests, len(t.requests))
        for t in traces
    ) * len(build_strategies(names))
    console = console if console is not None else Console(stderr=True)
    progress = Progress(
        TextColumn("[bold]bench[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("requests"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        # The description names a trace (a recorded session id): text, never rich markup.
        TextColumn("{task.description}", markup=False),
        console=console,
        transient=True,
    )
    with progress, scratch_dir() as tmp, replayed_events():
        task = progress.add_task("", total=total)

        def advance(trace: Trace, strategy: str, requests: int) -> None:
            progress.update(task, advance=requests, description=f"{trace.name} · {strategy}")

        failed: list[Skipped] = []
        gone: set[str] = set()

        def left_out(trace: Trace, replay: Replay) -> None:
            why = replay.failed or ""
            gone.add(trace.name)
            failed.append(Skipped(trace.path, why, strategy=replay.strategy))
            console.print(f"skipped {trace.path}: {why}", markup=False, highlight=False)

        root = workdir if workdir is not None else tmp
        replays: list[Replay] = []
        for w, group in groups.items():
            replays += run(
                group,
                build_strategies(names, window=w, overrides=overrides),
                root if len(groups) == 1 else root / f"window-{w}",
                window=w,
                count=count,
                max_requests=max_requests,
                progress=advance,
                engine=engine,
                on_failure=left_out,
            )
        order = {tr.name: i for i, tr in enumerate(traces)}
        replays.sort(key=lambda r: order[r.trace])  # stable: each trace's strategies in order
        if gone:
            traces = [t for t in traces if t.name not in gone]
            if not traces:
                raise InputError(
                    f"no trace left to score: every replay failed (first: {failed[0].reason})"
                )
        none_billed = {r.trace: r.billed_tokens for r in replays if r.strategy == BASELINE}
        oracles = []
        for t, trace in enumerate(traces):
            progress.update(task, description=f"{trace.name} · oracle")
            oracles.append(
                oracle_trace(
                    _cut(trace, max_requests),
                    none_billed[trace.name],
                    settings.config,
                    tmp / "oracle" / f"{t:04d}",
                    count=count if count is not None else counter_for(trace.model),
                    window=windows[trace.name],
                )
            )
    bounds = {}
    for trace in traces:
        bounds[trace.name] = bound_billed(
            _cut(trace, max_requests),
            count if count is not None else counter_for(trace.model),
            protect_rounds=settings.config.protect_rounds,
            protect_turns=settings.config.protect_turns,
            preview_chars=settings.config.preview_chars,
        )
    return BenchResult(
        replays=tuple(replays),
        summary=tuple(summarize(replays)),
        by_format=summarize_by_format(replays),
        skipped=(*skipped, *failed),
        window=window,
        bounds=bounds,
        calibration=tuple(calibrate(traces, replays)),
        settings=settings,
        oracles=tuple(oracles),
        previews=preview_hits(
            [
                t if max_requests is None else replace(t, requests=t.requests[:max_requests])
                for t in traces
            ]
        ),
    )


def _cut(trace: Trace, max_requests: int | None) -> Trace:
    """``trace`` with only its first ``max_requests`` requests (all of them when None)."""
    if max_requests is None:
        return trace
    return replace(trace, requests=trace.requests[:max_requests])


# -- terminal -----------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


_COLUMNS: tuple[tuple[str, Callable[[Row], str]], ...] = (
    ("strategy", lambda r: f"[bold]{r.strategy}[/]" if r.strategy == "toolbudget" else r.strategy),
    ("requests", lambda r: f"{r.requests:,}"),
    ("input tok", lambda r: f"{r.input_tokens:,}"),
    ("cached", lambda r: _pct(r.cached_share)),
    ("billed tok", lambda r: f"{r.billed_tokens:,.0f}"),
    (f"×{BASELINE}", lambda r: "—" if r.billed_ratio is None else f"{r.billed_ratio:.3f}"),
    ("peak tok", lambda r: f"{r.peak_tokens:,}"),
    (">window", lambda r: f"{r.overflows:,}"),
    ("breaks", lambda r: f"{r.prefix_breaks:,}"),
    ("visible", lambda r: _pct(r.visibility)),
    ("recoverable", lambda r: _pct(r.recoverable_share)),
    ("ms med", lambda r: _ms(r.ms_median)),
    ("ms p99", lambda r: _ms(r.ms_p99)),
    ("read-backs", lambda r: f"{r.readbacks:,}"),
    ("quoted vis", lambda r: _pct(r.quoted_visibility)),
    ("compactions", lambda r: f"{r.compactions:,}"),
    ("summary tok", lambda r: f"{r.summary_billed:,.0f}"),
    ("breakers", lambda r: f"{r.breaker_openings:,}"),
)
"""Every column of the table, in display order: header and cell."""

_PRIORITY = (
    "strategy",
    f"×{BASELINE}",
    "billed tok",
    "visible",
    "breaks",
    "recoverable",
    "quoted vis",
    "read-backs",
    "cached",
    ">window",
    "peak tok",
    "ms med",
    "input tok",
    "requests",
    "ms p99",
    "compactions",
    "summary tok",
    "breakers",
)
"""Which columns a narrow terminal keeps first: the cost ratio and what the model still sees."""

LEGEND: Mapping[str, str] = {
    "requests": "model requests replayed",
    "input tok": "prompt tokens sent, summed over requests",
    "cached": "share of those tokens read from the prompt cache",
    "billed tok": "input tokens at base-price equivalents (cache writes 1.25×, reads 0.1×, "
    "read-backs included); the cheapest in green",
    f"×{BASELINE}": f"billed tokens over the {BASELINE} strategy (sends everything): lower is cheaper",
    "peak tok": "the largest request",
    ">window": "requests larger than the trace's context window (its model's, or --window)",
    "breaks": "requests that do not start with the whole previous request (prompt cache broken)",
    "visible": f"share of the last {RECENT_ROUNDS} rounds' tool output the model sees in full",
    "recoverable": "share of replaced output that can be read back exactly",
    "ms med": "median milliseconds the strategy takes per request",
    "ms p99": "99th percentile of the same",
    "read-backs": "reads of hidden output the agent's later quotes of it would need",
    "quoted vis": "share of the result lines the agent later quoted that it could see when quoting",
    "compactions": "summaries a compacting strategy made (toolbudget-compact, langchain-summary, "
    "claude-code-compact)",
    "summary tok": "billed tokens of those summary calls (input at cache rates, output at the "
    "model's output price), included in billed tok",
    "breakers": "times a compacting strategy's circuit breaker opened (3 failed summaries)",
}
"""What each column means, printed under the table (headers are short)."""

BATCH_WORDS: Mapping[str, str] = {
    "cold_cache": "the prompt cache had expired (a pause over its TTL): trimming cost nothing",
    "no_cache": "the session's usage shows no prompt cache: a trim costs no cache at all",
    "window": "the prompt reached the window, or the risk of reaching it outweighed the rest",
    "pays": "the tokens saved on the requests still expected outweigh re-writing the cache",
    "forced": "the provider refused the request as too long",
}
"""Why a staleness batch ran (toolbudget's summary line): what made the cost policy's best cut
pay (``docs/concepts/policy.md``), or a hard limit."""


_COMPACTION_COLUMNS = frozenset({"compactions", "summary tok", "breakers"})
"""Columns that say something only when a strategy of the run compacted."""


def _relevant(rows: Sequence[Row]) -> list[int]:
    """Indexes of the columns worth showing for ``rows``: compaction's only where one ran."""
    compacted = any(r.compactions or r.breaker_openings for r in rows)
    return [i for i, (h, _) in enumerate(_COLUMNS) if compacted or h not in _COMPACTION_COLUMNS]


def _fit(rows: Sequence[Row], width: int, console: Console, shown: Sequence[int]) -> list[int]:
    """Indexes of the ``shown`` columns that fit ``width`` cells, most useful first, in order."""
    ranked = [next(i for i, (h, _) in enumerate(_COLUMNS) if h == name) for name in _PRIORITY]
    order = [i for i in ranked if i in shown]
    # Measured on the real table (borders, padding, the widest cell), unclamped by the console.
    unbounded = console.options.update_width(100_000)
    kept: list[int] = []
    for i in order:
        trial = sorted([*kept, i])
        if not kept or console.measure(_table("", rows, trial), options=unbounded).maximum <= width:
            kept = trial
    return kept


def _width(table: Table, console: Console) -> int:
    """Cells ``table`` takes printed whole: measured unclamped by the console's own width."""
    return console.measure(table, options=console.options.update_width(100_000)).maximum


def _table(title: str, rows: Sequence[Row], columns: Sequence[int]) -> Table:
    table = report_table(title)
    headers = [_COLUMNS[i][0] for i in columns]
    for header in headers:
        if header == "strategy":
            # Never cut a name: two strategies may share a prefix (opencode, openai-agents).
            table.add_column(header, justify="left", no_wrap=True)
        else:
            table.add_column(header, justify="right", no_wrap=True)
    cheapest = min((r.billed_tokens for r in rows), default=0.0)
    # Cheapest first, as the docs' tables and the billed chart order them (the JSON keeps the
    # order the strategies ran in); a tie keeps that order.
    for r in sorted(rows, key=lambda r: r.billed_tokens):
        cells = [_COLUMNS[i][1](r) for i in columns]
        if r.billed_tokens == cheapest and "billed tok" in headers:
            at = headers.index("billed tok")
            cells[at] = f"[green]{cells[at]}[/]"
        table.add_row(*cells)
    return table


def render(result: BenchResult, console: Console, *, wide: bool = False) -> None:
    """The summary over all traces, one table per format, what toolbudget did, and a legend.

    The tables keep the columns that fit the console's width (:data:`_PRIORITY` first), or all of
    them when ``wide``; the legend names what every column shown and every batch trigger means.
    """
    traces = len({r.trace for r in result.replays})
    every = [*result.summary, *(r for rows in result.by_format.values() for r in rows)]
    shown = _relevant(every)
    columns = shown if wide else _fit(every, console.width, console, shown)
    title = f"All traces ({traces})"
    changed = None if result.settings is None else result.settings.header()
    if changed is not None:
        # In the header: a figure read without it would be taken for the defaults'. Escaped: a
        # --set value is the user's text, not rich markup.
        title += f"\n{escape(changed)}"
    console.print(_table(title, result.summary, columns))
    if result.replays and not any(r.quotes for r in result.replays if r.strategy == BASELINE):
        # Read-backs are charged for later quotes of hidden lines (benchmarks/readbacks.py): with
        # none, hiding looks free, and a ratio would flatter every strategy that hides the most.
        console.print(
            "[yellow]no result line is quoted later in these traces:[/] no read-back can be "
            "charged, so hidden output costs nothing here and ×none flatters whatever hides the "
            "most (see 'visible'); recorded sessions (--traces) are the fair test."
        )
    if len(result.by_format) > 1:
        for fmt, rows in result.by_format.items():
            n = len({r.trace for r in result.replays if r.format == fmt})
            plural = "" if n == 1 else "s"
            console.print(_table(f"{fmt} ({n} trace{plural})", rows, columns))
    ours = [r for r in result.replays if r.strategy == "toolbudget"]
    if ours:
        batches = sum(int(r.notes.get("staleness_batches", 0)) for r in ours)
        reasons: dict[str, int] = {}
        for r in ours:
            for reason, n in dict(r.notes.get("batch_reasons", {})).items():
                reasons[reason] = reasons.get(reason, 0) + int(n)
        why = ", ".join(f"{k} {v}" for k, v in sorted(reasons.items())) or "none"
        spilled = sum(int(r.notes.get("spilled", 0)) for r in ours)
        trimmed = sum(int(r.notes.get("trimmed", 0)) for r in ours)
        console.print(
            f"toolbudget: {spilled:,} results spilled (cap, price or group), {trimmed:,} trimmed "
            f"in {batches} staleness batches ({why})."
        )
    bound = result.bound()
    if bound["billed_ratio"] is not None:
        reached = _share_words(bound["shares"].get("toolbudget"), result.summary)
        console.print(
            f"bound: {bound['billed_ratio']:.3f}× {BASELINE} if every result outside the last "
            f"{bound['protect_rounds']} rounds{_turns_words(bound['protect_turns'])} vanished "
            f"at no cache cost (and the others showed at most their preview){reached}."
        )
    attribution = result.attribution()
    if attribution:
        for by, buckets, what in (
            ("by_size", SIZE_BUCKETS, "original result size (characters)"),
            ("by_age", AGE_BUCKETS, "result age (rounds)"),
        ):
            console.print(_attribution_table(attribution, by, buckets, what))
    _oracle_line(result, console)
    console.print(_windows_line(result))
    if result.calibration:
        calibration = calibration_table(result.calibration)
        if not wide and _width(calibration, console) > console.width:
            # Cut to fit, every number would read "15,9…": give the format totals whole instead.
            calibration = calibration_table(result.calibration, per_trace=False)
        console.print(calibration)
    if result.previews is not None and result.previews.total().cases:
        console.print(previews_table(result.previews))
    if result.skipped:
        console.print(
            f"[yellow]{len(result.skipped)} file(s) skipped[/] (each with its reason on stderr)."
        )
    hidden = [_COLUMNS[i][0] for i in shown if i not in columns]
    _legend(console, [_COLUMNS[i][0] for i in columns], hidden)


def _windows_line(result: BenchResult) -> str:
    """Which window the traces ran in: ``--window``'s, or each recorded model's (counted)."""
    if result.window is not None:
        return f"window: {result.window:,} tokens for every trace (--window)."
    counts: dict[int, int] = {}
    for w in result.windows.values():
        counts[w] = counts.get(w, 0) + 1
    parts = ", ".join(
        f"{w:,} ({n} trace{'' if n == 1 else 's'})" for w, n in sorted(counts.items())
    )
    return f"window: each trace's recorded model's: {parts}; per trace in the JSON (window)."


def _turns_words(turns: int | None) -> str:
    """The bound's rule on the user's turns, as the summary line says it."""
    if turns is None:
        return ""
    return f" (or from before the user's last {turns} turn{'' if turns == 1 else 's'})"


def _share_words(share: float | None, summary: Sequence[Row], of: str = "that saving") -> str:
    """How much of the bound's saving toolbudget reached, or, when it billed more than sending
    everything (a negative share), that it cost more, said plainly."""
    if share is None:
        return ""
    if share >= 0:
        return f"; toolbudget reaches {share * 100:.1f}% of {of}"
    ratio = next((r.billed_ratio for r in summary if r.strategy == "toolbudget"), None)
    dearer = "" if ratio is None else f" ({ratio:.3f}× {BASELINE})"
    return f"; toolbudget saved none of it: it cost more than {BASELINE}{dearer}"


def _oracle_line(result: BenchResult, console: Console) -> None:
    """The oracle beside the bound: its ratio, and toolbudget's share of its saving per format."""
    if not result.oracles:
        return
    oracle = result.oracle()
    if oracle["billed_ratio"] is None:
        return
    share = oracle["shares"].get("toolbudget")
    line = (
        f"oracle: {oracle['billed_ratio']:.3f}× {BASELINE} with hindsight, on toolbudget's own "
        "envelopes, stubs and batch re-writes (read-backs charged)"
    )
    line += _share_words(share, result.summary, of="its saving")
    parts = []
    for fmt, entry in oracle["formats"].items():
        fmt_share = entry["shares"].get("toolbudget")
        ratio = entry["billed_ratio"]
        if ratio is not None:
            got = "—" if fmt_share is None else f"{fmt_share * 100:.0f}%"
            parts.append(f"{fmt} {ratio:.3f} ({got})")
    if len(parts) > 1:
        line += "; per format, oracle (toolbudget's share): " + ", ".join(parts)
    console.print(line + ".")


def _attribution_table(
    attribution: Mapping[str, Attribution],
    by: str,
    buckets: Sequence[tuple[str, int | None]],
    what: str,
) -> Table:
    """Billed tokens of each attributed strategy per bucket of ``by``, and each one's share."""
    table = report_table(f"Where the billed tokens go, by {what}")
    table.add_column("bucket", justify="left", no_wrap=True)
    names = list(attribution)
    for name in names:
        table.add_column(f"{name} tok", justify="right", no_wrap=True)
        table.add_column("share", justify="right", no_wrap=True)
    rows = [b for b, _ in buckets] + list(EXTRA_ROWS)
    totals = {n: sum(getattr(attribution[n], by).values()) for n in names}
    for row in rows:
        cells = [row]
        for name in names:
            value = getattr(attribution[name], by).get(row, 0.0)
            cells += [f"{value:,.0f}", _pct(value / totals[name] if totals[name] else None)]
        table.add_row(*cells)
    return table


def _legend(console: Console, headers: Sequence[str], hidden: Sequence[str]) -> None:
    """What each column shown and each batch trigger means, and which columns --wide adds."""
    columns = Table.grid(padding=(0, 2))
    columns.add_column(no_wrap=True)
    columns.add_column()
    for header in headers:
        if header in LEGEND:
            columns.add_row(f"  {header}", LEGEND[header])
    console.print("[bold]columns[/]")
    console.print(columns, highlight=False)
    if hidden:
        # Named, so a reader knows whether --wide has what they look for.
        console.print(
            f"  {len(hidden)} more columns with --wide: {', '.join(hidden)}", highlight=False
        )
    triggers = Table.grid(padding=(0, 2))
    triggers.add_column(no_wrap=True)
    triggers.add_column()
    for word, meaning in BATCH_WORDS.items():
        triggers.add_row(f"  {word}", meaning)
    console.print("[bold]why toolbudget's staleness batches ran[/]")
    console.print(triggers, highlight=False)


# -- JSON ---------------------------------------------------------------------------------------


def as_json(result: BenchResult) -> dict[str, Any]:
    """The JSON document of a run."""
    return {
        "summary": [r.as_dict() for r in result.summary],
        "traces": trace_rows(result.replays),
        "skipped": [
            {"path": s.path, "reason": s.reason, "strategy": s.strategy} for s in result.skipped
        ],
        "bound": result.bound(),
        "calibration": [c.as_dict() for c in result.calibration],
        "oracle": result.oracle(),
        "settings": {} if result.settings is None else result.settings.as_dict(),
        "attribution": {name: a.as_dict() for name, a in result.attribution().items()},
        "previews": None if result.previews is None else result.previews.as_json(),
    }


def write_json(result: BenchResult, path: Path) -> None:
    """Write the run's JSON document to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = as_json(result)
    try:
        data = orjson.dumps(doc, option=orjson.OPT_INDENT_2)
    except TypeError as exc:
        # orjson encodes integers of at most 64 bits; a setting may be larger (``--set
        # result_cap=10**30``, which BudgetConfig accepts). The standard library writes any
        # integer; NaN is refused there as orjson would never write it (it writes null).
        if "64-bit" not in str(exc):
            raise
        data = json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False).encode()
    _replace_bytes(path, data + b"\n")


def _replace_bytes(path: Path, data: bytes) -> None:
    """``path.write_bytes(data)``, but a regular file (or a new one) is replaced whole or not at
    all: written beside it under a name of this process, then renamed over it. Written in place,
    a write that failed half-way (a full disk, Ctrl-C) left the previous run's JSON cut short, no
    longer JSON. A link, a device or a pipe (``/dev/stdout``, ``/dev/full``) is written in place:
    renaming over it would unlink it, not write where it leads."""
    if path.is_symlink() or (path.exists() and not path.is_file()):
        path.write_bytes(data)
        return
    part = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        with part.open("wb") as out:  # mode 0o666 less the umask, as write_bytes creates
            if path.exists():
                os.chmod(out.fileno(), stat.S_IMODE(path.stat().st_mode))
            out.write(data)
        os.replace(part, path)
    except OSError as exc:
        part.unlink(missing_ok=True)
        # The error names the file asked for, not the hidden one beside it.
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    except BaseException:
        part.unlink(missing_ok=True)
        raise


# -- charts -------------------------------------------------------------------------------------


def written(result: BenchResult, json_path: Path | None, plots: Path | None) -> Iterator[Path]:
    """Write the JSON document and the charts asked for, yielding each file as it is written.

    A file that cannot be written (a full disk, a directory without write permission) is an
    :class:`~budget.InputError` naming it: after a replay of minutes the figures on screen stay,
    and the command ends on one line, not a traceback.
    """
    try:
        if json_path is not None:
            write_json(result, json_path)
            yield json_path
        if plots is not None:
            yield from write_plots(result, plots)
    except OSError as exc:
        where = exc.filename or json_path or plots
        raise InputError(f"cannot write {where}: {exc.strerror or exc}") from exc


def written_first(
    result: BenchResult, json_path: Path | None, plots: Path | None
) -> tuple[list[Path], str | None]:
    """:func:`written`, before the table is printed: the files written, and why one could not
    be (None when all were). A reader leaving the table early (``toolbudget bench | head``
    closes stdout) must not cost the JSON."""
    paths: list[Path] = []
    try:
        paths.extend(written(result, json_path, plots))
    except BudgetError as exc:
        return paths, str(exc)
    return paths, None


def write_plots(result: BenchResult, directory: Path) -> list[Path]:
    """PNG charts: billed tokens per strategy, request sizes, cost against visibility.

    ``request_sizes.png`` shows the trace where the strategies' total input differs most (the
    longest trace tends to be the one where they all look alike). ``directory`` is created.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    rows = list(result.summary)
    traces = len({r.trace for r in result.replays})
    return [
        _save(_billed_chart(plt, rows, traces), directory / "billed_tokens.png", plt),
        _save(_sizes_chart(plt, result), directory / "request_sizes.png", plt),
        _save(_cost_chart(plt, rows), directory / "cost_vs_visibility.png", plt),
    ]


_OURS = "tab:red"


def _styles(names: Sequence[str]) -> dict[str, tuple[str, str]]:
    """A colour and line style per strategy, all pairs distinct; toolbudget is always red."""
    # tab10 without its red, then black, gold, navy and magenta: thirteen strong, distinct hues.
    palette = [f"tab:{c}" for c in ("blue", "orange", "green", "purple", "brown", "pink")]
    palette += ["tab:gray", "tab:olive", "tab:cyan", "black", "goldenrod", "navy", "magenta"]
    dashes = ["-", "--", "-.", ":"]
    out: dict[str, tuple[str, str]] = {}
    k = 0
    for name in names:
        if name == "toolbudget":
            out[name] = (_OURS, "-")
            continue
        out[name] = (palette[k % len(palette)], dashes[k % len(dashes)])
        k += 1
    return out


def _billed_chart(plt: Any, rows: Sequence[Row], traces: int) -> Any:
    """Horizontal bars, cheapest at the top, each labelled with its tokens and ratio."""
    from matplotlib.ticker import FuncFormatter

    ordered = sorted(rows, key=lambda r: r.billed_tokens, reverse=True)
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(ordered) + 1.6))
    colors = [_OURS if r.strategy == "toolbudget" else "tab:gray" for r in ordered]
    bars = ax.barh([r.strategy for r in ordered], [r.billed_tokens for r in ordered], color=colors)
    labels = [
        f"{r.billed_tokens:,.0f}"
        + ("" if r.billed_ratio is None else f"  ({r.billed_ratio:.2f}× {BASELINE})")
        for r in ordered
    ]
    ax.bar_label(bars, labels=labels, padding=4, fontsize="small")
    # Plain figures with separators: the default formatter would print 1e7 and an offset.
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_xlim(0, max((r.billed_tokens for r in ordered), default=1.0) * 1.35)
    ax.set_xlabel("billed-equivalent input tokens (cache writes count 1.25×, reads 0.1×)")
    ax.set_title(f"Billed input tokens over {traces} traces (lower is better)")
    for label in ax.get_yticklabels():
        if label.get_text() == "toolbudget":
            label.set_fontweight("bold")
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return fig


def _by_trace(result: BenchResult) -> dict[str, list[Replay]]:
    out: dict[str, list[Replay]] = {}
    for rep in result.replays:
        out.setdefault(rep.trace, []).append(rep)
    return out


def _spread(reps: Sequence[Replay]) -> float:
    """How far apart the strategies' total input is on one trace: 1 - smallest / largest."""
    totals = [sum(r.sizes) for r in reps]
    return 1.0 - min(totals) / max(totals) if max(totals) else 0.0


def most_different_trace(result: BenchResult) -> str:
    """The trace where the strategies' total input differs most (ties: the last by name)."""
    return max(_by_trace(result).items(), key=lambda kv: (_spread(kv[1]), kv[0]))[0]


_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")
"""A marker shape per line of ``request_sizes.png``: matplotlib's filled markers, twelve kinds."""
_MARKS_PER_LINE = 16
"""About how many markers a line carries: enough to follow it, few enough to read the curve."""


def _sizes_chart(plt: Any, result: BenchResult) -> Any:
    """Input tokens per request of the trace where the strategies differ most."""
    by_trace = _by_trace(result)
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    fig, ax = plt.subplots(figsize=(11, 7))
    if by_trace:
        name = most_different_trace(result)
        reps = by_trace[name]
        styles = _styles([r.strategy for r in reps])
        # Strategies that sent exactly the same sizes share one line and one legend entry:
        # drawn separately, the last would hide the others.
        same: dict[tuple[int, ...], list[Replay]] = {}
        for rep in reps:
            same.setdefault(rep.sizes, []).append(rep)
        requests = max((len(sizes) for sizes in same), default=1)
        step = max(1, requests // _MARKS_PER_LINE)
        for k, group in enumerate(same.values()):
            ours = any(r.strategy == "toolbudget" for r in group)
            color, dash = styles["toolbudget" if ours else group[0].strategy]
            ax.plot(
                range(1, len(group[0].sizes) + 1),
                group[0].sizes,
                # Lines that run close together (langchain on anthropic-context-editing) stay
                # apart by their markers: each line its own shape, at points shifted per line so
                # two overlapping lines never put their marks on the same request.
                marker=_MARKERS[k % len(_MARKERS)],
                markevery=(k * step // max(1, len(same)) % step, step),
                markersize=6 if ours else 5,
                # A long merged label wraps: one legend column must not squeeze the plot.
                label=textwrap.fill(" = ".join(r.strategy for r in group), 44),
                color=color,
                linestyle=dash,
                linewidth=2.6 if ours else 1.5,
                zorder=3 if ours else 2,
            )
        window = result.window if result.window is not None else reps[0].window
        ax.axhline(window, color="black", linestyle=":", linewidth=1, label="window")
        # Named on the line itself, with room above it: at the top edge the line disappears.
        ax.annotate(
            f"window {window:,}",
            xy=(1.0, window),
            xycoords=("axes fraction", "data"),
            xytext=(0, 3),
            textcoords="offset points",
            ha="right",
            va="bottom",
            fontsize="small",
        )
        top = max(window, *(max(r.sizes, default=0) for r in reps))
        ax.set_ylim(0, top * 1.1)
        ax.set_title(
            f"Input tokens per request: {name}\n(the trace where the strategies differ "
            f"most: the smallest total is {_spread(reps) * 100:.0f}% below the largest)",
            fontsize="medium",
        )
        # Below the plot, in columns: at its right, eleven names took half the figure's width.
        ax.legend(
            fontsize="small",
            loc="upper center",
            bbox_to_anchor=(0.5, -0.12),
            ncol=3,
            frameon=False,
        )
    else:
        ax.set_ylim(bottom=0)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_xlabel("request")
    ax.set_ylabel("input tokens")
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return fig


def _cost_chart(plt: Any, rows: Sequence[Row]) -> Any:
    """Billed ratio against visibility on full 0-100% / from-0 axes, every point labelled.

    Strategies near ``none`` (ratio at most :data:`_NEAR`) usually sit in a small cluster at the
    right: they are labelled in a zoomed inset, marked as such on the full axes.
    """
    points = sorted(
        (r.billed_ratio, r.visibility * 100, r.strategy)
        for r in rows
        if r.billed_ratio is not None and r.visibility is not None
    )
    fig, ax = plt.subplots(figsize=(9, 6.5))
    top = max([1.0, *(y for y, _, _ in points)]) * 1.08
    near = [p for p in points if p[0] <= _NEAR]
    far = [p for p in points if p[0] > _NEAR]
    zoom = None
    if len(near) > 1:
        x0, x1 = min(p[1] for p in near), max(p[1] for p in near)
        y0, y1 = min(p[0] for p in near), max(p[0] for p in near)
        if x1 - x0 < 20 and y1 - y0 < 0.4 * top:
            zoom = (x0, x1, y0, y1)
    _label_points(ax, points if zoom is None else far, top, left_of=None)
    for y, x, name in near if zoom is not None else []:
        ours = name == "toolbudget"
        ax.scatter(x, y, color=_OURS if ours else "tab:gray", s=50 if ours else 30, zorder=3)
    if zoom is not None:
        x0, x1, y0, y1 = zoom
        width = max(x1 - x0, 1.0)
        height = max(y1 - y0, 0.05)
        inset = ax.inset_axes((0.06, 0.08, 0.6, 0.62))
        inset.set_xlim(x0 - width * 1.6, x1 + width * 0.15)
        inset.set_ylim(y0 - height * 0.25, y1 + height * 0.25)
        _label_points(inset, near, inset.get_ylim()[1], left_of=x0 - width * 0.35, low=y0)
        inset.axhline(1.0, color="black", linewidth=0.6, linestyle=":")
        inset.tick_params(labelsize="x-small")
        inset.set_title("zoom on the cluster (note the scales)", fontsize="small")
        inset.grid(alpha=0.3)
        ax.indicate_inset_zoom(inset, edgecolor="black", alpha=0.5)
    ax.set_xlim(0, 102)
    ax.set_ylim(0, top)
    ax.axhline(1.0, color="black", linewidth=0.6, linestyle=":")
    ax.set_xlabel(f"recent tool output shown in full (%), last {RECENT_ROUNDS} rounds")
    ax.set_ylabel(f"billed tokens relative to {BASELINE} (lower is cheaper)")
    ax.set_title("Cost against visibility: best is bottom right")
    ax.grid(alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return fig


_NEAR = 1.2
"""Billed ratio up to which strategies count as the cluster around ``none``."""


def _label_points(
    ax: Any,
    points: Sequence[tuple[float, float, str]],
    top: float,
    *,
    left_of: float | None,
    low: float | None = None,
) -> None:
    """Scatter ``(ratio, visibility, name)`` points with labels left of them, never overlapping."""
    if not points:
        return
    span = top - (low if low is not None else 0.0)
    bottom = (low if low is not None else 0.0) + span * 0.03
    heights = _spread_labels([y for y, _, _ in points], gap=span * 0.06, low=bottom)
    left = left_of if left_of is not None else min(p[1] for p in points) - 8
    for (y, x, name), label_y in zip(points, heights, strict=True):
        ours = name == "toolbudget"
        color = _OURS if ours else "tab:gray"
        ax.scatter(x, y, color=color, s=50 if ours else 30, zorder=3)
        ax.annotate(
            name,
            (x, y),
            xytext=(left, label_y),
            textcoords="data",
            ha="right",
            va="center",
            fontsize="small",
            fontweight="bold" if ours else "normal",
            color=color if ours else "black",
            arrowprops={"arrowstyle": "-", "color": color, "linewidth": 0.6, "alpha": 0.7},
        )


def _spread_labels(ys: Sequence[float], *, gap: float, low: float) -> list[float]:
    """Label heights for points at sorted heights ``ys``: as close to each point as they can be,
    in the same order, at least ``gap`` apart (overlapping runs are centred on their points)."""
    groups: list[list[float]] = []  # each: the targets of a run of labels placed together

    def bottom(group: list[float]) -> float:
        return max(low, sum(group) / len(group) - gap * (len(group) - 1) / 2)

    for y in ys:
        groups.append([y])
        while len(groups) > 1 and bottom(groups[-2]) + gap * len(groups[-2]) > bottom(groups[-1]):
            last = groups.pop()
            groups[-1].extend(last)
    out: list[float] = []
    for group in groups:
        start = bottom(group)
        out.extend(start + gap * k for k in range(len(group)))
    return out


def _save(fig: Any, path: Path, plt: Any) -> Path:
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
