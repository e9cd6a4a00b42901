"""What ``toolbudget bench`` shows: a progress bar, terminal tables, a JSON file, PNG charts.

The JSON file is ``{"summary": [...], "traces": [...], "skipped": [...], "calibration": [...],
"bound": {...}}``: one summary object per strategy over all traces (exactly
:data:`benchmarks.replay.ROW_KEYS`), one object per trace and strategy (the same keys plus
``trace``, ``file`` and ``format``), the files or traces under the traces directory that were
not scored (``path``, ``reason``), for each trace with recorded usage the baseline's simulated
cache against the recording, with the header tokens added to its requests
(:class:`benchmarks.calibration.Calibration`), and ``bound``: the hindsight bound of
:mod:`benchmarks.bound` (``protect_rounds``, ``billed_tokens``, ``billed_ratio`` over ``none``,
``shares``: each strategy's ``(1 - ratio) / (1 - bound)``, and ``traces``: the bound per trace).
Shares are fractions in [0, 1]; a figure that has no value (the share of nothing) is ``null``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from benchmarks._count import Counter as TokenCounter
from benchmarks._count import counter_for
from benchmarks.bound import PROTECT_ROUNDS, bound_billed, share_of_saving
from benchmarks.calibration import Calibration, calibrate, calibration_table
from benchmarks.importers import Skipped
from benchmarks.replay import (
    BASELINE,
    DEFAULT_WINDOW,
    RECENT_ROUNDS,
    Replay,
    Row,
    build_strategies,
    run,
    summarize,
    summarize_by_format,
    trace_rows,
)
from benchmarks.trace import Trace

__all__ = ["BenchResult", "as_json", "render", "run_bench", "write_json", "write_plots"]


@dataclass(frozen=True, slots=True)
class BenchResult:
    """Everything one benchmark run measured."""

    replays: tuple[Replay, ...]
    summary: tuple[Row, ...]
    by_format: dict[str, list[Row]]
    skipped: tuple[Skipped, ...]
    window: int
    bounds: dict[str, float] = field(default_factory=dict)
    """The hindsight bound's billed tokens per trace (:mod:`benchmarks.bound`)."""

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
        return {
            "protect_rounds": PROTECT_ROUNDS,
            "billed_tokens": total,
            "billed_ratio": ratio,
            "shares": shares,
            "traces": dict(self.bounds),
        }

    calibration: tuple[Calibration, ...] = ()


