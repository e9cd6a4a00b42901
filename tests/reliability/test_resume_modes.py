"""Resume decides as the session that went on, under every mode (issue 28, items 6-8).

Each mode's long session (``tests/reliability/resume_modes.py``: compaction off with spills,
calibration and staleness batches; proactive compaction; reactive compaction after three
overflows in a row, twice; proactive compaction whose summaries fail until the breaker opens;
usage on most requests and pauses past the cache TTL throughout) is
replayed once uninterrupted, then resumed in a fresh ``Budget.open`` of its directory just
before each action, and before every action in a row: every request copy is byte-identical and
every report the same. On 8473673 the calibration anchor (6), the compaction header (7), the
reactive schedule (8) and the breaker's count of failures lived in memory only, and the resumed
copies differed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from budget import Budget
from spill import LocalStore
from tests import compaction as cmp
from tests.reliability._child import run_json_child
from tests.reliability.resume_modes import MODES, replay, scenario


def _first_difference(ref: list[str], got: list[str]) -> int | None:
    return next((i for i, (a, b) in enumerate(zip(ref, got, strict=True)) if a != b), None)


@pytest.mark.parametrize("mode", MODES)
def test_each_mode_exercises_what_it_claims(mode: str, tmp_path: Path) -> None:
    """The replay calibrates, runs staleness batches and compacts (proactively or after the
    third overflow) as the mode says: the resume tests below test those paths."""
    lines, _ = replay(tmp_path, scenario(mode))
    reports = [json.loads(line.split(" ", 1)[1]) for line in lines if "{" in line]
    assert any(r["tokens_after"] != r["tokens_after_raw"] for r in reports)  # calibrated
    compacted = sum(r["compacted"] for r in reports)
    if mode == "off":
        assert compacted == 0 and sum(r["staleness_ran"] for r in reports) >= 3
    elif mode == "breaker":
        assert compacted == 0  # three failures, then the breaker stays open
        with Budget.open(tmp_path) as session:
            log = session.store.read_log()
        assert [rec["failures"] for rec in log if rec.get("t") == "cmpf"] == [1, 2, 3]
    else:
        assert compacted >= 2
    if mode == "reactive":
        assert lines.count("overflow True") == 6
        with Budget.open(tmp_path) as session:
            log = session.store.read_log()
        assert sum(1 for rec in log if rec.get("t") == "ovf" and rec.get("rc")) == 2


@pytest.mark.parametrize("mode", MODES)
def test_resuming_before_any_action_gives_the_same_copies_and_reports(
    mode: str, tmp_path: Path
) -> None:
    """Closed and opened again just before action ``i`` (every ``i``), the session sends the
    bytes and reports of the one that went on, from ``i`` to the end."""
    sc = scenario(mode)
    ref, _ = replay(tmp_path / "ref", sc)
    for cut in range(1, len(sc.actions)):
        path = tmp_path / str(cut)
        head, last = replay(path, sc, stop=cut)
        rest, _ = replay(path, sc, start=cut, last=last)
        got = head + rest
        assert _first_difference(ref, got) is None, (mode, cut, _first_difference(ref, got))


@pytest.mark.parametrize("mode", MODES)
def test_resuming_before_every_action_in_a_row_gives_the_same_copies(
    mode: str, tmp_path: Path
) -> None:
    """Opened again before every action, one after another, the session still sends the bytes
    and reports of the one that went on."""
    sc = scenario(mode)
    ref, _ = replay(tmp_path / "ref", sc)
    got, _ = replay(tmp_path / "chain", sc, reopen=lambda i: True)
    assert _first_difference(ref, got) is None


@pytest.mark.parametrize("mode", ["proactive", "reactive"])
def test_a_new_process_resumes_to_the_same_copies(mode: str, tmp_path: Path) -> None:
    """A real child process resuming the session just before the request after the overflows
    (reactive) or mid-way (proactive) sends the bytes and reports the parent's uninterrupted
    replay sent."""
    sc = scenario(mode)
    ref, _ = replay(tmp_path / "ref", sc)
    cut = (
        sc.actions.index(next(a for a in sc.actions if a.overflow)) + 3
        if mode == "reactive"
        else 17
    )
    path = tmp_path / "resumed"
    head, last = replay(path, sc, stop=cut)
    code = (
        "import sys\n"
        "from tests.reliability.resume_modes import replay_rest\n"
        "replay_rest(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])\n"
    )
    rest = run_json_child(code, mode, str(path), str(cut), json.dumps(last))
    assert _first_difference(ref, head + rest) is None


@pytest.mark.parametrize("mode", MODES)
def test_a_log_without_the_new_fields_still_resumes(mode: str, tmp_path: Path) -> None:
    """A log written before the anchor, header and reactive fields (``budget._resumed``) and
    the failed-compaction records resumes without a skipped record and replays to the end; with the fields the same replay
    gives the uninterrupted copies."""
    sc = scenario(mode)
    cut = len(sc.actions) // 2
    for name in ("old", "new"):
        path = tmp_path / name
        _, last = replay(path, sc, stop=cut)
        store = LocalStore(path)
        records = store.read_log()
        assert any("ca" in r or "hdr" in r or "rc" in r for r in records)
        if name == "old":
            (path / "decisions.jsonl").unlink()
            strip = {"ca", "hdr", "rc"}
            old = [{k: v for k, v in r.items() if k not in strip} for r in records]
            store.append_log([r for r in old if r.get("t") != "cmpf"])
        store.close()
        with capture_logs() as events:
            rest, _ = replay(path, sc, start=cut, last=last)
        assert not [e for e in events if e["event"].startswith("toolbudget.log.")], name
        assert len(rest) == len(sc.actions) - cut


MANUAL = cmp.compaction_config("manual")


def test_the_report_after_a_compact_call_says_so_after_a_resume(tmp_path: Path) -> None:
    """``compact()``, then a restart, then ``prepare``: the report says a compaction ran and how
    many tokens it summarized, as in the process that compacted (the count was in memory)."""
    msgs = cmp.history(14)
    reports = []
    for name in ("live", "resumed"):
        session = Budget.open(tmp_path / name, MANUAL, summarizer=cmp.Counting())
        session.prepare(msgs[:-2])
        assert session.compact(msgs[:-2])
        if name == "resumed":
            session.close()
            session = Budget.open(tmp_path / name, MANUAL, summarizer=cmp.Counting())
        with session:
            first = session.prepare(msgs).report
            second = session.prepare(msgs + cmp.history(15)[-2:]).report
        assert first.compacted and first.summarized_tokens > 0 and not second.compacted
        reports.append((first.summarized_tokens, second.compacted))
    assert reports[0] == reports[1]
