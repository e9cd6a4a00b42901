"""Regressions for the bugs the reliability work found in the core and the store, one test each."""

from __future__ import annotations

import json
import os
import stat
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from budget import Budget, ConfigError, InputError, RefError
from spill import FsspecStore, LocalStore, validate_ref
from spill._log import encode_records
from tests._ci import require_module
from tests.conversations import CONFIG, conversation, digest
from tests.strategies import assistant, results

FAST = CONFIG.model_copy(update={"fsync": False})


def unbroken(path: Path, seed: int, rounds: int) -> list[str]:
    """Digests of every request copy of an uninterrupted replay."""
    msgs, steps = conversation(seed, rounds)
    with Budget.open(path, FAST) as b:
        return [
            digest(b.prepare(msgs[: s.length], usage=s.usage, now=s.now).messages) for s in steps
        ]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 12])
def test_resumed_and_retried_requests_match_an_unbroken_run(tmp_path: Path, seed: int) -> None:
    """A session closed before request ``at`` (or after it, the agent then retrying it) and
    reopened gives the unbroken run's bytes from there on. Three bugs broke this: a batch due
    on the first request after resume did not run; decided results were counted raw after a
    resume, so "pressure" fired wrongly; a retried request was counted twice, so "pays" fired
    early and the usage anchor started from the wrong message."""
    expected = unbroken(tmp_path / "ref", seed, 40)
    msgs, steps = conversation(seed, 40)
    for at in range(2, 40, 3):
        retry = at % 2 == 1
        path = tmp_path / f"at-{at}"
        with Budget.open(path, FAST) as b:
            for s in steps[: at + 1 if retry else at]:
                b.prepare(msgs[: s.length], usage=s.usage, now=s.now)
        with Budget.open(path, FAST) as b:
            got = [
                digest(b.prepare(msgs[: s.length], usage=s.usage, now=s.now).messages)
                for s in steps[at:]
            ]
        assert got == expected[at:], f"resumed at {at}, retry={retry}"


def test_a_retry_in_the_same_process_is_not_counted_twice(tmp_path: Path) -> None:
    """Preparing the same history again (after a provider error) keeps the request number and
    gives the same copy as the first attempt."""
    msgs, steps = conversation(12, 14)
    with Budget.open(tmp_path / "s", FAST) as b:
        for s in steps[:-1]:
            b.prepare(msgs[: s.length], usage=s.usage, now=s.now)
        last = steps[-1]
        first = b.prepare(msgs[: last.length], usage=last.usage, now=last.now)
        again = b.prepare(msgs[: last.length], usage=last.usage, now=last.now)
    assert again.report.request == first.report.request == len(steps)
    assert digest(again.messages) == digest(first.messages)


def test_a_failed_prepare_leaves_the_session_usable(tmp_path: Path) -> None:
    """After prepare raises InputError midway through a long new tail, the next prepare of a
    good history gives the same copy as a session that never saw the bad one (it used to
    raise IndexError: the per-message caches were left half updated)."""
    msgs, steps = conversation(3, 12)
    orphan = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "nope"}]}
    with Budget.open(tmp_path / "a", FAST) as b:
        b.prepare(msgs[: steps[1].length], now=steps[1].now)
        with pytest.raises(InputError, match="'nope'"):
            b.prepare([*msgs, orphan], now=steps[-1].now)
        got = b.prepare(msgs, now=steps[-1].now)
    with Budget.open(tmp_path / "b", FAST) as b:
        b.prepare(msgs[: steps[1].length], now=steps[1].now)
        expected = b.prepare(msgs, now=steps[-1].now)
    assert digest(got.messages) == digest(expected.messages)


@pytest.mark.parametrize(
    "now", ["12", float("nan"), float("inf"), True, [1], object(), 10**400, -(10**400)]
)
def test_now_must_be_a_finite_number(now: Any) -> None:
    """A bad clock value is an InputError naming ``now`` (a string used to escape as ValueError,
    an int past the largest float as OverflowError)."""
    with pytest.raises(InputError, match="now must be a finite number"):
        Budget.in_memory().prepare([{"role": "user", "content": "hi"}], now=now)