def run_bench(
    traces: Sequence[Trace],
    names: Sequence[str],
    *,
    skipped: Sequence[Skipped] = (),
    window: int = DEFAULT_WINDOW,
    console: Console | None = None,
    max_requests: int | None = None,
    count: TokenCounter | None = None,
    workdir: Path | None = None,
) -> BenchResult:
    """Replay ``traces`` under the named strategies (and the baseline) with a progress bar."""
    chosen = build_strategies(names, window=window)
    total = sum(
        len(t.requests) if max_requests is None else min(max_requests, len(t.requests))
        for t in traces
    ) * len(chosen)
    console = console if console is not None else Console(stderr=True)
    progress = Progress(
        TextColumn("[bold]bench[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    with progress, tempfile.TemporaryDirectory(prefix="toolbudget-bench-") as tmp:
        task = progress.add_task("", total=total)

        def advance(trace: Trace, strategy: str, requests: int) -> None:
            progress.update(task, advance=requests, description=f"{trace.name} · {strategy}")

        replays = run(
            traces,
            chosen,
            workdir if workdir is not None else Path(tmp),
            window=window,
            count=count,
            max_requests=max_requests,
            progress=advance,
        )
    bounds = {}
    for trace in traces:
        cut = (
            trace
            if max_requests is None
            else replace(trace, requests=trace.requests[:max_requests])
        )
        bounds[trace.name] = bound_billed(
            cut, count if count is not None else counter_for(trace.model)
        )
    return BenchResult(
        replays=tuple(replays),
        summary=tuple(summarize(replays)),
        by_format=summarize_by_format(replays),
        skipped=tuple(skipped),
        window=window,
        bounds=bounds,
        calibration=tuple(calibrate(traces, replays)),
    )


# -- terminal -----------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _table(title: str, rows: Sequence[Row], window: int) -> Table:
    table = Table(title=title, title_justify="left", header_style="bold")
    for header in (
        "strategy",
        "requests",
        "input tok",
        "cached",
        "billed tok",
        f"×{BASELINE}",
        "peak tok",
        f">{window // 1000}k",
        "breaks",
        "visible",
        "recoverable",
        "ms med",
        "ms p99",
        "read-backs",
        "quoted vis",
    ):
        table.add_column(header, justify="left" if header == "strategy" else "right")
    cheapest = min((r.billed_tokens for r in rows), default=0.0)
    for r in rows:
        best = r.billed_tokens == cheapest
        table.add_row(
            f"[bold]{r.strategy}[/]" if r.strategy == "toolbudget" else r.strategy,
            f"{r.requests:,}",
            f"{r.input_tokens:,}",
            _pct(r.cached_share),
            f"[green]{r.billed_tokens:,.0f}[/]" if best else f"{r.billed_tokens:,.0f}",
            "—" if r.billed_ratio is None else f"{r.billed_ratio:.3f}",
            f"{r.peak_tokens:,}",
            f"{r.overflows:,}",
            f"{r.prefix_breaks:,}",
            _pct(r.visibility),
            _pct(r.recoverable_share),
            _ms(r.ms_median),
            _ms(r.ms_p99),
            f"{r.readbacks:,}",
            _pct(r.quoted_visibility),
        )
    return table


def render(result: BenchResult, console: Console) -> None:
    """The summary over all traces, one table per format, and what toolbudget did."""
    traces = len({r.trace for r in result.replays})
    console.print(_table(f"All traces ({traces})", result.summary, result.window))
    if len(result.by_format) > 1:
        for fmt, rows in result.by_format.items():
            n = len({r.trace for r in result.replays if r.format == fmt})
            plural = "" if n == 1 else "s"
            console.print(_table(f"{fmt} ({n} trace{plural})", rows, result.window))
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
            f"toolbudget: {spilled:,} results spilled (cap or aggregate), {trimmed:,} trimmed "
            f"in {batches} staleness batches ({why})."
        )
    bound = result.bound()
    if bound["billed_ratio"] is not None:
        share = bound["shares"].get("toolbudget")
        reached = "" if share is None else f"; toolbudget reaches {share * 100:.1f}% of that saving"
        console.print(
            f"bound: {bound['billed_ratio']:.3f}× {BASELINE} if every result outside the last "
            f"{bound['protect_rounds']} rounds vanished at no cache cost{reached}."
        )
    if result.calibration:
        console.print(calibration_table(result.calibration))
    for s in result.skipped:
        console.print(f"[yellow]skipped[/] {s.path}: {s.reason}")


# -- JSON ---------------------------------------------------------------------------------------


def as_json(result: BenchResult) -> dict[str, Any]:
    """The JSON document of a run."""
    return {
        "summary": [r.as_dict() for r in result.summary],
        "traces": trace_rows(result.replays),
        "skipped": [{"path": s.path, "reason": s.reason} for s in result.skipped],
        "bound": result.bound(),
        "calibration": [c.as_dict() for c in result.calibration],
    }


def write_json(result: BenchResult, path: Path) -> None:
    """Write the run's JSON document to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(as_json(result), option=orjson.OPT_INDENT_2) + b"\n")


# -- charts -------------------------------------------------------------------------------------


def write_plots(result: BenchResult, directory: Path) -> list[Path]:
    """PNG charts: billed tokens per strategy, request sizes of the longest trace, cost/visibility."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    rows = list(result.summary)
    names = [r.strategy for r in rows]
    colors = ["tab:red" if n == "toolbudget" else "tab:gray" for n in names]

    fig, ax = plt.subplots(figsize=(10, 5))
    ax.bar(names, [r.billed_tokens for r in rows], color=colors)
    ax.set_ylabel("billed-equivalent input tokens")
    ax.set_title(f"Billed tokens over {len({r.trace for r in result.replays})} traces")
    ax.tick_params(axis="x", labelrotation=35)
    for label in ax.get_xticklabels():
        label.set_horizontalalignment("right")
    fig.tight_layout()
    written.append(_save(fig, directory / "billed_tokens.png", plt))

    longest = max(result.replays, key=lambda r: (r.requests, r.input_tokens), default=None)
    fig, ax = plt.subplots(figsize=(10, 5))
    if longest is not None:
        for rep in result.replays:
            if rep.trace == longest.trace:
                width = 2.2 if rep.strategy == "toolbudget" else 1.0
                ax.plot(
                    range(1, len(rep.sizes) + 1), rep.sizes, label=rep.strategy, linewidth=width
                )
        ax.axhline(result.window, color="black", linestyle=":", linewidth=1, label="window")
        ax.set_title(f"Request size per turn: {longest.trace}")
        ax.legend(fontsize="small", ncol=2)
    ax.set_xlabel("request")
    ax.set_ylabel("input tokens")
    fig.tight_layout()
    written.append(_save(fig, directory / "request_sizes.png", plt))

    fig, ax = plt.subplots(figsize=(8, 6))
    for row, color in zip(rows, colors, strict=True):
        if row.billed_ratio is None or row.visibility is None:
            continue
        ax.scatter(row.visibility * 100, row.billed_ratio, color=color)
        ax.annotate(
            row.strategy,
            (row.visibility * 100, row.billed_ratio),
            fontsize="small",
            xytext=(4, 4),
            textcoords="offset points",
        )
    ax.set_xlabel(f"recent tool output shown in full (%), last {RECENT_ROUNDS} rounds")
    ax.set_ylabel(f"billed tokens relative to {BASELINE}")
    ax.set_title("Cost against visibility")
    fig.tight_layout()
    written.append(_save(fig, directory / "cost_vs_visibility.png", plt))
    return written


def _save(fig: Any, path: Path, plt: Any) -> Path:
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
