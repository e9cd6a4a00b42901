"""Hostile input: what a model or a tool emits never reaches outside the session directory.

Refs and read-back arguments built to escape (traversal, absolute paths, NUL bytes, URL and
Windows forms, overlong, look-alike digits, str subclasses), call ids with path characters,
symlinks planted in the session, lone surrogates, deep nesting, wrong types and a 100 MB result.
Each is a BudgetError (an ``Error:`` text for the read-back tool) or handled as specified.

The witness is Python's audit hook: while a case runs, every file opened, created, renamed,
listed or removed is recorded. Relative names must be names the store builds itself (fixed
names, shards and bodies from validated refs, temp files), directory descriptors must point
inside the session, absolute paths must lie in it; and a sentinel directory beside the session
must come out untouched.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from budget import Budget, BudgetConfig, InputError, RefError, StoreError
from spill import LocalStore, ref_for
from tests.reliability._child import run_json_child
from tests.reliability._spilled import open_spilled
from tests.strategies import assistant, results

REPO = Path(__file__).resolve().parents[2]
CFG = BudgetConfig(result_cap=1_000, preview_chars=200, fsync=False)
NAMES = re.compile(
    r"\A(lock|session\.json|decisions\.jsonl|estimates\.bin|bodies|[0-9a-f]{2}|[0-9a-f]{32}\.txt"
    r"|pack-[0-9a-f]{32}\.pack|\.tmp-[\w.-]+)\Z"
)
WATCHED = {
    "open",
    "os.rename",
    "os.mkdir",
    "os.remove",
    "os.rmdir",
    "os.listdir",
    "os.scandir",
    "os.symlink",
    "os.link",
    "os.chmod",
    "os.chown",
    "os.truncate",
    "os.utime",
}
_RECORDING: list[list[tuple[str, tuple[Any, ...]]]] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _RECORDING and event in WATCHED:
        # Descriptors are resolved now: they may be closed by the time the case is checked.
        _RECORDING[-1].append((event, tuple(map(_resolve, _paths(event, args)))))


def _paths(event: str, args: tuple[Any, ...]) -> list[tuple[Any, Any]]:
    """(path or descriptor, directory descriptor or None) pairs an audit event names."""
    if event == "os.rename":
        return [(args[0], args[2]), (args[1], args[3])]
    if event == "os.mkdir":
        return [(args[0], args[2])]
    if event in ("os.remove", "os.rmdir"):
        return [(args[0], args[1])]
    return [(args[0], None)]


def _resolve(pair: tuple[Any, Any]) -> tuple[Any, str | None]:
    """Descriptors as the paths they stand for (a name relative to one keeps it as its dir)."""
    target, dir_fd = pair
    if isinstance(target, int):
        target = os.readlink(f"/proc/self/fd/{target}")
    if isinstance(dir_fd, int) and dir_fd >= 0:
        return target, os.readlink(f"/proc/self/fd/{dir_fd}")
    return target, None


sys.addaudithook(_audit)  # once per process; records only inside `audited`

BAD_REFS: list[Any] = [
    "../../etc/passwd",
    "/etc/passwd",
    "..%2f..%2fetc%2fpasswd",
    "%2e%2e%2f" * 4,
    "..\\..\\windows\\win.ini",
    "C:\\Windows\\System32\\config",
    "0" * 31 + "\x00",
    "\x00" * 32,
    "0" * 32 + "\n",
    "0" * 32 + "/",
    "0" * 16 + "/" + "0" * 15,
    "0" * 30 + "..",
    "bodies/00/" + "0" * 32,
    "A" * 32,
    "\uff10" * 32,  # fullwidth digits
    "\u0660" * 32,  # Arabic-Indic digits (\d would take them)
    "0" * 33,
    "0" * 1_000_000,
    "",
    " " * 32,
    "\ud800" * 32,
    "file:///etc/passwd",
    "~/.ssh/id_rsa",
    None,
    0,
    1.5,
    True,
    b"0" * 32,
    bytearray(b"0" * 32),
    ["0" * 32],
    {"ref": "0" * 32},
    object(),
]
BAD_ARGS: list[Any] = [
    {"offset": -1},
    {"offset": 1.5},
    {"offset": "3.5"},
    {"offset": "-1"},
    {"offset": "3 lines"},
    {"offset": True},
    {"offset": [1]},
    {"limit": 0},
    {"limit": -5},
    {"limit": "0"},
    {"limit": "1e3"},
    {"context": -1},
    {"path": "items"},
    {"path": "$..x"},
    {"limit": False},
    {"grep": ""},
    {"grep": "x" * 501},
    {"grep": 5},
    {"grep": ["a"]},
    {"grep": "["},
    {"grep": "(?P<x>a)(?P=x)"},
    {"path": "/etc/passwd"},
    {"file": "../x"},
    {"x" * 100_000: 1},
]
PATHY_IDS = [
    "../../etc/passwd",
    "/abs/path",
    "a/b",
    "..\\..\\x",
    "nul\x00byte",
    "new\nline",
    "%2e%2e%2f",
    "lone\udc80surrogate",
    "x" * 100_000,
    "bodies",
    "decisions.jsonl",
    "lock",
    ".",
    "..",
]


@contextmanager
def audited(session: Path) -> Iterator[list[tuple[str, tuple[Any, ...]]]]:
    """Record filesystem events; afterwards check each stays inside ``session``."""
    events: list[tuple[str, tuple[Any, ...]]] = []
    _RECORDING.append(events)
    try:
        yield events
    finally:
        _RECORDING.remove(events)
    inside = str(session.resolve())
    for event, args in events:
        for target, where in args:
            if where is not None:  # the directory a name was resolved in
                assert where == inside or where.startswith(inside + os.sep), (event, args)
            name = os.fsdecode(target)
            if os.path.isabs(name):
                resolved = os.path.normpath(name)
                assert resolved == inside or resolved.startswith(inside + os.sep), (event, args)
            else:
                assert NAMES.match(name), (event, args)


@pytest.fixture
def outside(tmp_path: Path) -> Iterator[Path]:
    """A sentinel directory next to the session; it must come out exactly as it went in."""
    here = tmp_path / "outside"
    here.mkdir()
    (here / "secret.txt").write_text("do not touch")
    (here / "passwd").write_text("root:x:0:0")
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in here.iterdir()}
    yield here
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in here.iterdir()} == before


def spilled_session(path: Path) -> tuple[Budget, str, str]:
    """A session holding one spilled output; (session, its ref, its text)."""
    text = "".join(f"line {i}: 构建 ok\n" for i in range(400))
    session, ref = open_spilled(path, CFG, text)
    return session, ref, text


def test_bad_refs_are_refused_everywhere_without_touching_a_file(
    tmp_path: Path, outside: Path, record_property: Any
) -> None:
    """Every escaping ref is a RefError from read/get/has/path_of, an ``Error:`` text from the
    read-back tool and an error exit from ``toolbudget read``, before any file is opened."""
    from typer.testing import CliRunner

    from budget.cli import app

    path = tmp_path / "s"
    session, _ref, _text = spilled_session(path)
    store = session.store
    tried = 0
    with audited(path) as events:
        for ref in BAD_REFS:
            for call in (session.read, store.get, store.has, store.path_of):
                with pytest.raises(RefError) as info:
                    call(ref)
                assert len(str(info.value)) < 300  # never echoes the value back
                tried += 1
            page = session.handle_read_tool({"ref": ref})
            assert page.startswith("Error: ") and len(page) < 300
            tried += 1
    assert events == []  # refused before any filesystem call
    session.close()
    runner = CliRunner()
    for ref in BAD_REFS:
        if isinstance(ref, str) and "\x00" not in ref and len(ref) < 10_000:
            result = runner.invoke(app, ["read", str(path), ref])
            assert result.exit_code == 2 and "error:" in result.output
            tried += 1
    record_property("reliability.bad_inputs.refs", tried)


def test_a_str_subclass_ref_is_checked_on_its_real_characters(tmp_path: Path) -> None:
    """A str subclass lying about itself (str(), slicing) cannot steer a path."""

    class Sly(str):
        def __str__(self) -> str:
            return "../../outside/passwd"

        def __getitem__(self, key: Any) -> str:
            return "../"

    path = tmp_path / "s"
    session, ref, text = spilled_session(path)
    with audited(path):
        assert session.read(Sly(ref)) == text
        with pytest.raises(RefError):
            session.read(Sly("0" * 32))
    session.close()


def test_bad_read_back_arguments_are_errors_the_model_can_read(
    tmp_path: Path, record_property: Any
) -> None:
    """Out-of-range, mistyped, unknown or dangerous arguments give an ``Error:`` page (and
    BudgetError from read), never an exception or a file outside the session."""
    path = tmp_path / "s"
    session, ref, _text = spilled_session(path)
    tried = 0
    with audited(path):
        for args in BAD_ARGS:
            page = session.handle_read_tool({"ref": ref, **args})
            assert page.startswith("Error: "), (args, page[:200])
            assert len(page) < 500
            tried += 1
        for tool_input in (None, "ref", 5, ["ref"], {"ref": ref, "offset": {"$gt": 0}}):
            assert session.handle_read_tool(tool_input).startswith("Error: ")  # type: ignore[arg-type]
            tried += 1
        for kwargs in ({"offset": -1}, {"limit": 0}, {"grep": "[a"}, {"grep": ""}):
            with pytest.raises(InputError):
                session.read(ref, **kwargs)
            tried += 1
        huge = session.handle_read_tool({"ref": ref, "offset": 10**100, "limit": 10**100})
        assert huge.startswith(f"[toolbudget] ref {ref}: no lines at offset")
        # Past Python's int-to-str limit (4,300 digits), as a big-integer JSON parser may hand it.
        for name in ("offset", "limit"):
            page = session.handle_read_tool({"ref": ref, name: 10**5000})
            assert page.startswith(f"Error: {name}: must be below 2**1024"), page[:200]
        with pytest.raises(InputError, match="offset: must be below 2"):
            session.read(ref, offset=10**5000)
        with pytest.raises(InputError, match="limit: must be below 2"):
            session.read(ref, limit=10**5000)
        tried += 4
        assert session.read(ref, grep="\ud800") == ""  # a lone surrogate is just a pattern
    session.close()
    record_property("reliability.bad_inputs.read_back", tried)


def test_call_ids_with_path_characters_are_only_ever_data(
    tmp_path: Path, outside: Path, record_property: Any
) -> None:
    """Call ids shaped like paths (or holding NUL, newlines, lone surrogates) are logged and
    restored as data: nothing is named after them, and a resumed session shows the same bytes."""
    big = "".join(f"row {i}\n" for i in range(300))
    msgs: list[Any] = [{"role": "user", "content": "go"}]
    for cid in PATHY_IDS:
        msgs += [assistant((cid, "bash")), results((cid, big + cid[:20]))]
    path = tmp_path / "s"
    with audited(path):
        with Budget.open(path, CFG) as session:
            first = session.prepare(msgs, now=0)
        assert {d.kind for d in first.report.decisions} == {"spilled"}
        with Budget.open(path, CFG) as session:
            again = session.prepare(msgs, now=1)
            for cid in PATHY_IDS:
                decision = session.decision(cid)
                assert decision is not None and decision.kind == "spilled"
    assert json.dumps(again.messages) == json.dumps(first.messages)
    assert sorted(p.name for p in path.iterdir()) == [
        "bodies",
        "decisions.jsonl",
        "estimates.bin",
        "lock",
        "session.json",
    ]
    record_property("reliability.bad_inputs.call_ids", len(PATHY_IDS))


@pytest.mark.parametrize("plant", ["shard", "body"])
def test_a_symlink_planted_where_a_body_goes_is_never_followed(
    tmp_path: Path, outside: Path, plant: str
) -> None:
    """A symlink planted at the shard or the body file a spill will use makes that spill fail
    (kept inline, reported); the link's target is neither read nor written."""
    text = "".join(f"secret-looking output {i}\n" for i in range(200))
    ref = ref_for(text)
    path = tmp_path / "s"
    LocalStore(path).close()
    shard = path / "bodies" / ref[:2]
    if plant == "shard":
        shard.symlink_to(outside, target_is_directory=True)
    else:
        shard.mkdir(mode=0o700)
        (shard / f"{ref}.txt").symlink_to(outside / "passwd")
    msgs = [{"role": "user", "content": "go"}, assistant(("c", "bash")), results(("c", text))]
    with audited(path), capture_logs() as logs, Budget.open(path, CFG) as session:
        req = session.prepare(msgs, now=0)
        [d] = req.report.decisions
        assert (d.kind, d.reason) == ("kept_unspillable", "spill_failed")
        assert req.messages[2]["content"][0]["content"] == text
        with pytest.raises(StoreError, match="symbolic link"):
            session.read(ref)
    [failed] = [e for e in logs if e["event"] == "toolbudget.spill.failed"]
    assert "symbolic link" in failed["error"]


