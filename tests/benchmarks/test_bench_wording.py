"""What ``toolbudget bench`` prints when toolbudget costs more than sending everything, the
order of its table's rows, and the JSON keys docs/benchmark.md lists (issue 34, item 6)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from benchmarks.calibration import Calibration
from tests._entry import run_toolbudget

ROOT = Path(__file__).resolve().parents[2]
STRATEGIES = "toolbudget,codex,claude-code"


def _generated(tmp_path: Path, *sets: str) -> tuple[list[str], dict[str, Any]]:
    """``bench --generate 3`` (seed 0) with toolbudget's ``--set`` ``sets``: its stdout lines
    and its JSON document."""
    out = tmp_path / "r.json"
    # --wide: every column, no line folded, whatever COLUMNS the test run has.
    args = ["bench", "--generate", "3", "--strategies", STRATEGIES, "--wide", "--json", str(out)]
    for item in sets:
        args += ["--set", item]
    done = run_toolbudget(args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines(), orjson.loads(out.read_bytes())


def _tables(lines: list[str]) -> dict[str, list[list[str]]]:
    """Each table's title and the cells of its rows (rich's plain box: header, then a rule)."""
    tables: dict[str, list[list[str]]] = {}
    for i, line in enumerate(lines):
        if line.split()[:1] != ["strategy"] or i == 0:
            continue
        rows = tables.setdefault(lines[i - 1].strip(), [])
        width = len(lines[i + 2].split())  # every row has as many cells as the first
        for row in lines[i + 2 :]:
            cells = row.split()
            if len(cells) != width or not re.fullmatch(r"[a-z][\w.-]*", cells[0]):
                break
            rows.append(cells)
    return tables


def test_a_dearer_toolbudget_is_said_to_cost_more_not_to_reach_a_negative_share(
    tmp_path: Path,
) -> None:
    """When toolbudget bills more than ``none``, the bound line says it cost more, with its
    ratio, instead of "reaches -14.9% of that saving". A price list that makes cache writes
    look free (0.001x) has its cost policy trim at every chance: it bills more than none."""
    lines, doc = _generated(tmp_path, "cache_write_price=0.001")
    ours = next(r for r in doc["summary"] if r["strategy"] == "toolbudget")
    assert ours["billed_ratio"] > 1.0, "seed 0's corpus no longer has such a toolbudget dearer"
    assert doc["bound"]["shares"]["toolbudget"] < 0
    line = next(line for line in lines if line.startswith("bound: "))
    assert line.endswith(
        f"; toolbudget saved none of it: it cost more than none ({ours['billed_ratio']:.3f}× none)."
    ), line
    assert "reaches -" not in line


def test_table_rows_are_sorted_by_billed_tokens_as_in_the_docs(tmp_path: Path) -> None:
    """Each table lists the strategies cheapest first (billed tokens), as the docs' tables and
    the billed chart do; the JSON keeps the order the strategies ran in."""
    lines, doc = _generated(tmp_path)
    billed = {r["strategy"]: r["billed_tokens"] for r in doc["summary"]}
    tables = _tables(lines)
    shown = [cells[0] for cells in tables["All traces (3)"]]
    assert sorted(shown) == sorted(billed)
    assert shown == sorted(billed, key=lambda name: billed[name])
    assert [r["strategy"] for r in doc["summary"]] == ["none", *STRATEGIES.split(",")]
    assert len(tables) >= 2  # the totals and at least one format
    for title, rows in tables.items():
        column = [float(c[4].replace(",", "")) for c in rows]  # the billed tok column
        assert len(column) == len(billed) and column == sorted(column), title


def test_the_benchmark_page_describes_every_key_of_the_json(tmp_path: Path) -> None:
    """docs/benchmark.md's JSON section names every top-level key the JSON has, and every key of
    its ``bound`` and ``calibration`` objects."""
    _, doc = _generated(tmp_path)
    page = (ROOT / "docs" / "benchmark.md").read_text(encoding="utf-8")
    section = page.split("\n## The JSON file\n", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`(\w+)`", section))
    assert set(doc) <= named, sorted(set(doc) - named)
    assert set(doc["bound"]) <= named, sorted(set(doc["bound"]) - named)
    # The generated corpus records no usage (no calibration rows): the keys of one row built
    # here are those of every row the JSON holds.
    row = Calibration("t", "f", None, "rules", 0, 1, 10, 10, 5, 5)
    keys = set(row.as_dict())
    assert keys == {
        *Calibration.__dataclass_fields__,
        "recorded_cached_share",
        "simulated_cached_share",
    }
    assert keys <= named, sorted(keys - named)


def test_the_replayed_sessions_warnings_stay_off_the_terminal_unless_verbose() -> None:
    """Inside the bench's replay a session's warning (a refusal the replay simulates) is dropped
    and an error kept; under ``--verbose`` (debug) every event passes."""
    import logging

    import structlog
    from structlog.testing import LogCapture

    from benchmarks.report import replayed_events

    capture = LogCapture()
    for level, seen in ((logging.WARNING, ["error"]), (logging.DEBUG, ["warning", "error"])):
        structlog.configure(
            processors=[capture], wrapper_class=structlog.make_filtering_bound_logger(level)
        )
        capture.entries.clear()
        try:
            with replayed_events():
                log = structlog.get_logger("toolbudget")
                log.warning("toolbudget.session.context_overflow")
                log.error("toolbudget.readback.failed")
            assert [e["log_level"] for e in capture.entries] == seen
            assert structlog.get_config()["wrapper_class"] is (
                structlog.make_filtering_bound_logger(level)
            )
        finally:
            structlog.reset_defaults()


def test_the_bench_run_as_a_library_leaves_structlog_unconfigured(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Where the application configured no structlog (run_bench called from its code), the
    replay leaves structlog so: toolbudget's events go on to the application's stdlib logging,
    during the run and after it (the bench configured structlog, so they went to structlog's
    default printer on stdout from then on)."""
    import logging

    import structlog

    from benchmarks.report import replayed_events
    from spill._store import events

    structlog.reset_defaults()
    try:
        with caplog.at_level(logging.WARNING, logger="toolbudget"), replayed_events():
            events().warning("toolbudget.session.context_overflow")
        assert not structlog.is_configured()
        assert [r.getMessage() for r in caplog.records] == [
            "event=toolbudget.session.context_overflow"
        ]
    finally:
        structlog.reset_defaults()
