"""The toolbudget command: version, read-back of spilled outputs, garbage collection."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from budget import Budget, __version__
from budget.cli import app
from spill import ref_for
from tests._entry import run_toolbudget
from tests.strategies import conversation

runner = CliRunner()


def _session_with_spill(path: Path) -> str:
    text = "".join(f"row {i}\n" for i in range(20_000))
    with Budget.open(path) as b:
        b.prepare(conversation([[text]]), now=0)
    return text


def _age(session: Path, *, days: float) -> None:
    """Make every entry of ``session`` (and itself) look untouched for ``days`` days."""
    past = time.time() - days * 86400
    for root, dirs, files in os.walk(session):
        for name in dirs + files:
            os.utime(Path(root) / name, (past, past))
    os.utime(session, (past, past))


def test_version() -> None:
    """--version prints the package version."""
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"toolbudget {__version__}"


def test_read_prints_the_exact_output_or_some_lines(tmp_path: Path) -> None:
    """read prints a spilled output byte for byte, or the lines asked for."""
    text = _session_with_spill(tmp_path / "s")
    whole = runner.invoke(app, ["read", str(tmp_path / "s"), ref_for(text)])
    assert whole.exit_code == 0
    assert whole.stdout == text
    some = runner.invoke(
        app, ["read", str(tmp_path / "s"), ref_for(text), "--offset", "5", "--limit", "2"]
    )
    assert some.stdout == "row 5\nrow 6\n"
    grep = runner.invoke(app, ["read", str(tmp_path / "s"), ref_for(text), "--grep", "^row 1999$"])
    assert grep.stdout == "  2000\trow 1999\n"  # numbered, as the read-back tool shows it


def test_read_past_the_end_says_so_on_stderr(tmp_path: Path) -> None:
    """An --offset past the last line prints nothing, and a note naming the output's length (an
    empty print alone would read as an empty output); within it, no note."""
    text = _session_with_spill(tmp_path / "s")
    past = runner.invoke(app, ["read", str(tmp_path / "s"), ref_for(text), "--offset", "999999"])
    assert past.exit_code == 0 and past.stdout == ""
    assert past.stderr == "note: --offset 999999 is past the end (20000 lines)\n"
    last = runner.invoke(app, ["read", str(tmp_path / "s"), ref_for(text), "--offset", "19999"])
    assert (last.stdout, last.stderr) == ("row 19999\n", "")


def test_read_refuses_bad_refs_and_missing_sessions(tmp_path: Path) -> None:
    """A bad ref or a missing session directory exits 2 with an error on stderr."""
    _session_with_spill(tmp_path / "s")
    bad = runner.invoke(app, ["read", str(tmp_path / "s"), "../../etc/passwd"])
    assert bad.exit_code == 2
    assert "error:" in bad.stderr
    missing = runner.invoke(app, ["read", str(tmp_path / "nope"), "0" * 32])
    assert missing.exit_code == 2


def test_gc_removes_only_old_sessions(tmp_path: Path) -> None:
    """gc removes sessions untouched for longer than the age given and keeps recent ones."""
    _session_with_spill(tmp_path / "old")
    _session_with_spill(tmp_path / "new")
    _age(tmp_path / "old", days=10)
    result = runner.invoke(app, ["gc", str(tmp_path), "--older-than", "7d"])
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "old").exists()
    assert (tmp_path / "new").exists()
    bad = runner.invoke(app, ["gc", str(tmp_path), "--older-than", "soon"])
    assert bad.exit_code != 0


def test_gc_on_a_session_directory_says_it_takes_the_one_holding_it(tmp_path: Path) -> None:
    """Pointed at a session instead of the directory holding sessions, gc removes nothing and
    says why; the session is left as it was."""
    _session_with_spill(tmp_path / "s")
    before = sorted(p.name for p in (tmp_path / "s").iterdir())
    result = runner.invoke(app, ["gc", str(tmp_path / "s"), "--older-than", "0s"])
    assert result.exit_code == 0
    assert result.stdout == "0 session(s) removed, 0 skipped\n"
    note = f"note: {tmp_path / 's'} is a session directory; gc takes the one holding it\n"
    assert result.stderr == note
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == before


def test_gc_on_a_missing_root_is_an_error(tmp_path: Path) -> None:
    """gc on a directory that does not exist exits 2 naming it, instead of removing nothing."""
    result = runner.invoke(app, ["gc", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert "error: no directory at" in result.stderr
    assert "nope" in result.stderr


def test_gc_says_which_sessions_it_skipped_and_why(tmp_path: Path) -> None:
    """gc names each session it left in place with its reason: open (locked), foreign files."""
    from spill import LocalStore

    _session_with_spill(tmp_path / "open")
    _session_with_spill(tmp_path / "foreign")
    (tmp_path / "foreign" / "notes.txt").write_text("mine")
    past = time.time() - 10 * 86400
    for session in ("open", "foreign"):
        for root, dirs, files in os.walk(tmp_path / session):
            for name in dirs + files:
                os.utime(Path(root) / name, (past, past))
    with LocalStore(tmp_path / "open"):
        result = runner.invoke(app, ["gc", str(tmp_path), "--older-than", "7d"])
    assert result.exit_code == 0, result.output
    assert f"skipped {tmp_path / 'open'}: open in another process (locked)" in result.stderr
    assert f"skipped {tmp_path / 'foreign'}: holds files a session does not: notes.txt" in (
        result.stderr
    )
    assert "0 session(s) removed, 2 skipped" in result.stdout
    assert (tmp_path / "open").exists() and (tmp_path / "foreign").exists()


def test_gc_with_an_empty_root_removes_nothing_in_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``toolbudget gc ""`` (an unset ``$SESSIONS``) exits 2 and leaves the old session in the
    current directory, which it used to remove."""
    _session_with_spill(tmp_path / "old")
    _age(tmp_path / "old", days=30)
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["gc", "", "--older-than", "1d"])
    assert result.exit_code == 2
    assert "error: gc root" in result.stderr and "current directory" in result.stderr
    assert (tmp_path / "old" / "session.json").exists()