def test_an_int_past_the_largest_float_is_infinite_seconds_never_an_overflow(
    tmp_path: Path,
) -> None:
    """``10**400`` seconds, where ``float("inf")`` is accepted (a lock wait, a gc's age and
    clock), is infinity too: before, ``float()`` raised OverflowError out of LocalStore,
    Budget.open and FsspecStore.gc_sessions; a negative one is still refused."""
    huge = 10**400
    LocalStore(tmp_path / "a", lock_timeout=huge).close()
    Budget.open(tmp_path / "b", lock_timeout=huge).close()
    with pytest.raises(ConfigError, match="lock_timeout must be >= 0"):
        LocalStore(tmp_path / "c", lock_timeout=-huge)
    require_module("fsspec", "s3")
    root = f"memory://{tmp_path.name}-gc"
    FsspecStore(f"{root}/s").close()  # never written: nothing to collect, but a root to list
    assert FsspecStore.gc_sessions(root, older_than_s=huge) == []
    assert FsspecStore.gc_sessions(root, older_than_s=1, now=-huge) == []
    with pytest.raises(ConfigError, match="older_than_s must be >= 0"):
        FsspecStore.gc_sessions(root, older_than_s=-huge)


def test_too_deep_nesting_is_an_input_error_and_the_session_survives() -> None:
    """A tool input nested deeper than Python can walk is an InputError, not a RecursionError,
    and the session still budgets a normal history afterwards."""
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(20_000):
        node["a"] = {}
        node = node["a"]
    msgs = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c", "name": "x", "input": deep}],
        },
        results(("c", "out")),
    ]
    b = Budget.in_memory()
    with pytest.raises(InputError, match="nest too deeply"):
        b.prepare(msgs, now=0)
    ok = [{"role": "user", "content": "go"}, assistant(("c", "x")), results(("c", "out"))]
    assert b.prepare(ok, now=1).messages == ok


def test_records_a_failed_append_left_are_written_by_the_next(tmp_path: Path) -> None:
    """When one log append fails, its records are appended with the next request's, so a
    resumed session keeps that request's decisions (a trimmed result stays trimmed)."""
    msgs, steps = conversation(1, 16)
    batch = 14  # the reference run trims at this request (cold cache)
    with Budget.open(tmp_path / "s", FAST) as b:
        for i, s in enumerate(steps):
            if i == batch:
                store = b.store
                assert isinstance(store, LocalStore)
                real = store.append_log

                def failing(records: Any) -> None:
                    raise OSError(28, "No space left on device")

                store.append_log = failing  # type: ignore[method-assign]
                with capture_logs() as logs:
                    req = b.prepare(msgs[: s.length], usage=s.usage, now=s.now)
                store.append_log = real  # type: ignore[method-assign]
                assert req.report.staleness_ran
                trimmed = {d.call_id for d in req.report.decisions if d.kind == "trimmed"}
                assert [e["event"] for e in logs if e["log_level"] == "error"] == [
                    "toolbudget.log.append_failed"
                ]
            else:
                last = b.prepare(msgs[: s.length], usage=s.usage, now=s.now)
    with Budget.open(tmp_path / "s", FAST) as b:
        for cid in trimmed:
            decision = b.decision(cid)
            assert decision is not None and decision.kind == "trimmed"
        again = b.prepare(msgs[: steps[-1].length], usage=steps[-1].usage, now=steps[-1].now)
    assert digest(again.messages) == digest(last.messages)


def test_records_still_unlogged_are_written_on_close(tmp_path: Path) -> None:
    """A failed append on the last request is retried by close()."""
    msgs, steps = conversation(2, 3)
    b = Budget.open(tmp_path / "s", FAST)
    store = b.store
    real = store.append_log

    def failing(records: Any) -> None:
        raise OSError(5, "Input/output error")

    store.append_log = failing  # type: ignore[method-assign]
    with capture_logs():
        for s in steps:
            b.prepare(msgs[: s.length], usage=s.usage, now=s.now)
    store.append_log = real  # type: ignore[method-assign]
    decided = {cid for cid in (f"toolu_{r:02d}_0" for r in range(3)) if b.decision(cid)}
    b.close()
    with LocalStore(tmp_path / "s") as store2:
        logged = {r["id"] for r in store2.read_log() if r.get("t") == "d"}
        requests = [r["n"] for r in store2.read_log() if r.get("t") == "req"]
    assert decided and decided <= logged
    assert requests == [1, 2, 3]


