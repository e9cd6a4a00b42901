"""A logged decision whose body a deferring store lost is stored again from the history's text.

The proxy's store fsyncs bodies after the request is answered (``defer_sync``): a power cut in
between may keep the decision log's line and lose the body it names. The agent re-sends its
whole history, so a resumed session puts the body back before any copy points to it
(``budget.session._bodies.Bodies.restore_missing``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from budget import Budget, BudgetConfig
from spill import LocalStore, ref_for

BIG = "\n".join(f"line {i:05d} of a long tool output {'x' * 40}" for i in range(2_000))
"""A result over the default 50,000-character cap: spilled at first sight."""


def _history(text: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Run it."},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "c1", "name": "Bash", "input": {"command": "x"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": text}]},
    ]  # fmt: skip


def _open(path: Path, *, defer: bool = True) -> Budget:
    """A session on a store that fsyncs after the request, as the proxy's (``defer_sync``)."""
    return Budget(LocalStore(path, defer_sync=defer), BudgetConfig())


def _bodies(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if p.is_file() and p.parent.parent.name == "bodies"]


def test_a_lost_body_is_put_back_from_the_resent_history(tmp_path: Path) -> None:
    """Spill, lose the body file, reopen with the same history: the copy is the same bytes,
    the body is back and reads back exactly."""
    history = _history(BIG)
    with _open(tmp_path / "s") as first:
        before = first.prepare(history, now=1.0).messages
    (body,) = _bodies(tmp_path / "s")
    body.unlink()
    with _open(tmp_path / "s") as resumed:
        after = resumed.prepare(history, now=3.0).messages
        ref = body.stem
        assert resumed.read(ref) == BIG
    assert after == before
    assert body.exists()


def test_a_body_is_not_put_back_from_another_text(tmp_path: Path) -> None:
    """When the history now holds another text under the same call id, the lost body is not
    made from it (its hash is not the body's ref)."""
    with _open(tmp_path / "s") as first:
        first.prepare(_history(BIG), now=1.0)
    (body,) = _bodies(tmp_path / "s")
    body.unlink()
    with _open(tmp_path / "s") as resumed:
        resumed.prepare(_history(BIG.replace("line 00001", "LINE 00001")), now=2.0)
    assert not body.exists()


def test_a_store_that_syncs_before_logging_is_not_asked(tmp_path: Path) -> None:
    """The library's own store makes a body durable before its decision is logged: a resumed
    session asks it for no body (a body removed by hand stays removed)."""
    with _open(tmp_path / "s", defer=False) as first:
        first.prepare(_history(BIG), now=1.0)
    (body,) = _bodies(tmp_path / "s")
    body.unlink()
    with _open(tmp_path / "s", defer=False) as resumed:
        resumed.prepare(_history(BIG), now=2.0)
    assert not body.exists()


def test_only_the_last_requests_bodies_are_asked_for(tmp_path: Path) -> None:
    """The proxy waits for a request's fsyncs before the next one: a body of an earlier
    request cannot be lost with its decision kept, so a resumed session does not ask for it."""
    second = BIG.replace("line", "LINE")
    history = _history(BIG)
    grown = [*history, {"role": "assistant", "content": [
        {"type": "tool_use", "id": "c2", "name": "Bash", "input": {"command": "y"}}]},
        {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "c2", "content": second}]}]  # fmt: skip
    with _open(tmp_path / "s") as first:
        first.prepare(history, now=1.0)
        first.prepare(grown, now=2.0)
    by_ref = {p.stem: p for p in _bodies(tmp_path / "s")}
    bodies = [by_ref[ref_for(BIG)], by_ref[ref_for(second)]]
    for body in bodies:
        body.unlink()
    with _open(tmp_path / "s") as resumed:
        resumed.prepare(grown, now=3.0)
    assert [b.exists() for b in bodies] == [False, True]


def test_the_last_requests_refs_are_read_past_an_overflow_record() -> None:
    """An overflow record logged after the last request does not hide that request's
    decisions: their refs are the ones a deferring store is asked for."""
    from budget.session._records import last_request_refs

    records = [
        {"t": "d", "ref": "a"},
        {"t": "req"},
        {"t": "d", "ref": "b"},
        {"t": "d", "ref": "c"},
        {"t": "req"},
        {"t": "ovf"},
    ]
    assert last_request_refs(records) == frozenset({"b", "c"})