def test_read_prints_a_lone_surrogate_as_its_utf8_bytes(tmp_path: Path) -> None:
    """A spilled output holding a lone surrogate (a JSON string cut inside an emoji) is printed,
    the surrogate as its code point's UTF-8 bytes, where the command used to crash printing
    nothing."""
    text = "".join(f"deployed {i} \ud83d\n" for i in range(5_000))
    with Budget.open(tmp_path / "s") as b:
        b.prepare(conversation([[text]]), now=0)
    result = runner.invoke(app, ["read", str(tmp_path / "s"), ref_for(text)])
    assert result.exit_code == 0, result.output
    assert result.stdout_bytes == text.encode("utf-8", "surrogatepass")


def test_gc_takes_a_url_of_sessions_on_object_storage(tmp_path: Path) -> None:
    """``gc file://...`` (any fsspec URL) removes the sessions under it untouched for longer than
    the age given and keeps recent ones, where it said "no directory at file:/..."."""
    for name in ("old", "new"):
        with Budget.open(f"file://{tmp_path}/{name}") as b:
            b.prepare(conversation([["".join(f"row {i}\n" for i in range(20_000))]]), now=0)
    _age(tmp_path / "old", days=10)
    result = runner.invoke(app, ["gc", f"file://{tmp_path}", "--older-than", "7d"])
    assert result.exit_code == 0, result.output
    assert "1 session(s) removed" in result.stdout
    assert not (tmp_path / "old").exists()
    assert (tmp_path / "new").exists()


