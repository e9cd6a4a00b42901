"""Read-back evidence: every later call naming a hidden result's ref counts, whatever tool made it.

The cost policy's read-back rate (``budget.policy.readback_chance``) is learned from the session:
a call of the read-back tool, or of the agent's own tools opening the spilled file an envelope
names, is a read-back; a hidden result no call named is evidence the preview did. These tests
run real sessions on disk and read the counts from the decision log's request records.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from budget import Budget, BudgetConfig, BudgetError
from budget._errors import SessionLocked
from budget.formats._common import call_facts
from spill import LocalStore, ref_for

BIG = "\n".join(f"line {i}: " + "x" * 70 for i in range(1_000))  # ~78k chars: over the cap
"""A result over the 50,000-character cap: spilled at first sight whatever the policy says."""

READBACKS = 6
"""Index of the read-backs count in a request record's ``p`` (``Observed.to_record``)."""
RECALLED = 15
"""Index of the count of results read back (each once) in the same record."""


def _call(call_id: str, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": [
        {"type": "tool_use", "id": call_id, "name": name, "input": tool_input}]}  # fmt: skip


def _result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": call_id, "content": text}]}  # fmt: skip


def _readbacks(path: Path, field: int = READBACKS) -> list[int]:
    (log,) = list(path.rglob("*.jsonl"))
    records = [json.loads(line) for line in log.read_text().splitlines()]
    return [rec["p"][field] for rec in records if rec.get("t") == "req"]


def _spilled_history() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Look at the log."},
        _call("c1", "Bash", {"command": "cat big.log"}),
        _result("c1", BIG),
    ]


def _run(path: Path, follow_ups: list[list[dict[str, Any]]], **cfg: Any) -> Budget:
    """Prepare the spilled history, then each follow-up appended in turn; the session open."""
    session = Budget.open(path, BudgetConfig(**cfg))
    history = _spilled_history()
    session.prepare(history, now=1.0)
    for i, extra in enumerate(follow_ups):
        history = history + extra
        session.prepare(history, now=2.0 + i)
    return session


def _one_more_request_after_a_restart(path: Path, history: list[dict[str, Any]]) -> None:
    """Reopen the session at ``path`` and prepare ``history`` with one more round."""
    reopened = Budget.open(path)
    try:
        more = [*history, _call("c3", "Bash", {"command": "pwd"}), _result("c3", "/")]
        reopened.prepare(more, now=3.0)
    finally:
        reopened.close()


def test_call_facts_find_a_ref_in_a_path_and_in_a_read_tool_input() -> None:
    """A 32-hex ref standing alone is found in a command, a file path and a ``ref`` field."""
    ref = ref_for("some output")
    path = f"/home/u/.toolbudget/sessions/s/bodies/{ref[:2]}/{ref}.txt"
    assert call_facts("Bash", {"command": f"sed -n 1,40p {path}"})[1] == (ref,)
    assert call_facts("Read", {"file_path": path, "limit": 40})[1] == (ref,)
    assert call_facts("toolbudget_read", '{"ref": "' + ref + '"}')[1] == (ref,)
    assert call_facts("Bash", {"command": "ls"})[1] == ()


def test_call_facts_ignore_longer_hex_runs() -> None:
    """A git commit id (40 hex digits) or a 33-digit run is no ref; two refs are both found."""
    sha = "0123456789abcdef0123456789abcdef01234567"
    assert call_facts("Bash", {"command": f"git show {sha}"})[1] == ()
    assert call_facts("Bash", {"command": "echo " + "a" * 33})[1] == ()
    a, b = ref_for("a"), ref_for("b")
    assert call_facts("Bash", {"command": f"diff {a}.txt {b}.txt"})[1] == (a, b)


@given(st.text(max_size=200))
def test_call_facts_keep_the_call_key_and_name_only_refs_of_the_input(noise: str) -> None:
    """The key is ``call_key``'s as before; every ref named is 32 lowercase hex digits in the input."""
    key, refs = call_facts("Bash", {"command": noise})
    assert key == call_facts("Bash", {"command": noise})[0]
    for ref in refs:
        assert len(ref) == 32 and set(ref) <= set("0123456789abcdef")
        assert ref in json.dumps(noise)


