"""LocalStore on a real directory: layout, modes, durability order, symlinks, quota, temp files."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from budget._errors import ConfigError, QuotaExceeded, RefError, StoreError
from spill import LocalStore, _fs, ref_for

Calls = list[tuple[str, tuple[Any, ...]]]


def mode(path: Path) -> int:
    """Permission bits of ``path`` (not following a symlink)."""
    return stat.S_IMODE(path.lstat().st_mode)


def body_path(session: Path, ref: str) -> Path:
    """Where a LocalStore keeps the body of ``ref``."""
    return session / "bodies" / ref[:2] / f"{ref}.txt"


@pytest.mark.usefixtures("no_umask")
def test_directories_are_0700_and_files_0600(tmp_path: Path) -> None:
    """Even with umask 0, every directory the store creates is 0700 and every file 0600."""
    session = tmp_path / "parent" / "child" / "s"
    with LocalStore(session) as store:
        ref = store.put("secret output")
        store.append_log([{"ref": ref}])
        store.write_meta({"k": 1})
    for directory in (tmp_path / "parent", tmp_path / "parent" / "child", session):
        assert mode(directory) == 0o700, directory
    for directory in (session / "bodies", session / "bodies" / ref[:2]):
        assert mode(directory) == 0o700, directory
    for name in ("lock", "session.json", "decisions.jsonl"):
        assert mode(session / name) == 0o600, name
    assert mode(body_path(session, ref)) == 0o600


def test_layout_and_path_of(tmp_path: Path) -> None:
    """Bodies live at bodies/<ref[:2]>/<ref>.txt as UTF-8 (surrogatepass); path_of names it."""
    text = "CJK 中文 and \ud800"
    with LocalStore(tmp_path / "s") as store:
        ref = store.put(text)
        path = store.path_of(ref)
    assert path == str(body_path(tmp_path / "s", ref))
    assert os.path.isabs(path)
    assert Path(path).read_bytes() == text.encode("utf-8", "surrogatepass")
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [
        "bodies",
        "decisions.jsonl",
        "lock",
        "session.json",
    ]


def test_relative_session_path_is_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative session path works and path_of is absolute, whatever the cwd later is."""
    monkeypatch.chdir(tmp_path)
    with LocalStore("sessions/abc") as store:
        ref = store.put("x")
        assert store.path == str(tmp_path / "sessions" / "abc")
        monkeypatch.chdir("/")
        assert Path(store.path_of(ref)).read_text() == "x"


def test_body_is_durable_before_put_returns(tmp_path: Path, fs_calls: Calls) -> None:
    """put writes a temp file, fsyncs it, renames it into place, then fsyncs the directory."""
    with LocalStore(tmp_path / "s") as store:
        fs_calls.clear()
        ref = store.put("durable body")
        kinds = [kind for kind, _ in fs_calls]
        renames = [args for kind, args in fs_calls if kind == "rename"]
        assert len(renames) == 1
        assert renames[0][0].startswith(".tmp-")
        assert renames[0][1] == f"{ref}.txt"
        write_at = kinds.index("write")
        rename_at = kinds.index("rename")
        assert "fsync" in kinds[write_at:rename_at]
        assert "fsync" in kinds[rename_at:]
        assert kinds[-1] == "close"  # the shard directory, after its fsync


