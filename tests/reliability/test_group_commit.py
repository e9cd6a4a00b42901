"""A staleness batch commits its bodies as one group: one pack, two fsyncs, failures alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from benchmarks.perf import _conversation, _result_text, _round
from budget import Budget
from spill import _fs, ref_for
from tests.fsyncs import count_fsyncs

ROUNDS = 60


def _adopted(
    path: Path, config: dict[str, object] | None = None
) -> tuple[Budget, list[dict[str, object]]]:
    """A session that adopted ``ROUNDS`` rounds of 8 KB results, and the next request's history."""
    session = Budget.open(path, config)
    history = _conversation(ROUNDS, 8_000)
    session.prepare(history, now=0.0)
    return session, history + list(_round(ROUNDS, _result_text(ROUNDS, 8_000)))


def test_a_staleness_batch_writes_its_bodies_as_one_pack_with_two_fsyncs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch that trims an adopted history stores its bodies in one pack: one file fsync
    and one of ``bodies/`` before the log's own fsync (it used to be two per body), and every
    body reads back exactly after a restart."""
    session, history = _adopted(tmp_path / "s")
    kinds = count_fsyncs(monkeypatch)
    with session:
        req = session.prepare(history, now=100_000.0)
    trimmed = [d for d in req.report.decisions if d.kind == "trimmed"]
    assert req.report.staleness_ran and len(trimmed) >= ROUNDS - 5
    assert kinds == ["file", "dir", "file"]  # the pack, bodies/, the log
    assert [p.suffix for p in (tmp_path / "s" / "bodies").iterdir()] == [".pack"]
    with Budget.open(tmp_path / "s") as again:
        for d in trimmed:
            assert d.ref is not None
            assert again.read(d.ref) == _result_text(int(d.call_id.split("_")[1]), 8_000)


def test_with_include_path_each_spilled_body_is_the_file_its_envelope_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``include_path`` a request spilling many results writes one file per body (their
    envelopes name them: never packed), with one fsync per body file and one per shard
    directory touched, and each named file holds its exact output."""
    config = {"include_path": True, "result_cap": 4_000, "preview_chars": 500}
    with Budget.open(tmp_path / "s", config) as session:
        kinds = count_fsyncs(monkeypatch)
        req = session.prepare(_conversation(ROUNDS, 8_000), now=0.0)
    spilled = [d for d in req.report.decisions if d.kind == "spilled"]
    assert len(spilled) == ROUNDS
    shards = {d.ref[:2] for d in spilled if d.ref is not None}
    assert len(shards) < len(spilled)  # some shard holds two bodies: "once" is observable
    # The bodies, the log, and the metadata the first request writes.
    assert kinds.count("file") == len(spilled) + 2
    assert kinds.count("dir") <= len(shards) + 2  # each shard, bodies/, the metadata's
    assert not list((tmp_path / "s" / "bodies").glob("*.pack"))
    shown = {
        block["tool_use_id"]: block["content"]
        for msg in req.messages
        if isinstance(msg["content"], list)
        for block in msg["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    }
    for d in spilled:
        named = [line[6:] for line in shown[d.call_id].splitlines() if line.startswith("File: ")]
        assert [Path(n).read_text() for n in named] == [
            _result_text(int(d.call_id.split("_")[1]), 8_000)
        ]


def test_a_body_that_fails_in_a_batch_stays_inline_and_the_others_are_trimmed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One body of the batch cannot be written (disk full, so the pack holding it cannot
    either): its result is kept whole as ``kept_unspillable`` with a ``spill_failed`` event,
    and every other result is trimmed with its body durable (one file each), in the same
    request."""
    session, history = _adopted(tmp_path / "s")
    victim = _result_text(7, 8_000)
    real = _fs.write

    def write(fd: int, data: bytes | memoryview) -> None:
        if victim.encode() in bytes(data):
            raise OSError(28, "No space left on device")
        real(fd, data)

    monkeypatch.setattr(_fs, "write", write)
    with session, capture_logs() as events:
        req = session.prepare(history, now=100_000.0)
    by_id = {d.call_id: d for d in req.report.decisions}
    failed = by_id["toolu_00000007"]
    assert (failed.kind, failed.reason) == ("kept_unspillable", "spill_failed")
    shown = [
        block["content"]
        for msg in req.messages
        if isinstance(msg["content"], list)
        for block in msg["content"]
        if block.get("tool_use_id") == "toolu_00000007"
    ]
    assert shown == [victim]
    errors = [e for e in events if e["event"] == "toolbudget.spill.failed"]
    assert [e["call_id"] for e in errors] == ["toolu_00000007"]
    assert "disk full" in errors[0]["error"]
    others = [d for cid, d in by_id.items() if d.kind == "trimmed"]
    assert len(others) >= ROUNDS - 6
    with Budget.open(tmp_path / "s") as again:
        for d in others:
            assert d.ref is not None and again.read(d.ref) is not None
            assert ref_for(again.read(d.ref)) == d.ref