def test_the_agents_own_tool_opening_the_spilled_file_is_a_readback(tmp_path: Path) -> None:
    """With ``include_path`` the envelope names the body's file; a later ``cat`` of that file is
    counted as a read-back in the next request's record."""
    session = Budget.open(tmp_path / "s", BudgetConfig(include_path=True))
    history = _spilled_history()
    try:
        session.prepare(history, now=1.0)
        decision = session.decision("c1")
        assert decision is not None and decision.kind == "spilled" and decision.ref is not None
        path = session.store.path_of(decision.ref)
        assert path is not None and path in (decision.text or "")
        history = [*history, _call("c2", "Bash", {"command": f"cat {path}"}), _result("c2", BIG)]
        session.prepare(history, now=2.0)
    finally:
        session.close()
    assert _readbacks(tmp_path / "s") == [0, 1]


def test_the_read_tool_naming_the_ref_is_a_readback_and_other_hex_is_not(tmp_path: Path) -> None:
    """The read-back tool's call counts; a call naming a ref no result was hidden under does
    not; the count comes back the same after a restart (the history is scanned again)."""
    ref = ref_for(BIG)
    follow = [
        [_call("c2", "Bash", {"command": f"echo {ref_for('never hidden')}"}), _result("c2", "ok")],
        [_call("c3", "toolbudget_read", {"ref": ref}), _result("c3", "page")],
    ]
    _run(tmp_path / "s", follow).close()
    assert _readbacks(tmp_path / "s") == [0, 0, 1]
    reopened = Budget.open(tmp_path / "s")
    try:
        history = _spilled_history() + follow[0] + follow[1]
        history = [*history, _call("c4", "Bash", {"command": "ls"}), _result("c4", "a b")]
        reopened.prepare(history, now=9.0)
    finally:
        reopened.close()
    assert _readbacks(tmp_path / "s") == [0, 0, 1, 1]


def test_a_noted_readback_counts_and_survives_a_restart(tmp_path: Path) -> None:
    """``note_readback`` (a read the history will not show) counts on the next request; after a
    restart the logged count is kept as a floor."""
    session = _run(tmp_path / "s", [])
    try:
        session.note_readback()
        history = [*_spilled_history(), _call("c2", "Bash", {"command": "ls"}), _result("c2", "")]
        session.prepare(history, now=2.0)
    finally:
        session.close()
    assert _readbacks(tmp_path / "s") == [0, 1]
    _one_more_request_after_a_restart(tmp_path / "s", history)
    assert _readbacks(tmp_path / "s") == [0, 1, 1]


def test_a_result_read_back_twice_is_two_readbacks_of_one_result(tmp_path: Path) -> None:
    """Two calls of the read-back tool naming the same ref count two read-backs and one result
    read back; so does a restart (the history is scanned again, the log's counts a floor)."""
    ref = ref_for(BIG)
    follow = [
        [_call("c2", "toolbudget_read", {"ref": ref}), _result("c2", "page 1")],
        [_call("c3", "toolbudget_read", {"ref": ref, "page": 2}), _result("c3", "page 2")],
    ]
    _run(tmp_path / "s", follow).close()
    assert _readbacks(tmp_path / "s") == [0, 1, 2]
    assert _readbacks(tmp_path / "s", RECALLED) == [0, 1, 1]
    reopened = Budget.open(tmp_path / "s")
    try:
        history = [
            *_spilled_history(),
            *follow[0],
            *follow[1],
            _call("c4", "Bash", {"command": "ls"}),
        ]
        reopened.prepare([*history, _result("c4", "a b")], now=9.0)
    finally:
        reopened.close()
    assert _readbacks(tmp_path / "s", RECALLED) == [0, 1, 1, 1]


