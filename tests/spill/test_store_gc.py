"""gc_sessions: removes old, unlocked session directories and nothing else."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from budget._errors import ConfigError, StoreError
from spill import LocalStore, gc_sessions

DAY = 86_400.0


def make_session(path: Path, *, age_s: float, now: float) -> Path:
    """Create a session with a body and a log, then age every entry in it by ``age_s``."""
    with LocalStore(path, fsync=False) as store:
        store.append_log([{"ref": store.put(f"body of {path.name}")}])
    stamp = now - age_s
    for entry in [path, *path.rglob("*")]:
        os.utime(entry, (stamp, stamp), follow_symlinks=False)
    return path


def test_removes_only_sessions_older_than_the_threshold(tmp_path: Path) -> None:
    """Sessions idle for longer than older_than_s are removed and returned; newer ones stay."""
    now = time.time()
    old = make_session(tmp_path / "old", age_s=3 * DAY, now=now)
    older = make_session(tmp_path / "older", age_s=30 * DAY, now=now)
    fresh = make_session(tmp_path / "fresh", age_s=DAY / 2, now=now)
    assert gc_sessions(tmp_path, older_than_s=2 * DAY, now=now) == [old, older]
    assert not old.exists()
    assert not older.exists()
    assert (fresh / "session.json").exists()
    with LocalStore(fresh) as store:
        assert len(store.read_log()) == 1


def test_one_recent_file_keeps_a_session(tmp_path: Path) -> None:
    """The newest file decides: a session with one recently written body is kept."""
    now = time.time()
    session = make_session(tmp_path / "s", age_s=10 * DAY, now=now)
    body = next((session / "bodies").rglob("*.txt"))
    os.utime(body, (now, now))
    assert gc_sessions(tmp_path, older_than_s=DAY, now=now) == []
    assert body.exists()


def test_open_session_in_this_process_is_kept(tmp_path: Path) -> None:
    """A session a LocalStore holds open is not removed, and stays usable."""
    now = time.time()
    session = make_session(tmp_path / "s", age_s=10 * DAY, now=now)
    with LocalStore(session) as store:
        assert gc_sessions(tmp_path, older_than_s=DAY, now=now + 10 * DAY) == []
        assert store.read_log() != []


def test_directories_that_are_not_sessions_are_left_alone(
    tmp_path: Path, logs: list[dict[str, Any]]
) -> None:
    """Folders without session.json, or holding foreign files, are never removed."""
    now = time.time()
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("keep me")
    lookalike = tmp_path / "lookalike"
    lookalike.mkdir()
    (lookalike / "session.json").write_text("{}")
    (lookalike / "lock").write_text("")
    (lookalike / "thesis.tex").write_text("keep me")
    (tmp_path / "loose-file").write_text("keep me")
    for entry in [plain, lookalike, *plain.iterdir(), *lookalike.iterdir()]:
        os.utime(entry, (now - 99 * DAY, now - 99 * DAY))
    assert gc_sessions(tmp_path, older_than_s=DAY, now=now) == []
    assert (plain / "notes.txt").exists()
    assert (lookalike / "thesis.tex").exists()
    reasons = [e["reason"] for e in logs if e["event"] == "toolbudget.gc.skipped"]
    assert reasons == ["holds files a session does not: ['thesis.tex']"]


def test_symlinks_are_never_followed(tmp_path: Path) -> None:
    """A symlink to an old session is not collected, and a symlink inside one is removed as a
    link without touching its target."""
    now = time.time()
    root = tmp_path / "root"
    root.mkdir()
    outside = make_session(tmp_path / "outside", age_s=10 * DAY, now=now)
    (root / "link").symlink_to(outside)
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me")
    inner = make_session(root / "inner", age_s=10 * DAY, now=now)
    shard = next((inner / "bodies").iterdir())
    (shard / "planted").symlink_to(precious)
    for entry in (shard / "planted", shard):
        os.utime(entry, (now - 10 * DAY,) * 2, follow_symlinks=False)
    assert gc_sessions(root, older_than_s=DAY, now=now) == [inner]
    assert (outside / "session.json").exists()
    assert precious.read_text() == "keep me"
    assert (root / "link").is_symlink()


def test_symlinked_root_is_refused(tmp_path: Path) -> None:
    """A gc root that is itself a symlink raises StoreError instead of being followed."""
    now = time.time()
    real = tmp_path / "real"
    real.mkdir()
    make_session(real / "s", age_s=10 * DAY, now=now)
    (tmp_path / "alias").symlink_to(real)
    with pytest.raises(StoreError, match="symbolic link"):
        gc_sessions(tmp_path / "alias", older_than_s=DAY, now=now)
    assert (real / "s" / "session.json").exists()


def test_missing_root_removes_nothing(tmp_path: Path) -> None:
    """A root that does not exist yet is not an error: nothing to collect."""
    assert gc_sessions(tmp_path / "nowhere", older_than_s=0) == []


@pytest.mark.parametrize("bad", [-1, float("nan"), "1d", True])
def test_bad_threshold_raises_config_error(tmp_path: Path, bad: Any) -> None:
    """A negative, NaN or non-numeric older_than_s raises ConfigError naming the field."""
    with pytest.raises(ConfigError, match="older_than_s"):
        gc_sessions(tmp_path, older_than_s=bad)


def test_collected_directory_can_be_reopened_fresh(tmp_path: Path) -> None:
    """After gc removed a session, opening the same path starts an empty session."""
    now = time.time()
    session = make_session(tmp_path / "s", age_s=10 * DAY, now=now)
    assert gc_sessions(tmp_path, older_than_s=DAY, now=now) == [session]
    with LocalStore(session) as store:
        assert store.read_log() == []
        assert store.bodies_bytes == 0


@pytest.mark.parametrize("root", ["", Path(""), ".", "./"])
def test_an_unset_variable_as_root_collects_nothing_in_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, root: Any
) -> None:
    """ "" (an unset variable), Path("") and "." are refused before anything is touched: the old
    session in the current directory stays (they collected it)."""
    now = time.time()
    session = make_session(tmp_path / "old", age_s=30 * DAY, now=now)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="gc root"):
        gc_sessions(root, older_than_s=DAY, now=now)
    assert (session / "session.json").exists()


@pytest.mark.parametrize(
    ("root", "says"),
    [
        (None, "must be a str or path, not NoneType"),
        (5, "must be a str or path, not int"),
        ("sessions\0x", "must not contain a NUL"),
        ("sessions/chat-\ud83d", "which no file name can encode"),
    ],
)
def test_a_root_that_is_not_a_path_is_a_config_error(tmp_path: Path, root: Any, says: str) -> None:
    """None, a number, a NUL or a lone surrogate in the root is a ConfigError naming it, as the
    same session path is for Budget.open, not a raw TypeError, ValueError or UnicodeEncodeError."""
    with pytest.raises(ConfigError, match=says):
        gc_sessions(root, older_than_s=DAY)


def test_a_file_url_collects_local_session_directories_as_gc_sessions_does(tmp_path: Path) -> None:
    """FsspecStore.gc_sessions on a ``file://`` URL removes the old LocalStore sessions under it
    and keeps one held open and one recently used, where it skipped them all as foreign files."""
    from spill import FsspecStore

    now = time.time()
    old = make_session(tmp_path / "old", age_s=3 * DAY, now=now)
    held = make_session(tmp_path / "held", age_s=3 * DAY, now=now)
    fresh = make_session(tmp_path / "fresh", age_s=DAY / 2, now=now)
    skipped: list[tuple[str, str]] = []
    with LocalStore(held):
        removed = FsspecStore.gc_sessions(
            f"file://{tmp_path}",
            older_than_s=DAY,
            now=now,
            on_skip=lambda url, why: skipped.append((url, why)),
        )
    assert removed == [f"file://{old}"]
    assert not old.exists()
    assert (held / "session.json").exists() and (fresh / "session.json").exists()
    assert skipped == [
        (f"file://{fresh}", "used 12h ago"),
        (f"file://{held}", "open in another process (locked)"),
    ]


def test_a_url_scheme_in_capitals_is_the_same_scheme(tmp_path: Path) -> None:
    """``FILE://`` names the ``file://`` filesystem (a scheme is case-insensitive), where fsspec
    said "Protocol not known: FILE" for a directory that exists."""
    from spill import FsspecStore

    now = time.time()
    old = make_session(tmp_path / "old", age_s=3 * DAY, now=now)
    removed = FsspecStore.gc_sessions(f"FILE://{tmp_path}", older_than_s=DAY, now=now)
    assert removed == [f"file://{old}"] and not old.exists()
