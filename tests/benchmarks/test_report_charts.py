"""The bench's charts and table helpers: the trace shown, distinct styles, readable axes."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from benchmarks import strategies
from benchmarks.report import (
    _billed_chart,
    _sizes_chart,
    _spread_labels,
    _styles,
    most_different_trace,
    run_bench,
)
from tests._ci import require_module
from tests.benchmarks.test_replay import build


@pytest.fixture(autouse=True)
def _matplotlib() -> None:
    """The bench extra's matplotlib, required by every test here (at run time, so collecting this
    module imports no matplotlib)."""
    require_module("matplotlib", "bench")


def test_request_sizes_shows_the_trace_where_strategies_differ_most(tmp_path: Path) -> None:
    """The chart's trace is the one whose totals differ most, not the longest."""
    long_small = build([100] * 12, name="hand/long")  # nothing to cut: every strategy alike
    short_big = build([120_000, 300, 300, 300, 300, 300, 300], name="hand/big")
    result = run_bench([long_small, short_big], ["toolbudget", "claude-code"], workdir=tmp_path)
    assert max(result.replays, key=lambda r: r.requests).trace == "hand/long"
    assert most_different_trace(result) == "hand/big"


def test_every_strategy_gets_its_own_colour_and_line_style() -> None:
    """All registered strategies (eleven and more) get distinct colours; toolbudget is red."""
    styles = _styles(strategies.names())
    assert len(styles) >= 11
    assert len({colour for colour, _ in styles.values()}) == len(styles)
    assert styles["toolbudget"][0] == "tab:red"


def test_labels_never_overlap_and_keep_the_points_order() -> None:
    """Labels of near-equal points are spread at least a gap apart, in the points' order."""
    ys = [0.82, 0.93, 0.95, 0.95, 0.96, 0.97, 1.0, 1.0, 1.04, 1.06, 2.15, 2.74]
    heights = _spread_labels(ys, gap=0.1, low=0.05)
    assert all(b - a >= 0.1 - 1e-9 for a, b in itertools.pairwise(heights))
    assert heights[-1] == pytest.approx(2.74)  # a lone point keeps its own height
    assert min(heights) >= 0.05


def test_billed_chart_prints_plain_numbers_and_values_on_the_bars(tmp_path: Path) -> None:
    """The billed axis has no scientific offset, every bar carries its value, lower is better."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    result = run_bench(
        [build([120_000, 300, 300, 300, 300, 300], name="hand/big")],
        ["toolbudget"],
        workdir=tmp_path,
    )
    fig = _billed_chart(plt, result.summary, 1)
    fig.canvas.draw()
    ax = fig.axes[0]
    assert ax.xaxis.get_offset_text().get_text() == ""
    ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert any("," in t for t in ticks) and not any("e" in t for t in ticks)
    values = [t.get_text() for t in ax.texts]
    for row in result.summary:
        assert any(v.startswith(f"{row.billed_tokens:,.0f}") for v in values)
    assert "lower is better" in ax.get_title()
    plt.close(fig)


def test_request_sizes_keeps_the_plot_wide_and_names_the_window(tmp_path: Path) -> None:
    """Strategies that tie share one wrapped legend entry below the plot, which keeps most of
    the figure's width, and the window line sits under the top edge with its size written on it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tied = ["toolbudget", "claude-code", "swe-agent", "opencode", "gemini-cli", "codex"]
    result = run_bench([build([100] * 6, name="hand/small")], tied, workdir=tmp_path)
    fig = _sizes_chart(plt, result)
    fig.canvas.draw()
    ax = fig.axes[0]
    assert ax.get_position().width >= 0.75, "the legend squeezes the plot"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(label.count("=") >= 5 and "\n" in label for label in labels), labels
    window = result.windows["hand/small"]
    assert result.window == window  # run_bench's default: one window for every trace
    assert ax.get_ylim()[1] >= window * 1.05
    assert f"window {window:,}" in [t.get_text() for t in ax.texts]
    plt.close(fig)


def test_request_sizes_lines_that_run_close_stay_apart_by_their_markers(tmp_path: Path) -> None:
    """Each line of request_sizes.png (one per distinct size series) carries markers of its own
    shape, so two lines drawn over each other (langchain on anthropic-context-editing) can
    still be told apart."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = ["toolbudget", "claude-code", "codex", "swe-agent-0.7", "observation-masking"]
    trace = build([30_000, 300, 20_000, 300, 300, 300, 300, 300, 300, 300], name="hand/close")
    result = run_bench([trace], names, workdir=tmp_path)
    fig = _sizes_chart(plt, result)
    series = [line for line in fig.axes[0].get_lines() if line.get_label() != "window"]
    assert len(series) >= 3
    markers = [line.get_marker() for line in series]
    assert "None" not in markers and None not in markers
    assert len(set(markers)) == len(markers), markers
    plt.close(fig)
