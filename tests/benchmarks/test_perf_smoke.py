"""Smoke test of ``benchmarks.perf``: every benchmark runs at tiny sizes and reports its rows.

Timings are not checked (they depend on the machine); the structure of the figures is, and so
are the properties a benchmark proves on the way (no spilled body read on resume, the same
request copy after a resume).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path

import pytest

from benchmarks import perf
from benchmarks.perf import Figure, Sizes

TINY = Sizes(
    rounds=(4, 8),
    requests=4,
    result_chars=400,
    langchain_rounds=8,
    langchain_calls=2,
    output_bytes=200_000,
    output_repeats=2,
    spill_repeats=2,
    batch_rounds=12,
    batch_repeats=2,
    resume_decisions=40,
    resume_repeats=2,
    memory_bytes=200_000,
    trace_limit=1,
)

pytestmark = pytest.mark.slow  # runs every benchmark, at its quick sizes


@pytest.fixture(scope="module")
def figures(tmp_path_factory: pytest.TempPathFactory, shared_traces: Path) -> list[Figure]:
    """Every benchmark at tiny sizes, replaying the one Gemini CLI trace."""
    return perf.run(
        TINY, traces=shared_traces / "gemini-cli", workdir=tmp_path_factory.mktemp("perf")
    )


def _named(figures: list[Figure], part: str) -> list[Figure]:
    return [f for f in figures if part in f.name]


def test_every_benchmark_reports_its_rows(figures: list[Figure]) -> None:
    """Each benchmark of the table is present with the rows the quick mode prints."""
    assert len(_named(figures, "prepare +1 round, ")) == 3  # 4 and 8 rounds, and a new list
    assert len(_named(figures, "vs LangChain")) == 1
    assert len(_named(figures, "hash + preview + envelope")) == 1
    assert len(_named(figures, "to local disk")) == 2  # fsync on and off
    assert len(_named(figures, "batch request trimming")) == 1
    assert len(_named(figures, "resume a session")) == 1
    assert len(_named(figures, "extra memory")) == 2
    assert len(_named(figures, "replay")) == 3


def test_figures_are_well_formed(figures: list[Figure]) -> None:
    """Every row has a finite figure and unit; a verdict only with a target, a ratio with a peer."""
    for f in figures:
        assert f.name
        assert f.unit
        assert math.isfinite(f.ours)
        assert f.ours >= 0
        assert f.met is None or isinstance(f.met, bool)
        if not f.target:
            assert f.met is None, f.name
        if f.peer is not None:
            assert f.peer_name
            assert f.ratio is not None
            assert f.ratio > 0


def test_resume_reads_no_spilled_body_and_gives_the_same_copy(figures: list[Figure]) -> None:
    """Resume and the first prepare after it open no body file and rebuild the same request."""
    (opened,) = _named(figures, "bodies opened")
    assert opened.ours == 0
    assert opened.met is True
    (first,) = _named(figures, "first prepare() after resume")
    assert first.extra["identical"] is True
    # Timed with the saved estimates and without them (the rebuild's floor), in the same run.
    assert first.peer is not None and first.target == "≤ 200 ms"
    assert len(first.extra["wall_ms"]) == len(first.extra["rebuild_wall_ms"]) >= 1
    (resume,) = _named(figures, "resume a session")
    assert resume.extra["decisions"] >= 40
    assert resume.extra["bodies"] > 0


def test_langchain_row_compares_with_the_real_middleware(figures: list[Figure]) -> None:
    """The LangChain row names its peer and reports both sides' medians."""
    (row,) = _named(figures, "vs LangChain")
    assert row.peer_name == "LangChain ContextEditingMiddleware"
    assert row.peer is not None
    assert row.ratio == pytest.approx(row.peer / row.ours)
    assert row.target == "≥ 100× faster"


def test_replay_counts_the_requests_of_the_trace(figures: list[Figure]) -> None:
    """The replay row replays the Gemini CLI trace request by request."""
    (total,) = _named(figures, "replay 1 traces")
    assert total.extra["requests"] > 0
    assert len(total.extra["traces"]) == 1


def test_table_and_json_carry_every_row(figures: list[Figure], tmp_path: Path) -> None:
    """The Markdown table has one row per figure, and the figures survive a JSON round trip."""
    table = perf.format_table(figures).splitlines()
    assert table[0].startswith("| figure | ours | peer | ratio | target | met |")
    assert len(table) == 2 + len(figures)
    path = tmp_path / "perf.json"
    path.write_text(json.dumps([asdict(f) for f in figures], ensure_ascii=False))
    loaded = json.loads(path.read_text())
    assert [row["name"] for row in loaded] == [f.name for f in figures]


def test_the_batch_row_times_a_request_that_stored_its_bodies(figures: list[Figure]) -> None:
    """The batch row times a request that trimmed (and so durably stored) results, next to a
    floor that wrote those same bytes."""
    [row] = _named(figures, "batch request trimming")
    assert row.extra["trimmed"] > 0
    assert row.extra["bytes"] > 0
    assert row.peer is not None and row.ratio == pytest.approx(row.peer / row.ours)
