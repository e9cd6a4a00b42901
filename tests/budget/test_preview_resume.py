"""Preview versions on resume (issue 32): a session logged before preview shapes goes on with
version 0's bytes; a version-1 session resumed shows what it would have shown going on."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from budget import Budget
from budget._ledger import Ledger
from budget.previews import PREVIEW_VERSION

FIXTURE = Path(__file__).parents[1] / "fixtures" / "sessions" / "v0_head_tail"


def _case() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURE / "expected.json").read_text())
    return data


def _contents(messages: list[Any]) -> list[str]:
    return [
        b["content"]
        for m in messages
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]


def test_a_session_logged_before_preview_shapes_resumes_to_its_old_bytes(tmp_path: Path) -> None:
    """The session written by the code before preview shapes (tests/fixtures/sessions), resumed:
    its next request copy is exactly the one that code made, a re-run and a failing build
    shown as head + tail (version 0), not as a delta and an errors preview."""
    case = _case()
    shutil.copytree(FIXTURE / "session", tmp_path / "s")
    with Budget.open(tmp_path / "s", case["config"]) as b:
        copy = b.prepare(case["history"], now=10).messages
    assert copy == case["copy"]
    assert not any("--- preview:" in text for text in _contents(copy))


def test_the_same_history_in_a_new_session_gets_version_1_shapes(tmp_path: Path) -> None:
    """The fixture's history in a session of its own: the re-run is a delta against the first
    run's ref, the build an errors preview showing the compiler's error (what the resumed
    session must not switch to)."""
    case = _case()
    history = case["history"]
    with Budget.open(tmp_path / "s", {**case["config"]}) as b:
        b.prepare(history[:3], now=0)
        copy = b.prepare(history, now=10).messages
        first_ref = b.decision("a")
    texts = _contents(copy)
    assert first_ref is not None and first_ref.ref is not None
    assert f"--- preview: delta (diff against ref {first_ref.ref}" in texts[1]
    assert "+test_200 FAILED" in texts[1]
    assert "--- preview: errors" in texts[2] and "main.c:5:12: error: 'y' undeclared" in texts[2]
    assert copy != case["copy"]


def test_a_version_1_session_resumed_shows_what_it_would_have_going_on(tmp_path: Path) -> None:
    """Closed after request 1 and reopened, a version-1 session's request 2 (a delta against a
    stored body, an errors preview) is byte-identical to an unbroken session's."""
    case = _case()
    history, config = case["history"], case["config"]
    with Budget.open(tmp_path / "r", config) as b:
        b.prepare(history[:3], now=0)
    with Budget.open(tmp_path / "r", config) as b:
        resumed = b.prepare(history, now=10).messages
    with Budget.open(tmp_path / "u", config) as b:
        b.prepare(history[:3], now=0)
        unbroken = b.prepare(history, now=10).messages
    assert resumed == unbroken
    assert "--- preview: delta" in _contents(resumed)[1]


def test_the_ledger_takes_the_version_of_its_first_spill() -> None:
    """A log whose spills carry no ``pv`` is version 0; one whose first spill says 1 is 1; a
    log without spills is the current version."""
    spill = {"t": "d", "id": "a", "kind": "spilled", "why": "cap", "chars": 9, "text": "x",
             "ref": "0" * 32}  # fmt: skip
    old, new, none = Ledger(), Ledger(), Ledger()
    old.restore([spill])
    new.restore([{**spill, "pv": 1}])
    none.restore([{"t": "d", "id": "k", "kind": "kept", "why": "fits", "chars": 3}])
    assert (old.preview_version, new.preview_version) == (0, 1)
    assert none.preview_version == PREVIEW_VERSION
    assert old.get("a") is not None and old.get("a").preview == 0  # type: ignore[union-attr]


_LINES = "\n".join(f"out line {i:05d}" for i in range(3_000))


def _history(n: int) -> list[dict[str, Any]]:
    """``n`` rounds of a 3,000-line bash output, each from a call of its own."""
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(n):
        msgs += [
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": f"c{i}", "name": "bash", "input": {"i": i}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"c{i}", "content": f"{i}\n{_LINES}"}]},
        ]  # fmt: skip
    return msgs


def test_a_version_1_session_goes_on_with_version_1_markers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session whose first spill was logged at version 1 (the ranges alone on the marker line)
    spills its next result, after a resume on this code, with version 1's marker too; a new
    session gets the counts of version 2 and later."""
    with monkeypatch.context() as patched:
        patched.setattr("budget._ledger.PREVIEW_VERSION", 1)
        with Budget.open(tmp_path / "v1", {"result_cap": 5_000}) as b:
            first = _contents(b.prepare(_history(1), now=1).messages)
    with Budget.open(tmp_path / "v1", {"result_cap": 5_000}) as b:
        both = _contents(b.prepare(_history(2), now=2).messages)
    with Budget.open(tmp_path / "v2", {"result_cap": 5_000}) as b:
        fresh = _contents(b.prepare(_history(2), now=2).messages)
    markers = [next(x for x in text.split("\n") if x.startswith("--- preview")) for text in both]
    assert both[0] == first[0]
    assert markers == ["--- preview: head_tail; left out: lines 68–2,935 ---"] * 2
    assert all("(2,868 lines, " in text for text in fresh)


def test_an_envelope_naming_its_file_sends_the_agent_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``include_path`` a spilled output's envelope says to read its file with the agent's
    own tools and names no read-back tool (behind the proxy there is none), as stubs do; a
    session whose spills were logged at version 2 goes on naming the tool, its bytes unchanged."""
    msgs = _history(2)
    config = {"result_cap": 5_000, "include_path": True}
    with Budget.open(tmp_path / "new", config) as b:
        new = _contents(b.prepare(msgs, now=1).messages)
    assert all("Read more from the file below with your own tools" in t for t in new)
    assert not any("toolbudget_read" in t for t in new)
    assert all("\nFile: " in t for t in new)
    with monkeypatch.context() as patched:
        patched.setattr("budget._ledger.PREVIEW_VERSION", 2)
        with Budget.open(tmp_path / "v2", config) as b:
            first = _contents(b.prepare(msgs[:3], now=1).messages)
    with Budget.open(tmp_path / "v2", config) as b:
        both = _contents(b.prepare(msgs, now=2).messages)
    assert both[0] == first[0]
    assert all("Read more with the toolbudget_read tool" in t for t in both)
