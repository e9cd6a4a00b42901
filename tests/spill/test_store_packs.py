"""Packs: a group commit's bodies in one file, read back exactly, never trusted when damaged."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from budget._errors import QuotaExceeded, RefError, StoreError
from spill import LocalStore, _fs, gc_sessions, ref_for
from spill._packs import MAGIC, encode_pack, read_index, read_located
from spill._readonly import ReadOnlyStore
from tests.fsyncs import count_fsyncs

TEXTS = [f"line {i} of a grep over the repository\n" * (20 + i) for i in range(40)]


def _packs(session: Path) -> list[Path]:
    return sorted((session / "bodies").glob("pack-*.pack"))


def _packed_session(path: Path) -> list[str]:
    """A session holding TEXTS in one pack; their refs."""
    with LocalStore(path) as store:
        refs = store.put_many(TEXTS)
    assert len(_packs(path)) == 1
    return [r for r in refs if isinstance(r, str)]


def test_a_group_of_new_bodies_is_one_pack_written_with_two_fsyncs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Forty new bodies cost one file fsync (the pack) and one of ``bodies/``, create no shard
    directory, and each reads back exactly after the session is reopened."""
    path = tmp_path / "s"
    with LocalStore(path) as store:
        kinds = count_fsyncs(monkeypatch)
        assert store.put_many(TEXTS) == [ref_for(t) for t in TEXTS]
        assert kinds == ["file", "dir"]
    assert [p.name for p in (path / "bodies").iterdir()] == [_packs(path)[0].name]
    with LocalStore(path) as store:
        for text in TEXTS:
            assert store.has(ref_for(text)) and store.get(ref_for(text)) == text
        assert store.bodies_bytes == sum(len(t) for t in TEXTS)


def test_a_lone_new_body_is_written_as_its_own_file(tmp_path: Path) -> None:
    """A group with one new body (the others stored already) writes it as put does, a file of
    its own: a pack of one would save nothing."""
    path = tmp_path / "s"
    with LocalStore(path) as store:
        assert store.put_many([TEXTS[0]]) == [ref_for(TEXTS[0])]
        assert store.put_many(TEXTS[:2]) == [ref_for(t) for t in TEXTS[:2]]
    assert _packs(path) == []
    assert sorted(p.name for p in (path / "bodies").rglob("*.txt")) == sorted(
        f"{ref_for(t)}.txt" for t in TEXTS[:2]
    )