def fsynced(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """(device, inode) of everything fsync'd from now on, in order (the fsyncs still run)."""
    synced: list[tuple[int, int]] = []
    real = _fs.fsync

    def fsync(fd: int) -> None:
        st = os.fstat(fd)
        synced.append((st.st_dev, st.st_ino))
        real(fd)

    monkeypatch.setattr(_fs, "fsync", fsync)
    return synced


def ident(path: Path) -> tuple[int, int]:
    """(device, inode) of ``path``."""
    st = path.stat()
    return st.st_dev, st.st_ino


def test_new_shard_entry_is_durable_before_put_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A put that creates a shard fsyncs the body, its shard, then bodies/, before returning."""
    path = tmp_path / "s"
    with LocalStore(path) as store:
        synced = fsynced(monkeypatch)
        ref = store.put("a body in a new shard")
        shard, bodies = path / "bodies" / ref[:2], path / "bodies"
        assert synced == [ident(body_path(path, ref)), ident(shard), ident(bodies)]
        other = next(f"{ref} {i}" for i in range(10_000) if ref_for(f"{ref} {i}")[:2] == ref[:2])
        synced.clear()
        store.put(other)  # an existing shard, entries known durable: bodies/ is not fsync'd
        assert synced == [ident(body_path(path, ref_for(other))), ident(shard)]


def test_existing_body_entries_are_made_durable_once_per_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A body found in place (maybe renamed by a killed process) gets its entries fsync'd."""
    path = tmp_path / "s"
    with LocalStore(path, fsync=False) as store:
        ref = store.put("left by an earlier process")
    with LocalStore(path) as store:
        synced = fsynced(monkeypatch)
        assert store.put("left by an earlier process") == ref
        assert synced == [ident(path / "bodies" / ref[:2]), ident(path / "bodies")]


def test_fsync_off_skips_every_fsync(tmp_path: Path, fs_calls: Calls) -> None:
    """With fsync=False no fsync call is made, for bodies, the log or the metadata."""
    with LocalStore(tmp_path / "s", fsync=False) as store:
        store.put("a")
        store.append_log([{"a": 1}])
        store.write_meta({"a": 1})
    assert "fsync" not in [kind for kind, _ in fs_calls]


def test_existing_body_is_not_rewritten(tmp_path: Path, fs_calls: Calls) -> None:
    """A second put of the same text writes nothing and leaves the file untouched."""
    with LocalStore(tmp_path / "s") as store:
        ref = store.put("same")
        before = body_path(tmp_path / "s", ref).stat()
        fs_calls.clear()
        assert store.put("same") == ref
        assert not [kind for kind, _ in fs_calls if kind in ("write", "rename", "open_fd")][1:]
        after = body_path(tmp_path / "s", ref).stat()
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)


def test_read_log_is_one_read_and_touches_no_body(tmp_path: Path, fs_calls: Calls) -> None:
    """read_log makes exactly one read call and opens nothing (no body is read on resume)."""
    with LocalStore(tmp_path / "s") as store:
        for i in range(50):
            store.append_log([{"ref": store.put(f"body {i}")}])
        fs_calls.clear()
        assert len(store.read_log()) == 50
        assert [kind for kind, _ in fs_calls] == ["read"]


def test_stale_temp_files_are_never_read_and_get_removed(tmp_path: Path) -> None:
    """Temp files left by a crash are not bodies: get ignores them, and they are removed (on
    open next to the metadata, on the first quota count next to the bodies)."""
    session = tmp_path / "s"
    with LocalStore(session) as store:
        store.put("real")
    orphan_text = "never finished"
    orphan = ref_for(orphan_text)
    shard = session / "bodies" / orphan[:2]
    shard.mkdir(exist_ok=True)
    (shard / f".tmp-{orphan}.txt-dead").write_text(orphan_text)
    (session / ".tmp-session.json-dead").write_text("{}")
    (session / "bodies" / ".tmp-stray").write_text("x")
    with LocalStore(session) as store:
        assert not (session / ".tmp-session.json-dead").exists()
        with pytest.raises(RefError):
            store.get(orphan)
        assert not store.has(orphan)
        assert (shard / f".tmp-{orphan}.txt-dead").exists()
        store.put("another")
        assert store.bodies_bytes == len("real") + len("another")
    assert [p.name for p in session.rglob(".tmp-*")] == []


