"""A logged decision whose body the store lost is stored again from the history's text.

The proxy's store fsyncs bodies after the request is answered (``defer_sync``): a power cut in
between may keep the decision log's line and lose the body it names. The agent re-sends its
whole history, so a resumed session puts the body back before any copy points to it
(``budget.session._bodies.Bodies.restore_missing``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from budget import Budget, BudgetConfig

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


def _bodies(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if p.is_file() and p.parent.parent.name == "bodies"]


def test_a_lost_body_is_put_back_from_the_resent_history(tmp_path: Path) -> None:
    """Spill, lose the body file, reopen with the same history: the copy is the same bytes,
    the body is back and reads back exactly."""
    history = _history(BIG)
    with Budget.open(tmp_path / "s", BudgetConfig()) as first:
        before = first.prepare(history, now=1.0).messages
    (body,) = _bodies(tmp_path / "s")
    body.unlink()
    with Budget.open(tmp_path / "s", BudgetConfig()) as resumed:
        after = resumed.prepare(history, now=3.0).messages
        ref = body.stem
        assert resumed.read(ref) == BIG
    assert after == before
    assert body.exists()


def test_a_body_is_not_put_back_from_another_text(tmp_path: Path) -> None:
    """When the history now holds another text under the same call id, the lost body is not
    made from it (its hash is not the body's ref)."""
    with Budget.open(tmp_path / "s", BudgetConfig()) as first:
        first.prepare(_history(BIG), now=1.0)
    (body,) = _bodies(tmp_path / "s")
    body.unlink()
    with Budget.open(tmp_path / "s", BudgetConfig()) as resumed:
        resumed.prepare(_history(BIG.replace("line 00001", "LINE 00001")), now=2.0)
    assert not body.exists()