def test_gc_of_a_file_url_collects_local_sessions_and_keeps_open_ones(tmp_path: Path) -> None:
    """``gc file://DIR`` removes the old session directories a LocalStore wrote and leaves the one
    held open, where it skipped them all as holding foreign files (the lock, the log)."""
    from spill import LocalStore

    for name in ("old", "open"):
        _session_with_spill(tmp_path / name)
        _age(tmp_path / name, days=10)
    with LocalStore(tmp_path / "open"):
        result = runner.invoke(app, ["gc", f"file://{tmp_path}", "--older-than", "7d"])
    assert result.exit_code == 0, result.output
    assert f"removed file://{tmp_path}/old" in result.stdout
    assert f"skipped file://{tmp_path}/open: open in another process (locked)" in result.stderr
    assert not (tmp_path / "old").exists()
    assert (tmp_path / "open" / "session.json").exists()


def test_gc_of_a_file_url_naming_no_directory_is_an_error(tmp_path: Path) -> None:
    """``gc file://...`` naming no directory exits 2 naming it, as a missing path does (it
    removed nothing and said so, which read as a clean run)."""
    result = runner.invoke(app, ["gc", f"file://{tmp_path}/nope"])
    assert result.exit_code == 2
    assert f"error: no directory at file://{tmp_path}/nope" in result.stderr


def test_gc_takes_a_file_url_in_its_other_spellings(tmp_path: Path) -> None:
    """A trailing slash and fsspec's ``local://`` name the directory as ``file://`` does; a
    scheme in capitals naming no directory is the same error."""
    for url in (f"file://{tmp_path}/", f"local://{tmp_path}"):
        result = runner.invoke(app, ["gc", url])
        assert result.exit_code == 0, result.output
        assert "0 session(s) removed" in result.stdout
    result = runner.invoke(app, ["gc", f"FILE://{tmp_path}/nope"])
    assert result.exit_code == 2
    assert f"error: no directory at FILE://{tmp_path}/nope" in result.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (a disk always full)")
def test_read_and_gc_on_a_full_disk_say_so_in_one_line(tmp_path: Path) -> None:
    """``read`` and ``gc`` with standard output on a full disk exit 2 with one line saying so,
    where they ended on a traceback; gc has still removed the old session."""
    text = _session_with_spill(tmp_path / "s" / "old")
    _age(tmp_path / "s" / "old", days=10)
    read = run_toolbudget(["read", "s/old", ref_for(text)], cwd=tmp_path, stdout=Path("/dev/full"))
    gc = run_toolbudget(["gc", "s"], cwd=tmp_path, stdout=Path("/dev/full"))
    for done in (read, gc):
        assert done.returncode == 2, done.stderr
        assert done.stderr.endswith(
            "error: cannot write to standard output: No space left on device\n"
        )
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "s" / "old").exists()


def test_a_variable_naming_no_setting_is_one_warning_line(tmp_path: Path) -> None:
    """``TOOLBUDGET_NOPE=1 toolbudget read`` warns in one line naming the variable, where Python
    printed the library's file, line number and source line."""
    text = _session_with_spill(tmp_path / "s")
    done = run_toolbudget(
        ["read", "s", ref_for(text), "--limit", "1"], cwd=tmp_path, env={"TOOLBUDGET_NOPE": "1"}
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "warning: TOOLBUDGET_NOPE names no toolbudget setting\n"
    # bench reads the settings in two places (the strategy, the previews): still one line.
    bench = ["bench", "--generate", "1", "--strategies", "toolbudget"]
    done = run_toolbudget(bench, cwd=tmp_path, env={"TOOLBUDGET_NOPE": "1"})
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("TOOLBUDGET_NOPE") == 1, done.stderr


def test_help_says_grep_is_a_regular_expression_and_object_storage_has_no_lock() -> None:
    """read --help calls --grep a regex (a '[' in it is an error), and gc --help says
    age alone decides on object storage, where it promised only that locked sessions stay."""
    read = runner.invoke(app, ["read", "--help"], env={"COLUMNS": "200"})
    assert "Only lines matching this regex." in read.stdout
    gc = runner.invoke(app, ["gc", "--help"], env={"COLUMNS": "200"})
    assert "there (s3://...) age alone decides" in " ".join(gc.stdout.split())