def test_lone_surrogates_everywhere_round_trip(tmp_path: Path) -> None:
    """Lone surrogates in outputs, call ids and tool names are spilled, logged, read back and
    resumed exactly."""
    text = "".join(f"bad \ud800 byte \udfff {i}\n" for i in range(200))
    cid, tool = "id\ud801", "to\udc00ol"
    msgs = [{"role": "user", "content": "go"}, assistant((cid, tool)), results((cid, text))]
    path = tmp_path / "s"
    with Budget.open(path, CFG) as session:
        first = session.prepare(msgs, now=0)
        ref = first.report.decisions[0].ref
        assert ref is not None and session.read(ref) == text
        assert session.read(ref, grep="\ud800", limit=1) == "bad \ud800 byte \udfff 0\n"
    with Budget.open(path, CFG) as session:
        again = session.prepare(msgs, now=1)
        assert session.decision(cid) is not None
    assert json.dumps(again.messages) == json.dumps(first.messages)


def nested(depth: int, leaf: Any = "x") -> Any:
    node: Any = leaf
    for _ in range(depth):
        node = {"k": node}
    return node


BAD_MESSAGES: list[tuple[Any, str]] = [
    ("not a list", "messages must be a list"),
    ((), "messages must be a list"),
    ([5], "messages[0] must be a dict"),
    ([None], "messages[0] must be a dict"),
    ([{"role": 5, "content": "x"}], "messages[0].role"),
    ([{"role": "user", "content": 5}], "messages[0].content"),
    ([{"role": "user", "content": b"x"}], "messages[0].content"),
    ([{"role": "user", "content": [5]}], "messages[0].content[0] must be a dict"),
    ([{"role": "user", "content": [[{"type": "text"}]]}], "messages[0].content[0]"),
    ([{"role": "assistant", "content": [{"type": "tool_use", "id": 5, "name": "x"}]}], ".id"),
    ([{"role": "assistant", "content": [{"type": "tool_use", "id": "", "name": "x"}]}], ".id"),
    ([{"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": None}]}], ".name"),
    (
        [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "x"}]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "c", "content": 5}],
            },
        ],
        "content",
    ),
    (
        [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "x"}]},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "c",
                        "content": [{"type": "text", "text": 5}],
                    }
                ],
            },
        ],
        ".text must be a string",
    ),
    (
        [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "x"}]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "c", "content": [["deep"]]}],
            },
        ],
        "must be a dict",
    ),
    (
        [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "c", "name": "x", "input": nested(20_000)}],
            },
        ],
        "nest too deeply",
    ),
]


