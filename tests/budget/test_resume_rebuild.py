"""The first prepare after a resume rebuilds the whole history on its fast path (issue 14, item 2):
the same bytes, decisions and figures as without the saved estimates and as a session that never
restarted, and an edit to an old result is still seen."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path
from typing import Any

import pytest

from benchmarks.perf import _resume_round
from budget import Budget, Prepared
from budget._ledger import Decision
from budget._view import (
    RawResult,
    Scanned,
    ToolResult,
    build_raw,
    build_result,
    build_scanned,
    builder,
)
from budget.session._history import _Msg
from budget.tokens._estimates_cache import SIDECAR
from spill import ref_for
from tests._shared import SharedTraces

Message = dict[str, Any]


def _same(a: Prepared, b: Prepared) -> None:
    assert a.messages == b.messages
    assert a.report.decisions == b.report.decisions
    for field in ("tokens_before", "tokens_after", "tokens_after_raw", "reclaimable_tokens"):
        assert getattr(a.report, field) == getattr(b.report, field), field


def _three_ways(
    tmp_path: Path, history: list[Any], ends: list[int], config: dict[str, Any]
) -> dict[str, Prepared]:
    """The last request of ``ends`` made by a session that went on, by one resumed before it
    with its saved estimates, and by one resumed without them (a crash before any save)."""
    out: dict[str, Prepared] = {}
    for name in ("went_on", "with_sidecar", "without_sidecar"):
        path = tmp_path / name
        session = Budget.open(path, config)
        for end in ends[:-1]:
            session.prepare(history[:end], now=float(end))
        if name != "went_on":
            session.close()
            if name == "without_sidecar":
                (path / SIDECAR).unlink(missing_ok=True)
            session = Budget.open(path, config)
        with session:
            out[name] = session.prepare(history[: ends[-1]], now=1e6)
    assert (tmp_path / "with_sidecar" / SIDECAR).is_file()
    return out


def _synthetic(rounds: int) -> list[Message]:
    """The history ``bench_resume`` in benchmarks/perf.py builds: two results a round."""
    history: list[Message] = [{"role": "user", "content": "Investigate the regression."}]
    for r in range(rounds):
        history += _resume_round(r)
    return history


def test_perf_session_resumes_to_the_bytes_of_a_session_that_went_on(tmp_path: Path) -> None:
    """On bench_resume's synthetic session (600 rounds in requests of 100), the resumed first
    prepare gives the copy, decisions and figures of the full rebuild and of no restart."""
    history = _synthetic(600)
    ends = list(range(201, len(history) + 1, 200))
    out = _three_ways(tmp_path, history, ends, {"fsync": False})
    shown = sum(m is not h for m, h in zip(out["went_on"].messages, history, strict=True))
    assert shown > 200  # most results are shown as decided (stubs, envelopes): a real rebuild
    _same(out["with_sidecar"], out["without_sidecar"])
    _same(out["with_sidecar"], out["went_on"])


def test_real_traces_resume_to_the_bytes_of_a_session_that_went_on(
    tmp_path: Path, shared_trace_set: SharedTraces
) -> None:
    """On the longest recorded trace of each format, a resume halfway gives the copy, decisions
    and figures of the full rebuild and of a session that never restarted."""
    traces, _ = shared_trace_set
    longest: dict[str, Any] = {}
    for trace in traces:
        if trace.format not in longest or len(trace.messages) > len(longest[trace.format].messages):
            longest[trace.format] = trace
    assert longest
    for i, trace in enumerate(longest.values()):
        history = list(trace.messages)
        ends = [max(2, len(history) // 2), len(history)]
        config = {"fsync": False, "model": trace.model}
        out = _three_ways(tmp_path / str(i), history, ends, config)
        _same(out["with_sidecar"], out["without_sidecar"])
        _same(out["with_sidecar"], out["went_on"])


@pytest.mark.parametrize("same_length", [True, False])
def test_an_edit_to_an_old_result_is_seen_after_resume(tmp_path: Path, same_length: bool) -> None:
    """A caller that changes an old, long-trimmed tool result's text before resuming gets it
    decided anew (a new decision for the new text), as a session that never restarted does."""
    history = _synthetic(300)
    ends = list(range(201, len(history) + 1, 200))
    path = tmp_path / "s"
    with Budget.open(path, {"fsync": False}) as session:
        for end in ends:
            session.prepare(history[:end], now=float(end))
        old = session.decision("toolu_000001_1")
    assert old is not None and old.kind == "trimmed"
    block = history[4]["content"][1]
    assert block["tool_use_id"] == "toolu_000001_1"
    text = block["content"]
    edited_text = text.replace("1", "7") if same_length else text + "\nredacted"
    assert edited_text != text and (len(edited_text) == len(text)) is same_length
    message = {
        **history[4],
        "content": [history[4]["content"][0], {**block, "content": edited_text}],
    }
    edited = [*history[:4], message, *history[5:]]
    with Budget.open(path, {"fsync": False}) as session:
        resumed = session.prepare(edited, now=2e6)
        now = session.decision("toolu_000001_1")
    assert now is not None and now.digest == ref_for(edited_text) != old.digest
    assert "toolu_000001_1" in {d.call_id for d in resumed.report.decisions}
    with Budget.open(tmp_path / "live", {"fsync": False}) as live:
        for end in ends:
            live.prepare(history[:end], now=float(end))
        went_on = live.prepare(edited, now=2e6)
    _same(resumed, went_on)


def test_fast_built_results_and_decisions_are_the_frozen_types() -> None:
    """The rebuild's fast constructors give objects equal to, hashing and pickling as, and as
    frozen as the dataclass constructors' (a field added to either would break the layout)."""
    fields = ("c", "bash", 3, 1, 2, 4, "text", False, 0, (3 << 16) + 1, "k" * 32)
    fast, slow = build_result(*fields), ToolResult(*fields)
    assert type(fast) is ToolResult and fast == slow and hash(fast) == hash(slow)
    assert dataclasses.astuple(fast) == fields
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.text = "other"  # type: ignore[misc]
    rec = {"id": "c", "kind": "trimmed", "why": "cold_cache", "chars": 9, "text": "stub",
           "ref": "0" * 32, "tool": "bash", "h": "1" * 32}  # fmt: skip
    restored = Decision._from_valid(rec)
    built = Decision("c", "trimmed", "cold_cache", 9, "stub", "0" * 32, "bash", "1" * 32)
    assert type(restored) is Decision and restored == built and hash(restored) == hash(built)
    assert pickle.loads(pickle.dumps(restored)) == built
    spilled = Decision._from_valid({**rec, "kind": "spilled", "pv": 1})
    assert spilled.preview == 1 and Decision._from_valid(rec).preview == 0
    assert pickle.loads(pickle.dumps(fast)) == slow
    with pytest.raises(dataclasses.FrozenInstanceError):
        restored.kind = "kept"  # type: ignore[misc]
    raw = build_raw("c", 1, "text", False, 0)
    assert type(raw) is RawResult and raw == RawResult("c", 1, "text", False, 0)
    assert build_scanned() == Scanned() and type(build_scanned((), (raw,), True)) is Scanned
    with pytest.raises(TypeError, match="not a frozen dataclass"):
        builder(_Msg)  # mutable: nothing to gain, and no frozen class to become
