"""How close the replay of the ``none`` baseline comes to what the provider recorded.

For every trace whose recording has usage, :func:`calibrate` sets what the provider billed
(prompt tokens, and the share of them read from the cache) next to what the replay of ``none``
simulated for the same session (the same figures, under the trace's
:func:`~benchmarks.pricing.pricing_for` rules, with its reconstructed header). The recorded
figures sum the requests that have usage; the simulated ones sum every replayed request (all of
them have usage on the public traces but one OpenHands request).

A simulated share far above the recorded one means the simulator caches more than the provider
did (an optimistic baseline: every strategy that breaks the prefix less looks better); a replayed
prompt far below the recorded one means the replay lacks part of what was sent. ``recorded
misses`` counts the requests after the first that the provider served without any cache read:
the simulator models a perfect prefix cache (misses only by expiry), so on automatic caches
(OpenAI, Gemini, routed proxies) these misses are most of what remains between the two shares.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rich.markup import escape
from rich.table import Table

from benchmarks._table import report_table
from benchmarks.pricing import pricing_for
from benchmarks.replay import BASELINE, Replay
from benchmarks.trace import Trace

__all__ = ["Calibration", "calibrate", "calibration_table", "format_totals"]


@dataclass(frozen=True, slots=True)
class Calibration:
    """One trace (or one format's total): recorded against simulated, for the baseline."""

    trace: str
    format: str
    model: str | None
    cache_rules: str
    """Why these rules (:attr:`benchmarks.pricing.Pricing.basis`); empty on a total row."""
    header_tokens: int
    """Tokens per request the recording omits, added to every request (see benchmarks.header)."""
    requests_with_usage: int
    recorded_prompt_tokens: int
    replayed_prompt_tokens: int
    recorded_cached_tokens: int
    simulated_cached_tokens: int
    recorded_misses: int = 0
    """Requests after the first whose recording shows no cache read at all (a provider miss:
    routing, eviction, expiry), where a perfect prefix cache would have read the previous one."""

    @property
    def recorded_cached_share(self) -> float | None:
        """Share of the recorded prompt tokens that the provider read from its cache."""
        n = self.recorded_prompt_tokens
        return self.recorded_cached_tokens / n if n else None

    @property
    def simulated_cached_share(self) -> float | None:
        """Share of the replayed prompt tokens that the simulator read from its cache."""
        n = self.replayed_prompt_tokens
        return self.simulated_cached_tokens / n if n else None

    def as_dict(self) -> dict[str, Any]:
        """The row as a JSON object (the shares included)."""
        return {
            **asdict(self),
            "recorded_cached_share": self.recorded_cached_share,
            "simulated_cached_share": self.simulated_cached_share,
        }


def calibrate(traces: Sequence[Trace], replays: Sequence[Replay]) -> list[Calibration]:
    """One row per trace that has recorded usage and a ``none`` replay, in trace order."""
    base = {r.trace: r for r in replays if r.strategy == BASELINE}
    rows: list[Calibration] = []
    for trace in traces:
        used = [r.usage for r in trace.requests if r.usage is not None]
        replay = base.get(trace.name)
        if not used or replay is None:
            continue
        rows.append(
            Calibration(
                trace=trace.name,
                format=trace.format,
                model=trace.model,
                cache_rules=pricing_for(trace).basis,
                header_tokens=trace.header_tokens,
                requests_with_usage=len(used),
                recorded_prompt_tokens=sum(u.prompt_tokens for u in used),
                replayed_prompt_tokens=replay.input_tokens,
                recorded_cached_tokens=sum(u.cache_read_tokens for u in used),
                simulated_cached_tokens=replay.cached_tokens,
                recorded_misses=sum(
                    1
                    for r in trace.requests[1:]
                    if r.usage is not None and r.usage.cache_read_tokens == 0
                ),
            )
        )
    return rows


def format_totals(rows: Sequence[Calibration]) -> list[Calibration]:
    """One total row per format (formats in order of first appearance)."""
    by_format: dict[str, list[Calibration]] = {}
    for row in rows:
        by_format.setdefault(row.format, []).append(row)
    return [
        Calibration(
            trace=f"{fmt} ({len(group)})",
            format=fmt,
            model=None,
            cache_rules="",
            header_tokens=round(sum(r.header_tokens for r in group) / len(group)),
            requests_with_usage=sum(r.requests_with_usage for r in group),
            recorded_prompt_tokens=sum(r.recorded_prompt_tokens for r in group),
            replayed_prompt_tokens=sum(r.replayed_prompt_tokens for r in group),
            recorded_cached_tokens=sum(r.recorded_cached_tokens for r in group),
            simulated_cached_tokens=sum(r.simulated_cached_tokens for r in group),
            recorded_misses=sum(r.recorded_misses for r in group),
        )
        for fmt, group in by_format.items()
    ]


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


def calibration_table(rows: Sequence[Calibration], *, per_trace: bool = True) -> Table:
    """The calibration table: each trace, then each format's total (header: mean per trace).

    ``per_trace=False`` gives the format totals alone, without the cache-rules column: the form
    that fits a terminal of about 100 columns, where the full table would cut every number.
    """
    title = f"Calibration: {BASELINE} replayed vs recorded ({len(rows)} traces with usage)"
    if not per_trace:
        table = report_table(title, caption="per trace: --wide, or the JSON's calibration")
        # Two-line headers: a figure's column is no wider than the figure.
        headers: tuple[str, ...] = ("format\n(traces)", *(h.replace(" ", "\n") for h in _FIGURES))
    else:
        table = Table(title=title, title_justify="left", header_style="bold")
        headers = ("trace", "cache rules", *_FIGURES)
    for header in headers:
        if header == "trace":
            # Whole names: two mini-swe-agent traces differ only after 30 characters.
            table.add_column(header, no_wrap=True, min_width=38)
        elif header == "cache rules":
            table.add_column(header, justify="left")
        elif header == "format\n(traces)":
            table.add_column(header, justify="left", no_wrap=True)
        else:
            # A figure is never cut: the header wraps over two lines instead.
            table.add_column(header, justify="right", no_wrap=not per_trace)

    def add(row: Calibration, bold: bool = False) -> None:
        cells = [
            f"{row.header_tokens:,}",
            f"{row.recorded_prompt_tokens:,}",
            f"{row.replayed_prompt_tokens:,}",
            _pct(row.recorded_cached_share),
            _pct(row.simulated_cached_share),
            f"{row.recorded_misses:,}/{row.requests_with_usage:,}",
        ]
        # A trace's name comes from its recording (a session id): text, never rich markup.
        name = escape(row.trace)
        cells = [name, row.cache_rules, *cells] if per_trace else [name, *cells]
        table.add_row(*(f"[bold]{c}[/]" if bold else c for c in cells))

    totals = format_totals(rows)
    if per_trace:
        for row in rows:
            add(row)
        if totals:
            table.add_section()
    for row in totals:
        add(row, bold=per_trace)
    return table


_FIGURES = (
    "header tok",
    "recorded prompt",
    "replayed prompt",
    "recorded cached",
    "simulated cached",
    "recorded misses",
)
"""The figure columns of the calibration table, after its trace (or format) columns."""