def test_opening_does_not_scan_the_bodies(tmp_path: Path, fs_calls: Calls) -> None:
    """Resuming (open and read_log) lists no body directory: the quota count waits for put."""
    with LocalStore(tmp_path / "s") as store:
        for i in range(20):
            store.put(f"body {i}")
    fs_calls.clear()
    with LocalStore(tmp_path / "s") as store:
        store.read_log()
        assert [kind for kind, _ in fs_calls].count("listdir") == 1  # the session dir only
        assert store.bodies_bytes == sum(len(f"body {i}") for i in range(20))


def test_quota_counts_bodies_already_on_disk(tmp_path: Path) -> None:
    """On reopen the quota counts the bodies already stored, not only new ones."""
    with LocalStore(tmp_path / "s") as store:
        store.put("123456")
    with LocalStore(tmp_path / "s", quota_bytes=10) as store:
        assert store.bodies_bytes == 6
        with pytest.raises(QuotaExceeded):
            store.put("abcde")
        assert store.put("abcd") == ref_for("abcd")
        assert store.bodies_bytes == 10


def test_quota_exceeded_writes_nothing(tmp_path: Path, fs_calls: Calls) -> None:
    """QuotaExceeded is raised before any directory or file is created."""
    with LocalStore(tmp_path / "s", quota_bytes=3) as store:
        fs_calls.clear()
        with pytest.raises(QuotaExceeded):
            store.put("too long")
        kinds = {kind for kind, _ in fs_calls}
    assert not kinds & {"write", "mkdir", "rename"}
    assert list((tmp_path / "s" / "bodies").iterdir()) == []


def test_default_quota_is_one_gib(tmp_path: Path) -> None:
    """Without quota_bytes a body larger than 1 GiB would be refused (checked by arithmetic)."""
    with LocalStore(tmp_path / "s") as store:
        assert store._bodies.quota == 1 << 30


def test_corrupt_body_raises_store_error(tmp_path: Path) -> None:
    """A body whose bytes no longer match its ref raises StoreError, not a wrong text."""
    with LocalStore(tmp_path / "s") as store:
        ref = store.put("original text")
        path = body_path(tmp_path / "s", ref)
        path.write_bytes(b"Original text")
        with pytest.raises(StoreError, match="corrupt") as info:
            store.get(ref)
        assert not isinstance(info.value, RefError)


def test_truncated_body_is_rewritten_by_put(tmp_path: Path, logs: list[dict[str, Any]]) -> None:
    """A body of the wrong size is replaced by the next put of its text, with a warning."""
    with LocalStore(tmp_path / "s") as store:
        ref = store.put("complete body")
        body_path(tmp_path / "s", ref).write_bytes(b"compl")
        assert store.put("complete body") == ref
        assert store.get(ref) == "complete body"
        assert store.bodies_bytes == len("complete body")
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == [
        "toolbudget.spill.size_mismatch"
    ]


def test_fifo_in_place_of_a_body_is_refused_without_blocking(tmp_path: Path) -> None:
    """A FIFO planted where a body should be raises StoreError instead of hanging."""
    with LocalStore(tmp_path / "s") as store:
        ref = ref_for("fifo")
        (tmp_path / "s" / "bodies" / ref[:2]).mkdir()
        os.mkfifo(body_path(tmp_path / "s", ref))
        with pytest.raises(StoreError, match="not a regular file"):
            store.get(ref)
        with pytest.raises(StoreError, match="not a regular file"):
            store.has(ref)


def test_symlinked_session_directory_is_refused(tmp_path: Path) -> None:
    """A session path that is a symlink raises StoreError and nothing is created behind it."""
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "s").symlink_to(target)
    with pytest.raises(StoreError, match="symbolic link"):
        LocalStore(tmp_path / "s")
    assert list(target.iterdir()) == []