@pytest.mark.parametrize(
    "record",
    [
        {"t": "req", "n": "seven", "at": 1.0, "m": 3},
        {"t": "req", "n": 2, "at": "noon", "m": None},
        {"t": "req", "n": -1, "m": 2},
        {"t": "ovf", "count": [1]},
        {"t": "d", "id": 5, "kind": "kept"},
        # Decision records are checked when the history asks for their call id (lazily).
        {"t": "d", "id": "toolu_00_0", "kind": "exploded", "chars": 1},
        {"t": "d", "id": "toolu_00_0", "kind": [], "chars": 1},  # raised TypeError (unhashable)
        {"t": "d", "id": "toolu_00_0", "kind": "spilled", "chars": 5, "text": "x", "ref": "../"},
    ],
)
def test_checksummed_but_malformed_records_are_skipped_on_resume(
    tmp_path: Path, record: dict[str, Any]
) -> None:
    """A record with a valid checksum but wrong field types (another writer) is skipped with a
    warning; it used to raise ValueError/TypeError out of Budget.open."""
    msgs, steps = conversation(4, 4)
    with Budget.open(tmp_path / "s", FAST) as b:
        for s in steps:
            last = b.prepare(msgs[: s.length], usage=s.usage, now=s.now)
    closing = {"t": "req", "n": len(steps), "at": steps[-1].now + 0.5, "m": steps[-1].length}
    with (tmp_path / "s" / "decisions.jsonl").open("ab") as log:
        # A decision record counts once a request record closes it (else it is a cut-off tail).
        log.write(encode_records([record, closing] if record["t"] == "d" else [record]))
    with capture_logs() as logs, Budget.open(tmp_path / "s", FAST) as b:
        again = b.prepare(msgs[: steps[-1].length], usage=steps[-1].usage, now=steps[-1].now + 1)
    assert any(e["event"] == "toolbudget.log.record_skipped" for e in logs)
    assert again.messages == last.messages


def test_a_str_subclass_cannot_smuggle_another_ref_past_validation(tmp_path: Path) -> None:
    """validate_ref returns the exact characters it checked: a str subclass whose str() is a
    path no longer makes the store open a file outside the session."""
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")

    class Sly(str):
        def __str__(self) -> str:
            return "../../outside"

    sly = Sly("0" * 32)
    assert type(validate_ref(sly)) is str and validate_ref(sly) == "0" * 32
    with LocalStore(tmp_path / "s") as store:
        with pytest.raises(RefError, match="no body is stored"):
            store.get(sly)
        assert not store.has(sly)


@pytest.mark.parametrize("grep", ["(a+)+$", r"(\w+\s?)*$", "(a|aa)*c", "(a*)*b"])
def test_patterns_that_backtrack_exponentially_run_in_linear_time(grep: str) -> None:
    """Nested quantifiers and alternations under a quantifier, which used to hang a
    backtracking engine for minutes on 50 lines, are searched by RE2 in linear time."""
    b = Budget.in_memory({"result_cap": 1_000, "preview_chars": 100})
    text = ("a" * 28 + "b\n") * 50
    msgs = [{"role": "user", "content": "go"}, assistant(("c", "bash")), results(("c", text))]
    ref = b.prepare(msgs, now=0).report.decisions[0].ref
    assert ref is not None
    started = time.monotonic()
    expected = text if grep in ("(a*)*b", r"(\w+\s?)*$") else ""
    assert b.read(ref, grep=grep) == expected
    assert time.monotonic() - started < 1.5