def test_malformed_messages_are_input_errors_and_the_session_stays_usable(
    record_property: Any,
) -> None:
    """Wrong types, empty ids and nesting past Python's limit are InputErrors naming the part;
    after each, the same session still prepares a good history exactly as a fresh one does."""
    good = [
        {"role": "user", "content": "go"},
        assistant(("g", "bash")),
        results(("g", "x" * 3_000)),
    ]
    expected = Budget.in_memory(CFG).prepare(good, now=0).messages
    session = Budget.in_memory(CFG)
    for messages, needle in BAD_MESSAGES:
        with pytest.raises(InputError) as info:
            session.prepare(messages, now=0)
        assert needle in str(info.value)
        assert session.prepare(good, now=0).messages == expected
    ok = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c", "name": "x", "input": nested(200)}],
        },
        results(("c", "fine")),
    ]
    assert session.prepare(ok, now=1).messages == ok  # as deep as JSON decoders go: fine
    for usage in ({"input_tokens": "many"}, {"input_tokens": -1}, {"input_tokens": float("nan")}):
        with pytest.raises(InputError):
            session.prepare(good, usage=usage, now=2)
    record_property("reliability.bad_inputs.messages", len(BAD_MESSAGES) + 3)


HUNDRED_MB = r"""
import json, resource, sys, time
from budget import Budget
line = "0123456789 abcdefghij error: something happened here, see the log .........\n"
text = line * (100_000_000 // len(line))
msgs = [
    {"role": "user", "content": "go"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "big", "name": "bash", "input": {}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "big", "content": text}]},
]
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.perf_counter()
with Budget.open(sys.argv[1], {"fsync": False}) as session:
    req = session.prepare(msgs, now=0)
    [d] = req.report.decisions
    page = session.handle_read_tool({"ref": d.ref, "offset": 1_000_000, "limit": 2})
    # Deep paging, not grep: a full-output grep is bounded by a wall-clock deadline, which a
    # loaded machine can hit on 100 MB (that bound has its own test in test_regressions.py).
    found = session.read(d.ref, offset=1_299_999, limit=1)
    same = session.read(d.ref) == text
shown = req.messages[2]["content"][0]["content"]
print(json.dumps({
    "kind": d.kind, "shown": len(shown), "same": same, "found": found, "page": page,
    "seconds": time.perf_counter() - started, "chars": len(text),
    "peak_mb": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024,
}))
"""


@pytest.mark.slow
def test_a_100_mb_result_is_spilled_and_paged_fast_and_memory_sane(
    tmp_path: Path, record_property: Any
) -> None:
    """A 100 MB tool output is spilled, shown as a small envelope, paged, searched and read back
    whole in seconds, with peak memory a few times its size (in a child, measured there)."""
    out = run_json_child(HUNDRED_MB, str(tmp_path / "s"))
    assert (
        out["kind"] == "spilled"
        and out["same"]
        and out["found"]
        == "0123456789 abcdefghij error: something happened here, see the log .........\n"
    )
    assert out["shown"] < 5_000
    assert out["page"].splitlines()[1].startswith("1000001\t0123456789")
    assert out["seconds"] < 20
    assert out["peak_mb"] < 6 * out["chars"] / 1e6  # the text, its bytes, its lines: no more
    record_property("reliability.hundred_mb.seconds", round(out["seconds"], 2))
    record_property("reliability.hundred_mb.peak_mb_above_start", round(out["peak_mb"]))
