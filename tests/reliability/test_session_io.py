"""Bad session paths, read-only reading, damaged metadata, a closed session, the read-back's
arguments and errors: what a session does with them, and that nothing is touched on disk."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs
from typer.testing import CliRunner

from budget import Budget, BudgetError, ConfigError, StoreError
from budget.cli import app
from tests._lanes import examples
from tests.conversations import CONFIG, conversation
from tests.reliability._spilled import open_spilled
from tests.strategies import assistant, results

runner = CliRunner()


def snapshot(root: Path) -> dict[str, tuple[int, str]]:
    """Every entry below ``root``: its mode and (for a file) a hash of its content."""
    out: dict[str, tuple[int, str]] = {}
    for where, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            entry = Path(where) / name
            st = entry.lstat()
            digest = hashlib.sha256(entry.read_bytes()).hexdigest() if entry.is_file() else ""
            out[str(entry.relative_to(root))] = (st.st_mode, digest)
    return out


def spilled(path: Path) -> tuple[Budget, str, str]:
    """An open session at ``path`` with one spilled output: (session, ref, text)."""
    text = "".join(f"line {i}\n" for i in range(3_000))
    session, ref = open_spilled(path, CONFIG, text)
    return session, ref, text


@pytest.mark.parametrize("path", ["", 5, None, "s\0x", b"s"], ids=repr)
def test_a_bad_session_path_is_a_config_error_and_touches_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: Any
) -> None:
    """An empty path (an unset variable), a non-path or a path with NUL is a ConfigError, and
    the current directory keeps its own ``lock`` and ``.tmp-*`` files untouched."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lock").write_text("someone else's lock\n")
    (tmp_path / ".tmp-notes.swp").write_text("an editor's swap file\n")
    before = snapshot(tmp_path)
    with pytest.raises(ConfigError):
        Budget.open(path, CONFIG)
    assert snapshot(tmp_path) == before


def test_reading_a_directory_that_is_no_session_is_an_error_and_creates_nothing(
    tmp_path: Path,
) -> None:
    """``toolbudget read`` on a directory holding no session exits 2 naming the problem, and
    creates, changes and removes nothing there."""
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("mine\n")
    (plain / ".tmp-x").write_text("an editor's\n")
    before = snapshot(plain)
    result = runner.invoke(app, ["read", str(plain), "0" * 32])
    assert result.exit_code == 2
    assert "is not a toolbudget session directory" in result.stderr
    assert snapshot(plain) == before
    missing = runner.invoke(app, ["read", str(tmp_path / "nope"), "0" * 32])
    assert missing.exit_code == 2 and not (tmp_path / "nope").exists()


def test_a_stored_body_is_read_beside_the_live_session_without_its_lock(tmp_path: Path) -> None:
    """While the agent holds the session open (and its lock), ``toolbudget read`` prints the
    body at once, whole, by lines or by grep, and leaves the session directory unchanged."""
    path = tmp_path / "s"
    session, ref, text = spilled(path)
    try:
        before = snapshot(path)
        whole = runner.invoke(app, ["read", str(path), ref])
        assert whole.exit_code == 0, whole.stderr
        assert whole.stdout == text
        some = runner.invoke(app, ["read", str(path), ref, "--offset", "10", "--limit", "2"])
        assert some.stdout == "line 10\nline 11\n"
        assert snapshot(path) == before
        # The live session goes on as if nothing happened.
        assert session.read(ref, offset=2, limit=1) == "line 2\n"
    finally:
        session.close()


def test_cli_grep_prints_line_numbers_and_refuses_an_invalid_regex(tmp_path: Path) -> None:
    """``toolbudget read --grep`` prints each matching line after its number, as the tool does;
    an invalid pattern exits 2 with the regex error instead of being searched as text."""
    path = tmp_path / "s"
    session, ref, _text = spilled(path)
    session.close()
    found = runner.invoke(app, ["read", str(path), ref, "--grep", "^line 1[0-2]$"])
    assert found.exit_code == 0
    assert found.stdout == "    11\tline 10\n    12\tline 11\n    13\tline 12\n"
    bad = runner.invoke(app, ["read", str(path), ref, "--grep", "["])
    assert bad.exit_code == 2
    assert "grep is not a valid regular expression: missing ]: [" in bad.stderr


@pytest.mark.parametrize("content", [b"", b"{not json", b"[1, 2]", b"\x00\xff"])
def test_an_empty_or_corrupt_session_json_is_an_event_and_the_session_resumes(
    tmp_path: Path, content: bytes
) -> None:
    """A damaged ``session.json`` does not stop ``Budget.open``: a ``toolbudget.session.meta_failed``
    event, every logged decision restored, the same request copy as the live session, and a
    whole ``session.json`` written again."""
    msgs, steps = conversation(3, 10)
    path = tmp_path / "s"
    spilled_ids: set[str] = set()
    with Budget.open(path, CONFIG) as live:
        for step in steps:
            last = live.prepare(msgs[: step.length], usage=step.usage, now=step.now)
            spilled_ids |= {d.call_id for d in last.report.decisions if d.ref is not None}
    assert spilled_ids
    (path / "session.json").write_bytes(content)
    with capture_logs() as logs, Budget.open(path, CONFIG) as again:
        for cid in spilled_ids:
            assert again.decision(cid) == live.decision(cid)
        step = steps[-1]
        retry = again.prepare(msgs[: step.length], usage=step.usage, now=step.now)
        assert retry.messages == last.messages
    assert any(e["event"] == "toolbudget.session.meta_failed" for e in logs)
    assert isinstance(orjson.loads((path / "session.json").read_bytes()), dict)