def test_bodies_already_packed_are_not_written_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group, or a put, of texts a pack already holds writes nothing and syncs at most
    ``bodies/`` (which a process killed after its rename may have left unsynced)."""
    path = tmp_path / "s"
    _packed_session(path)
    with LocalStore(path) as store:
        kinds = count_fsyncs(monkeypatch)
        assert store.put_many(TEXTS) == [ref_for(t) for t in TEXTS]
        assert store.put(TEXTS[3]) == ref_for(TEXTS[3])
        assert kinds == ["dir"]
    assert len(_packs(path)) == 1
    assert list((path / "bodies").rglob("*.txt")) == []


def test_a_pack_counts_toward_the_quota_body_by_body(tmp_path: Path) -> None:
    """The quota is checked body by body in order: the one that does not fit fails alone, the
    others are packed, and the total counts only what was stored."""
    texts = list(TEXTS[:12])
    texts[5] = "too big for what is left\n" * 1_000
    quota = sum(len(t) for i, t in enumerate(texts) if i != 5)
    with LocalStore(tmp_path / "s", quota_bytes=quota) as store:
        got = store.put_many(texts)
        assert isinstance(got[5], QuotaExceeded)
        assert [g for i, g in enumerate(got) if i != 5] == [
            ref_for(t) for i, t in enumerate(texts) if i != 5
        ]
        assert store.bodies_bytes == quota
    with LocalStore(tmp_path / "s", quota_bytes=quota) as store:
        assert store.bodies_bytes == quota  # counted again from the pack's index
        assert isinstance(store.put_many(["one more byte"])[0], QuotaExceeded)


def test_a_pack_that_cannot_be_written_falls_back_to_one_file_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, logs: list[dict[str, Any]]
) -> None:
    """When the pack's write fails (a full disk), its bodies are written one file each, so
    each is stored or fails on its own; no temp file is left."""
    real = _fs.write

    def write(fd: int, data: bytes | memoryview) -> None:
        if bytes(data[: len(MAGIC)]) == MAGIC:
            raise OSError(28, "No space left on device")
        real(fd, data)

    monkeypatch.setattr(_fs, "write", write)
    path = tmp_path / "s"
    with LocalStore(path) as store:
        assert store.put_many(TEXTS) == [ref_for(t) for t in TEXTS]
    assert _packs(path) == []
    assert len(list((path / "bodies").rglob("*.txt"))) == len(TEXTS)
    assert list(path.rglob(".tmp-*")) == []
    [failed] = [e for e in logs if e["event"] == "toolbudget.spill.pack_failed"]
    assert failed["bodies"] == len(TEXTS) and "disk full" in failed["error"]


def test_a_temp_pack_left_by_a_crash_is_removed_and_never_read(tmp_path: Path) -> None:
    """A pack cut short before its rename (a crash) stays a temp file: its bodies are not
    found, and it is removed when the bodies are first counted."""
    path = tmp_path / "s"
    LocalStore(path).close()
    name, data, _ = encode_pack([(ref_for(t), t.encode()) for t in TEXTS])
    temp = path / "bodies" / f".tmp-{name}-0123456789ab"
    temp.write_bytes(data[: len(data) // 2])
    with LocalStore(path) as store:
        assert not store.has(ref_for(TEXTS[0]))
        assert store.bodies_bytes == 0
    assert not temp.exists()


def _garbage_header(pack: Path) -> None:
    pack.write_bytes(b"NOTAPACK" + pack.read_bytes()[8:])


def _huge_index(pack: Path) -> None:
    data = pack.read_bytes()
    pack.write_bytes(data[:8] + (1 << 40).to_bytes(8, "little") + data[16:])


def _renamed(pack: Path) -> None:
    pack.rename(pack.with_name("pack-" + "0" * 32 + ".pack"))


def _symlink(pack: Path) -> None:
    real = pack.with_name("elsewhere")
    pack.rename(real)
    pack.symlink_to(real)


def _fifo(pack: Path) -> None:
    pack.unlink()
    os.mkfifo(pack)


@pytest.mark.parametrize("damage", [_garbage_header, _huge_index, _renamed, _symlink, _fifo])
def test_a_damaged_pack_is_skipped_with_a_warning_and_its_bodies_stored_again(
    tmp_path: Path, damage: Callable[[Path], None], logs: list[dict[str, Any]]
) -> None:
    """A pack with a foreign header, an index length out of range, a name that is not its
    index's hash, a symlink or a FIFO is skipped with ``pack_skipped`` (never followed,
    never blocking): its refs are not found, and storing the texts again stores them whole."""
    path = tmp_path / "s"
    refs = _packed_session(path)
    damage(_packs(path)[0])
    with LocalStore(path) as store:
        assert not store.has(refs[0])
        with pytest.raises(RefError, match="no body"):
            store.get(refs[0])
        assert store.put_many(TEXTS) == refs
        assert [store.get(r) for r in refs] == TEXTS
    assert [e["event"] for e in logs].count("toolbudget.spill.pack_skipped") == 1


def test_a_pack_cut_short_keeps_the_bodies_before_the_cut(
    tmp_path: Path, logs: list[dict[str, Any]]
) -> None:
    """A pack cut inside its 31st body (a session copied in part) keeps the 30 bodies before
    the cut, each read back exactly, with a ``pack_cut`` warning; the cut ones are not found,
    and storing the texts again stores them whole."""
    path = tmp_path / "s"
    refs = _packed_session(path)
    pack = _packs(path)[0]
    _, _, where = encode_pack([(ref_for(t), t.encode()) for t in TEXTS])
    cut_at = where[refs[30]].offset + 5
    pack.write_bytes(pack.read_bytes()[:cut_at])
    with LocalStore(path) as store:
        assert [store.get(r) for r in refs[:30]] == TEXTS[:30]
        assert not any(store.has(r) for r in refs[30:])
        [warned] = [e for e in logs if e["event"] == "toolbudget.spill.pack_cut"]
        assert warned["reason"] == f"{len(TEXTS) - 30} bodies lie past its end; 30 kept"
        assert store.put_many(TEXTS) == refs
        assert [store.get(r) for r in refs] == TEXTS
    with ReadOnlyStore(path) as reader:
        assert reader.get(refs[5]) == TEXTS[5] and reader.get(refs[35]) == TEXTS[35]


def _flipped_last_body(path: Path) -> tuple[list[str], Path]:
    """A packed session at ``path`` whose last body has one byte flipped in its pack: its refs
    and that pack."""
    refs = _packed_session(path)
    pack = _packs(path)[0]
    data = bytearray(pack.read_bytes())
    data[-5] ^= 0x01
    pack.write_bytes(bytes(data))
    return refs, pack


def test_a_packed_body_whose_bytes_changed_is_reported_corrupt(tmp_path: Path) -> None:
    """A byte flipped inside a packed body is caught by the ref's hash on read: StoreError
    naming the corruption, never the changed text."""
    path = tmp_path / "s"
    refs, _ = _flipped_last_body(path)
    with LocalStore(path) as store, pytest.raises(StoreError, match="corrupt"):
        store.get(refs[-1])


def test_a_corrupt_packed_body_is_reported_in_its_pack_not_in_a_file_that_does_not_exist(
    tmp_path: Path,
) -> None:
    """The StoreError for a damaged packed body names the pack file holding it, in the live and
    the read-only store, never the body file path where nothing is stored."""
    path = tmp_path / "s"
    refs, pack = _flipped_last_body(path)
    shown = f"{refs[-1]} in bodies/{pack.name}"
    with LocalStore(path) as store, pytest.raises(StoreError, match=shown) as live:
        store.get(refs[-1])
    with pytest.raises(StoreError, match=shown) as lockfree:
        ReadOnlyStore(path).get(refs[-1])
    for err in (live.value, lockfree.value):
        assert f"{refs[-1]}.txt" not in str(err)


def test_path_of_a_packed_body_writes_its_file(tmp_path: Path) -> None:
    """Asking for the path of a body that only a pack holds writes its file first, so an
    envelope naming the path names a file holding the exact body; later groups keep it a file."""
    path = tmp_path / "s"
    refs = _packed_session(path)
    with LocalStore(path) as store:
        named = store.path_of(refs[4])
        assert Path(named).read_text() == TEXTS[4]
        assert store.bodies_bytes == sum(len(t) for t in TEXTS) + len(TEXTS[4])
        fresh = [f"new body {i}\n" * 30 for i in range(10)]
        store.path_of(ref_for(fresh[0]))
        assert store.put_many(fresh) == [ref_for(t) for t in fresh]
        assert Path(store.path_of(ref_for(fresh[0]))).read_text() == fresh[0]


def test_a_read_only_store_reads_packed_bodies_even_a_pack_written_after_it_opened(
    tmp_path: Path,
) -> None:
    """``toolbudget read``'s lock-free store finds bodies in packs, including one the live
    session wrote after the reader first looked."""
    path = tmp_path / "s"
    refs = _packed_session(path)
    with LocalStore(path) as live, ReadOnlyStore(path) as reader:
        live.append_log([{"ref": refs[0]}])
        assert reader.get(refs[0]) == TEXTS[0]
        later = [f"later body {i}\n" * 25 for i in range(9)]
        assert live.put_many(later) == [ref_for(t) for t in later]
        assert reader.get(ref_for(later[8])) == later[8]
        assert not reader.has("0" * 32)


def test_gc_removes_an_old_session_holding_packs(tmp_path: Path) -> None:
    """``gc_sessions`` treats a pack as the session's own file: an old session with one is
    removed whole."""
    path = tmp_path / "s"
    _packed_session(path)
    with LocalStore(path) as store:
        store.append_log([{"ref": ref_for(TEXTS[0])}])
    stamp = time.time() - 10 * 86_400
    for entry in [path, *path.rglob("*")]:
        os.utime(entry, (stamp, stamp), follow_symlinks=False)
    assert gc_sessions(tmp_path, older_than_s=86_400) == [path]
    assert not path.exists()


@given(
    st.lists(st.binary(max_size=300), min_size=1, max_size=40, unique_by=lambda b: ref_for(b.hex()))
)
def test_every_body_of_a_pack_reads_back_exactly(
    tmp_path_factory: Any, bodies: list[bytes]
) -> None:
    """For any bodies, the index read back from an encoded pack locates each one's exact bytes
    (offsets hold whatever the index's own length)."""
    pairs = [(f"{i:032x}", data) for i, data in enumerate(bodies)]
    name, data, where = encode_pack(pairs)
    directory = tmp_path_factory.mktemp("pack")
    (directory / name).write_bytes(data)
    fd = os.open(directory / name, os.O_RDONLY)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        assert read_index(fd, name) == where
        assert [read_located(dir_fd, where[ref]) for ref, _ in pairs] == bodies
    finally:
        os.close(fd)
        os.close(dir_fd)