def test_noted_readbacks_of_one_ref_are_one_result_and_unnamed_ones_each_their_own(
    tmp_path: Path,
) -> None:
    """``note_readback(ref)`` twice for one result counts one result read back; two without a
    ref count two (nothing says they were the same); a ref that is not a string, or names no
    result the session hid, is refused."""
    session = _run(tmp_path / "s", [])
    ref = ref_for(BIG)
    try:
        session.note_readback(ref)
        session.note_readback(ref)
        history = [*_spilled_history(), _call("c2", "Bash", {"command": "ls"}), _result("c2", "")]
        session.prepare(history, now=2.0)
        session.note_readback()
        session.note_readback()
        history = [*history, _call("c3", "Bash", {"command": "pwd"}), _result("c3", "/")]
        session.prepare(history, now=3.0)
        with pytest.raises(BudgetError, match="ref must be"):
            session.note_readback(7)  # type: ignore[arg-type]
        with pytest.raises(BudgetError, match="ref must be"):
            session.note_readback("")
        with pytest.raises(BudgetError, match="names no result this session has hidden"):
            session.note_readback(ref_for("a result this session never saw"))
    finally:
        session.close()
    assert _readbacks(tmp_path / "s") == [0, 2, 4]
    assert _readbacks(tmp_path / "s", RECALLED) == [0, 1, 3]


def test_a_trimmed_results_stub_names_its_file_where_envelopes_do(tmp_path: Path) -> None:
    """With ``include_path`` a stub names the body's file (an agent behind the proxy has no
    read-back tool), the file holds the exact text, and a later ``cat`` of it is a read-back;
    without it the stub names the read-back tool and no path."""
    from tests.strategies import conversation

    outputs = [[f"{r:03d} " + "log line of a build output\n" * 200] for r in range(12)]
    history = conversation(outputs)
    for r, m in enumerate(history[1::2]):  # each its own command: no output re-runs another
        m["content"][-1]["input"] = {"command": f"make step{r}"}
    stubs: dict[bool, str] = {}
    for include_path in (True, False):
        path = tmp_path / f"s-{include_path}"
        with Budget.open(path, BudgetConfig(include_path=include_path, fsync=False)) as session:
            for end in range(3, len(history) + 1, 2):
                # Requests 1,000 s apart: the cache is cold on each, so aged results are trimmed.
                session.prepare(history[:end], now=1_000.0 * end)
            d = session.decision("call_0_0")
            assert d is not None and d.kind == "trimmed" and d.ref is not None and d.text
            stubs[include_path] = d.text
            file = session.store.path_of(d.ref)
            if include_path:
                assert file is not None and f"the file {file}" in d.text
                assert Path(file).read_text() == outputs[0][0]
            else:
                assert 'toolbudget_read {"ref": "' + d.ref + '"}' in d.text
    assert "/bodies/" in stubs[True] and "/bodies/" not in stubs[False]


KEPT = "log line of a build output\n" * 400
"""A result under the cap (kept whole at first), over the staleness floor (trimmed once aged)."""


def _kept_then_trimmed(path: Path, named_at: int) -> list[dict[str, Any]]:
    """Four requests (3, 5, 7 and 9 messages): a build's output kept, a ``ls`` round, a cold
    cache trimming the output on the third, then the read-back tool's call reading it on the
    fourth; the call of round ``named_at`` (2 or 3) also names the output's ref. The history."""
    ref = ref_for(KEPT)
    names = {"command": f"echo {ref}"}
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "Build."},
        _call("c1", "Bash", {"command": "make"}),
        _result("c1", KEPT),
        _call("c2", "Bash", names if named_at == 2 else {"command": "ls"}),
        _result("c2", "ok"),
        _call("c3", "Bash", names if named_at == 3 else {"command": "ls"}),
        _result("c3", "a b"),
        _call("c4", "toolbudget_read", {"ref": ref}),
        _result("c4", "page"),
    ]
    with Budget.open(path, BudgetConfig(protect_rounds=1, fsync=False)) as session:
        for end, now in ((3, 1.0), (5, 2.0), (7, 2_000.0), (9, 2_001.0)):
            session.prepare(history[:end], now=now)
            d = session.decision("c1")
            assert d is not None and d.kind == ("trimmed" if end >= 7 else "kept")
    return history


def test_a_call_naming_a_kept_results_ref_is_no_readback_once_it_is_trimmed(
    tmp_path: Path,
) -> None:
    """A call naming the ref of a result still kept whole (message 3), which a cold-cache batch
    trims later (the request of 7 messages): only the read-back tool's call after it (message
    7) is a read-back, in the session that went on and in one resumed after it (which looks at
    every call again)."""
    history = _kept_then_trimmed(tmp_path / "s", named_at=2)
    assert _readbacks(tmp_path / "s") == [0, 0, 0, 1]
    with Budget.open(tmp_path / "s") as reopened:
        reopened.prepare(
            [*history, _call("c5", "Bash", {"command": "pwd"}), _result("c5", "/")], now=2_002.0
        )
    assert _readbacks(tmp_path / "s") == [0, 0, 0, 1, 1]