def test_a_closed_session_refuses_to_prepare_instead_of_returning_a_copy(tmp_path: Path) -> None:
    """``prepare``, ``spill_output`` and ``on_overflow`` after ``close`` raise a BudgetError, as
    ``read`` does, rather than hand out a copy with every result kept inline."""
    path = tmp_path / "s"
    session, ref, text = spilled(path)
    msgs = [{"role": "user", "content": "go"}, assistant(("c", "bash")), results(("c", text))]
    session.close()
    before = snapshot(path)
    with pytest.raises(StoreError, match="closed"):
        session.prepare([*msgs, assistant(("d", "bash")), results(("d", "x" * 60_000))])
    with pytest.raises(StoreError, match="closed"):
        session.spill_output("y" * 60_000, tool="bash")
    with pytest.raises(StoreError, match="closed"):
        session.on_overflow()
    with pytest.raises(BudgetError):
        session.read(ref)
    assert snapshot(path) == before


def test_the_read_tool_schema_is_the_argument_model_schema(tmp_path: Path) -> None:
    """The tool's input schema is the pydantic model's own schema: the checks calls get and the
    schema the model sees cannot drift apart (extra keys, the ref pattern, the bounds)."""
    from budget._readback import ReadArgs

    with Budget.open(tmp_path / "s", CONFIG, format="anthropic") as session:
        schema = session.read_tool()["input_schema"]
    assert schema == ReadArgs.model_json_schema()
    assert schema["additionalProperties"] is False and schema["required"] == ["ref"]
    props = schema["properties"]
    assert props["ref"]["pattern"] == "^[0-9a-f]{32}$"
    assert props["offset"]["minimum"] == 0 and props["limit"]["minimum"] == 1
    assert "title" not in schema and all("title" not in p for p in props.values())


def test_the_read_tool_result_says_whether_it_is_an_error(tmp_path: Path) -> None:
    """``read_tool_result`` gives the same text as ``handle_read_tool`` plus ``is_error``, so a
    caller sets the provider's error flag without matching a prefix."""
    session, ref, _text = spilled(tmp_path / "s")
    with session:
        ok = session.read_tool_result({"ref": ref, "limit": 2})
        assert not ok.is_error and str(ok) == session.handle_read_tool({"ref": ref, "limit": 2})
        bad = session.read_tool_result({"ref": ref, "offset": -1})
        assert bad.is_error and bad.text.startswith("Error: offset: ")


def test_read_tool_errors_never_show_the_sessions_absolute_path(tmp_path: Path) -> None:
    """A missing or corrupt body, or an unreadable shard, is an error text that names what
    failed and why, never where this machine keeps the session."""
    path = tmp_path / "s"
    session, ref, text = spilled(path)
    with session:
        missing = session.read_tool_result({"ref": "0" * 32})
        body = path / "bodies" / ref[:2] / f"{ref}.txt"
        body.write_text(text.replace("line 7", "line 8"))
        corrupt = session.read_tool_result({"ref": ref, "limit": 1})
        for result in (missing, corrupt):
            assert result.is_error
            assert str(tmp_path) not in result.text, result.text
        assert "corrupt" in corrupt.text and "0" * 32 in missing.text


GREPS = [
    "foo",
    r"\bfoo\b",
    "^x",
    "o$",
    r"a\sb",
    r"\s$",
    "[^z]*q",
    "(?s)q.",
    r"\Ax",
    r"b\z",
    "(?-m)^x",
    "(?i)FOO|^$",
    "x*",
    "a b",
    "$",
    "^$",
    "q$|^f",
    "\t",
]


@settings(max_examples=examples(150), deadline=None)
@given(
    st.lists(st.text(alphabet="ab xqfo\t\u00e9\ud800", max_size=40), max_size=300),
    st.sampled_from(GREPS),
)
def test_grep_in_runs_gives_exactly_the_lines_a_line_by_line_search_gives(
    texts: list[str], grep: str
) -> None:
    """Searching runs of lines at once (and plain words by substring) selects exactly the lines
    whose text alone matches, whatever anchors, classes or newline-crossing the pattern has."""
    from budget._grep import _grep, _matcher
    from budget._readback import split_lines

    lines = split_lines("\n".join(texts))
    pattern = _matcher(grep)
    want = [
        (n, line)
        for n, line in enumerate(lines, 1)
        if pattern.search(line.removesuffix("\n").encode("utf-8", "surrogatepass")) is not None
    ]
    assert _grep(pattern, grep, lines) == want