@pytest.mark.parametrize(
    ("grep", "error"),
    [
        (r"(x)\1", "invalid escape sequence: \\1"),
        ("(?P<x>a)(?P=x)", "invalid perl operator: (?P"),
        ("(?=a)b", "invalid perl operator: (?="),
        ("[", "missing ]: ["),
        ("a{2,1}", "invalid repetition size: {2,1}"),
    ],
)
def test_an_invalid_or_unsupported_grep_pattern_is_refused_with_the_regex_error(
    grep: str, error: str
) -> None:
    """A pattern RE2 cannot compile (a syntax error, a backreference, a lookaround) is refused
    with RE2's own message, in the tool and in read(), instead of being searched as text."""
    b = Budget.in_memory({"result_cap": 1_000, "preview_chars": 100})
    text = "".join(f"[ line {i} (x)\\1\n" for i in range(200))
    msgs = [{"role": "user", "content": "go"}, assistant(("c", "bash")), results(("c", text))]
    ref = b.prepare(msgs, now=0).report.decisions[0].ref
    assert ref is not None
    result = b.read_tool_result({"ref": ref, "grep": grep})
    assert result.is_error
    assert result.text == f"Error: grep is not a valid regular expression: {error}"
    with pytest.raises(InputError, match="not a valid regular expression"):
        b.read(ref, grep=grep)


def test_sequential_quantifiers_on_long_lines_finish_well_within_the_time_bound() -> None:
    """``a*a*c``-style patterns over 4,000-character lines (13 s to minutes with the
    windowed backtracking search) give the right lines at once."""
    b = Budget.in_memory({"result_cap": 1_000, "preview_chars": 100})
    lines = ["a" * 4_000 + ("c" if i % 50 == 0 else "b") + "\n" for i in range(300)]
    msgs = [
        {"role": "user", "content": "go"},
        assistant(("c", "bash")),
        results(("c", "".join(lines))),
    ]
    ref = b.prepare(msgs, now=0).report.decisions[0].ref
    assert ref is not None
    started = time.monotonic()
    for grep in ("a*a*c", "a*a*a*c", "a*a*a*a*a*a*c$"):
        assert b.read(ref, grep=grep) == "".join(lines[::50])
        page = b.read_tool_result({"ref": ref, "grep": grep})
        assert not page.is_error and " of 6\n     1\ta" in page.text, page.text[:200]
    assert time.monotonic() - started < 1.9  # generous: a blocked CPU, not the engine