@pytest.mark.parametrize("name", ["bodies", "decisions.jsonl", "session.json", "lock"])
def test_symlinked_session_entries_are_refused(tmp_path: Path, name: str) -> None:
    """If bodies/, the log, the metadata or the lock is a symlink, opening raises StoreError."""
    session = tmp_path / "s"
    LocalStore(session).close()
    target = tmp_path / "target"
    target.mkdir()
    victim = session / name
    if victim.is_dir():
        victim.rmdir()
    else:
        victim.unlink()
    victim.symlink_to(target / name if name != "bodies" else target)
    (target / name).write_text("untouched") if name != "bodies" else None
    with pytest.raises(StoreError, match="symbolic link"):
        LocalStore(session)
    if name != "bodies":
        assert (target / name).read_text() == "untouched"
    else:
        assert list(target.iterdir()) == []


def test_symlinked_body_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    """A symlink where a body belongs is never followed by get, has or put."""
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read")
    text = "what the model wants"
    ref = ref_for(text)
    with LocalStore(tmp_path / "s") as store:
        (tmp_path / "s" / "bodies" / ref[:2]).mkdir()
        body_path(tmp_path / "s", ref).symlink_to(secret)
        for call in (lambda: store.get(ref), lambda: store.has(ref), lambda: store.put(text)):
            with pytest.raises(StoreError, match="symbolic link"):
                call()
    assert secret.read_text() == "do not read"


def test_symlinked_shard_directory_is_refused(tmp_path: Path, logs: list[dict[str, Any]]) -> None:
    """A shard directory replaced by a symlink is skipped on open and refused on access."""
    text = "sharded"
    with LocalStore(tmp_path / "s") as store:
        ref = store.put(text)
    shard = tmp_path / "s" / "bodies" / ref[:2]
    moved = tmp_path / "moved"
    shard.rename(moved)
    shard.symlink_to(moved)
    with LocalStore(tmp_path / "s") as store:
        assert store.bodies_bytes == 0
        for call in (lambda: store.get(ref), lambda: store.has(ref), lambda: store.put(text)):
            with pytest.raises(StoreError, match="symbolic link"):
                call()
    assert "toolbudget.spill.shard_skipped" in [e["event"] for e in logs]
    assert (moved / f"{ref}.txt").read_text() == text


def test_session_path_that_is_a_file_is_refused(tmp_path: Path) -> None:
    """A session path naming a regular file raises StoreError saying it is not a directory."""
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError, match="not a directory"):
        LocalStore(tmp_path / "file")


def test_permissive_existing_directory_is_reported(
    tmp_path: Path, logs: list[dict[str, Any]]
) -> None:
    """Opening an existing session directory readable by others logs a warning with its mode."""
    session = tmp_path / "s"
    session.mkdir(mode=0o755)
    session.chmod(0o755)
    LocalStore(session).close()
    warnings = [e for e in logs if e["event"] == "toolbudget.spill.permissive_mode"]
    assert [w["mode"] for w in warnings] == ["0o755"]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"quota_bytes": -1}, "quota_bytes"),
        ({"quota_bytes": "big"}, "quota_bytes"),
        ({"quota_bytes": True}, "quota_bytes"),
        ({"lock_timeout": -1}, "lock_timeout"),
        ({"lock_timeout": float("nan")}, "lock_timeout"),
        ({"lock_timeout": "1"}, "lock_timeout"),
    ],
)
def test_bad_settings_raise_config_error(
    tmp_path: Path, kwargs: dict[str, Any], field: str
) -> None:
    """Invalid quota or lock timeout raise ConfigError naming the field, creating nothing."""
    with pytest.raises(ConfigError, match=field):
        LocalStore(tmp_path / "s", **kwargs)
    assert not (tmp_path / "s").exists()


def test_unclosed_store_warns_and_releases_its_lock(tmp_path: Path) -> None:
    """A LocalStore dropped without close emits ResourceWarning and frees the session."""
    store = LocalStore(tmp_path / "s")
    with pytest.warns(ResourceWarning, match="not closed"):
        del store  # CPython finalizes it right here: this was the last reference
    LocalStore(tmp_path / "s").close()