def test_a_call_the_trimming_request_held_is_no_readback_when_looked_at_again(
    tmp_path: Path,
) -> None:
    """A call naming the ref in the last messages of the request that trims its result (message
    5 of 7) came before any copy showed it hidden: the next request, which looks at those
    messages again, does not count it; the read-back tool's call after it counts."""
    _kept_then_trimmed(tmp_path / "s", named_at=3)
    assert _readbacks(tmp_path / "s") == [0, 0, 0, 1]


def _requests(path: Path) -> list[tuple[Any, Any]]:
    (log,) = list(path.rglob("*.jsonl"))
    records = [json.loads(line) for line in log.read_text().splitlines()]
    return [(rec["p"], rec.get("r")) for rec in records if rec.get("t") == "req"]


@pytest.mark.parametrize("named", [True, False])
def test_a_resumed_session_counts_the_hosts_readbacks_as_the_one_that_went_on(
    tmp_path: Path, named: bool
) -> None:
    """A read-back the host noted before a restart, then the read-back tool's call on the same
    result after it: the resumed session logs the records the uninterrupted one logs (two
    read-backs; one result when the note named it, two when it did not)."""
    ref = ref_for(BIG)
    second = [*_spilled_history(), _call("c2", "Bash", {"command": "ls"}), _result("c2", "")]
    third = [*second, _call("c3", "toolbudget_read", {"ref": ref}), _result("c3", "page")]
    for name, restart in (("on", False), ("resumed", True)):
        session = _run(tmp_path / name, [])
        session.note_readback(ref if named else None)
        session.prepare(second, now=2.0)
        if restart:
            session.close()
            session = Budget.open(tmp_path / name)
        session.prepare(third, now=3.0)
        session.close()
    assert _requests(tmp_path / "resumed") == _requests(tmp_path / "on")
    assert _readbacks(tmp_path / "on") == [0, 1, 2]
    assert _readbacks(tmp_path / "on", RECALLED) == [0, 1, 1 if named else 2]


def test_a_damaged_record_of_the_hosts_readbacks_is_none() -> None:
    """``r`` of the wrong shape, or naming more results than it counts, restores no reports."""
    from budget.session._records import noted_of

    assert noted_of({"r": [3, 1, ["a", "b"]]}) == (3, 1, frozenset({"a", "b"}))
    for bad in ([2, 1, ["a", "b"]], [1, 2, []], [True, 0, []], [1, 0, [7]], [1, 0], "r", None):
        assert noted_of({"r": bad}) == (0, 0, frozenset()), bad
    assert noted_of(None) == (0, 0, frozenset())


def _notes(path: Path) -> list[Any]:
    (log,) = list(path.rglob("*.jsonl"))
    records = [json.loads(line) for line in log.read_text().splitlines()]
    return [rec.get("ref") for rec in records if rec.get("t") == "rb"]


def test_each_hosts_readback_is_logged_when_noted_and_resumed_from_the_log(
    tmp_path: Path,
) -> None:
    """Each note is a record of its own, logged when it is made (no request record repeats the
    list of refs), and a session reopened later counts on from them."""
    ref = ref_for(BIG)
    session = _run(tmp_path / "s", [])
    history = _spilled_history()
    try:
        session.note_readback(ref)
        assert _notes(tmp_path / "s") == [ref]
        for i in range(3):
            history = [*history, _call(f"c{i}", "Bash", {"command": "ls"}), _result(f"c{i}", "x")]
            session.prepare(history, now=2.0 + i)
    finally:
        session.close()
    assert [r for _, r in _requests(tmp_path / "s")] == [None] * 4
    reopened = Budget.open(tmp_path / "s")
    try:
        reopened.note_readback(ref)
        reopened.note_readback()
        history = [*history, _call("c9", "Bash", {"command": "pwd"}), _result("c9", "/")]
        reopened.prepare(history, now=9.0)
    finally:
        reopened.close()
    assert _notes(tmp_path / "s") == [ref, ref, None]
    assert _readbacks(tmp_path / "s")[-1] == 3
    assert _readbacks(tmp_path / "s", RECALLED)[-1] == 2