def test_a_grep_past_its_time_bound_stops_with_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clock is read between bounded search calls: past the bound, grep stops with an
    error naming the line instead of running on."""
    from budget import _grep

    b = Budget.in_memory({"result_cap": 1_000, "preview_chars": 100})
    text = "first line\n" + "a" * 2_000_000 + "\nerror at the end\n"
    msgs = [{"role": "user", "content": "go"}, assistant(("c", "bash")), results(("c", text))]
    ref = b.prepare(msgs, now=0).report.decisions[0].ref
    assert ref is not None
    assert b.read(ref, grep=".*error.*") == "error at the end\n"
    monkeypatch.setattr(_grep, "_GREP_SECONDS", -1.0)  # every check is past the bound
    page = b.handle_read_tool({"ref": ref, "grep": r"\w+z"})
    assert page.startswith("Error: grep stopped after -1 s at line 1")


def test_unknown_read_back_arguments_are_named_briefly() -> None:
    """Unknown argument names from the model are shown shortened, a few at most."""
    b = Budget.in_memory()
    page = b.handle_read_tool(
        {"ref": "0" * 32, "x" * 100_000: 1, **{f"k{i}": i for i in range(50)}}
    )
    assert page.startswith("Error: unknown argument(s): ")
    assert "and 46 more" in page and len(page) < 400
    assert json.dumps(page)


@pytest.mark.parametrize(
    ("messages", "refused"),
    [
        ([{"role": ["user"], "content": "x"}], True),
        (
            [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "x"}]},
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "c", "content": [{"type": ["text"]}]}
                    ],
                },
            ],
            False,
        ),
        ([{"role": "user", "content": [{"type": {"a": 1}, "text": "x"}]}], False),
    ],
)
def test_unhashable_field_values_are_refused_or_passed_through(
    messages: list[Any], refused: bool
) -> None:
    """A role or block type holding a list or dict (found by fuzzing: it raised TypeError from
    a set lookup) is an InputError or an unknown block passed through untouched."""
    session = Budget.in_memory()
    if refused:
        with pytest.raises(InputError):
            session.prepare(messages, now=0)
    else:
        assert session.prepare(messages, now=0).messages == messages


def cut_off(tmp_path: Path, keep: int, *, warm: bool = False) -> tuple[Path, list[Any], list[Any]]:
    """A session whose log ends in the first ``keep`` decision lines of request 13 (a cold-cache
    batch) and half a line: as a crash in the middle of that append leaves it. Returns the
    path, the conversation and its steps (request 13 moved out of the cold pause if ``warm``)."""
    msgs, steps = conversation(1, 20)
    done = tmp_path / "done"
    with Budget.open(done, FAST) as b:
        for s in steps[:13]:
            b.prepare(msgs[: s.length], usage=s.usage, now=s.now)
    before = (done / "decisions.jsonl").read_bytes()
    with Budget.open(done, FAST) as b:
        s = steps[13]
        b.prepare(msgs[: s.length], usage=s.usage, now=s.now)
    added = (done / "decisions.jsonl").read_bytes()[len(before) :].splitlines(keepends=True)
    assert json.loads(added[-1])["t"] == "req" and keep < len(added) - 1
    torn = b"".join(added[:keep]) + added[keep][: len(added[keep]) // 2]
    (done / "decisions.jsonl").write_bytes(before + torn)
    if warm:
        steps = [*steps[:13], replace(steps[13], now=steps[12].now + 1)]
    return done, msgs, steps


@pytest.mark.parametrize("keep", [1, 3, 6])
def test_a_request_cut_off_mid_append_is_made_again_the_same_way(tmp_path: Path, keep: int) -> None:
    """Some of a batch's trims logged, not its request record: they are left to the retry,
    which trims the same way, writes none of them twice, and closes them; every later resume
    shows the same (a partial batch used to suppress the rest of it: the copy differed)."""
    expected = unbroken(tmp_path / "ref", 1, 20)
    path, msgs, steps = cut_off(tmp_path, keep)
    with capture_logs() as logs, Budget.open(path, FAST) as b:
        assert [e["records"] for e in logs if e["event"] == "toolbudget.log.tail_dropped"] == [keep]
        got = [
            digest(b.prepare(msgs[: s.length], usage=s.usage, now=s.now).messages)
            for s in steps[13:16]
        ]
    assert got == expected[13:16]
    with capture_logs() as logs, Budget.open(path, FAST) as b:
        s = steps[15]
        again = b.prepare(msgs[: s.length], usage=s.usage, now=s.now)
    assert digest(again.messages) == expected[15]
    skipped = [e["reason"] for e in logs if e["event"] == "toolbudget.log.line_skipped"]
    assert len(skipped) == 1  # the torn line itself, never a repeated record
    assert not [e for e in logs if e["event"] == "toolbudget.log.tail_dropped"]


def _bare(line: bytes) -> dict[str, Any]:
    """A log line's record without its sequence number and checksum fields."""
    return {k: v for k, v in json.loads(line).items() if k not in ("s", "crc", "v")}


def test_a_note_before_the_retry_leaves_the_cut_off_tail_to_it(tmp_path: Path) -> None:
    """A read-back the host notes after the restart, before the cut-off request is made again,
    is appended on its own and settles nothing: the retry still finds its logged trims in the
    tail and writes none of those it makes again a second time (withdrawing only one it now
    makes otherwise: the note changed the read-back rate), and shows the copies of a session
    that never stopped and noted the same read-back at the same point."""
    path, msgs, steps = cut_off(tmp_path, 3)
    with Budget.open(tmp_path / "ref", FAST) as ref:
        for s in steps[:13]:
            ref.prepare(msgs[: s.length], usage=s.usage, now=s.now)
        ref.note_readback()
        expected = [
            digest(ref.prepare(msgs[: s.length], usage=s.usage, now=s.now).messages)
            for s in steps[13:16]
        ]
    with capture_logs(), Budget.open(path, FAST) as b:
        b.note_readback()
        got = [
            digest(b.prepare(msgs[: s.length], usage=s.usage, now=s.now).messages)
            for s in steps[13:16]
        ]
    assert got == expected
    lines = (path / "decisions.jsonl").read_bytes().splitlines()
    torn = next(k for k, line in enumerate(lines) if not line.endswith(b"}"))
    bare = [_bare(x) for x in lines[torn - 3 : torn]]
    after = [_bare(x) for x in lines[torn + 1 :]]
    assert all(r["t"] == "d" for r in bare) and after[0] == {"t": "rb", "ref": None}
    assert not [r for r in bare if r in after]  # no tail decision written twice
    voided = [i for r in after if r["t"] == "void" for i in r["ids"]]
    assert len(voided) < len(bare)


def test_cut_off_decisions_the_retry_does_not_make_are_withdrawn(tmp_path: Path) -> None:
    """When the retry runs warm (no batch), the trims the cut-off attempt logged are withdrawn
    by a void record: no later resume shows them (they would have been closed by the retry's
    request record)."""
    path, msgs, steps = cut_off(tmp_path, 3, warm=True)
    s = steps[13]
    with capture_logs(), Budget.open(path, FAST) as b:
        shown = b.prepare(msgs[: s.length], usage=s.usage, now=s.now)
        assert not shown.report.staleness_ran
    with capture_logs(), Budget.open(path, FAST) as b:
        again = b.prepare(msgs[: s.length], usage=s.usage, now=s.now + 1)
        assert not [d for d in again.report.decisions if d.kind == "trimmed"]
    assert again.messages == shown.messages
    assert b'"t":"void"' in (path / "decisions.jsonl").read_bytes()


def test_a_request_refused_as_bad_input_does_not_fix_the_sessions_format(tmp_path: Path) -> None:
    """A history refused as bad input settles nothing: the next, valid one picks its own format."""
    bad: list[Any] = [
        {"role": "user", "content": "Task: investigate."},
        {"role": "assistant", "content": {"": None, "0": None}},
        {"role": "user"},
    ]
    anthropic: list[Any] = [
        {"role": "user", "content": "Task: investigate."},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
        },
    ]
    with Budget.open(tmp_path / "s") as session:
        with pytest.raises(InputError):
            session.prepare(bad)
        assert session.prepare(anthropic).report.format == "anthropic"
    with Budget.open(tmp_path / "s") as resumed:
        assert resumed.prepare(anthropic).report.format == "anthropic"


def test_a_file_url_session_directory_is_private_whatever_the_umask(tmp_path: Path) -> None:
    """A new file:// session's directory is made 0700 (as a plain path's is) under a umask of
    022, where fsspec alone made it 0755 and its spilled outputs readable by every user."""
    require_module("fsspec", "s3")
    url = (tmp_path / "sessions" / "s1").as_uri()
    old = os.umask(0o022)
    try:
        with Budget.open(url) as session:
            session.prepare(
                [
                    {"role": "user", "content": "go"},
                    assistant(("t1", "bash")),
                    results(("t1", "a line of output\n" * 4000)),
                ]
            )
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "sessions" / "s1").stat().st_mode) == 0o700


def test_a_file_url_session_spills_logs_and_resumes(tmp_path: Path) -> None:
    """Budget.open("file://...") (the docs: any fsspec URL) writes its bodies and log and resumes
    them, instead of a session whose every write fails because no directory is made."""
    require_module("fsspec", "s3")
    url = (tmp_path / "sessions" / "s1").as_uri()
    big = "line of a big tool output\n" * 4000
    msgs = [
        {"role": "user", "content": "go"},
        assistant(("t1", "bash")),
        results(("t1", big)),
    ]
    with Budget.open(url) as session:
        assert isinstance(session.store, FsspecStore)
        first = session.prepare(msgs)
        decision = session.decision("t1")
        assert decision is not None and decision.kind == "spilled"
    with Budget.open(url) as again:
        resumed = again.decision("t1")
        assert resumed is not None and resumed.kind == "spilled"
        assert again.prepare(msgs).messages == first.messages
        assert again.read(first.report.decisions[0].ref or "") == big