_KILLED_AFTER_A_NOTE = """
import os, signal, sys
from budget import Budget
from tests.budget.test_readback_evidence import _spilled_history
session = Budget.open(sys.argv[1])
session.prepare(_spilled_history(), now=1.0)
session.note_readback(sys.argv[2])
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_readback_noted_after_the_last_request_survives_a_crash(tmp_path: Path) -> None:
    """A process noting a read-back after its last request, then killed (SIGKILL, no close),
    leaves it in the log: the reopened session's next request counts it, and the same result
    noted again after the restart counts a second read-back."""
    import subprocess
    import sys

    ref = ref_for(BIG)
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", _KILLED_AFTER_A_NOTE, str(tmp_path / "s"), ref],
        cwd=root, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == -9, done.stderr
    reopened = Budget.open(tmp_path / "s")
    try:
        # The first append after the restart settles the crash's tail, which holds the same
        # record: this note is a read-back more, not the tail's one made again.
        reopened.note_readback(ref)
        history = [*_spilled_history(), _call("c2", "Bash", {"command": "ls"}), _result("c2", "")]
        reopened.prepare(history, now=2.0)
        history = [*history, _call("c3", "Bash", {"command": "pwd"}), _result("c3", "/")]
        reopened.prepare(history, now=3.0)
    finally:
        reopened.close()
    assert _notes(tmp_path / "s") == [ref, ref]
    assert _readbacks(tmp_path / "s") == [0, 2, 2]
    assert _readbacks(tmp_path / "s", RECALLED) == [0, 1, 1]


def test_notes_after_an_old_logs_request_record_count_on_from_its_r() -> None:
    """A log written before notes were records of their own holds the tally in a request
    record's ``r``: the notes after the last such record add to it; a malformed note is
    skipped."""
    from budget.session._records import last_noted

    old: dict[str, Any] = {"t": "req", "r": [2, 1, ["a"]]}
    log: list[dict[str, Any]] = [
        {"t": "rb", "ref": "z"}, old, {"t": "rb", "ref": "b"}, {"t": "rb", "ref": None},
    ]  # fmt: skip
    assert last_noted(log) == (4, 2, frozenset({"a", "b"}))
    assert last_noted([*log, {"t": "rb", "ref": 7}, {"t": "rb", "ref": ""}]) == last_noted(log)
    assert last_noted([{"t": "rb", "ref": "a"}, {"t": "req"}]) == (1, 0, frozenset({"a"}))
    assert last_noted([]) == (0, 0, frozenset())


def test_a_note_on_a_closed_session_is_refused(tmp_path: Path) -> None:
    """``note_readback`` after ``close`` raises the closed session's error, as ``prepare`` does."""
    session = _run(tmp_path / "s", [])
    session.close()
    with pytest.raises(BudgetError, match="closed"):
        session.note_readback()


class _LockedOnce(LocalStore):
    """A store whose next log append, once armed, is refused as if another writer held it."""

    armed = False

    def append_log(self, records: Any) -> None:
        if self.armed:
            self.armed = False
            raise SessionLocked("another writer holds the session (test)")
        super().append_log(records)


def test_a_note_another_writers_lock_refused_is_not_logged_when_noted_again(
    tmp_path: Path,
) -> None:
    """A note refused with SessionLocked is neither counted nor left queued: noted again, the log
    holds it once, and the live and the reopened session count one read-back."""
    ref = ref_for(BIG)
    store = _LockedOnce(tmp_path / "s")
    session = Budget(store)
    history = _spilled_history()
    try:
        session.prepare(history, now=1.0)
        store.armed = True
        with pytest.raises(SessionLocked):
            session.note_readback(ref)
        session.note_readback(ref)
        history = [*history, _call("c2", "Bash", {"command": "ls"}), _result("c2", "")]
        session.prepare(history, now=2.0)
    finally:
        session.close()
    assert _notes(tmp_path / "s") == [ref]
    assert _readbacks(tmp_path / "s") == [0, 1]
    _one_more_request_after_a_restart(tmp_path / "s", history)
    assert _readbacks(tmp_path / "s") == [0, 1, 1]
