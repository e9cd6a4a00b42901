"""Packs under attack: planted files, packs whose bodies lie, and the quota of unpacked copies."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchmarks.perf import _conversation, _result_text, _round
from budget import Budget
from budget._errors import QuotaExceeded
from spill import LocalStore, _packs, ref_for
from spill._packs import encode_pack
from spill._readonly import ReadOnlyStore

TEXTS = [f"output line {i} of a long build log\n" * (30 + i) for i in range(12)]


def _packed(path: Path) -> list[str]:
    """A session holding TEXTS in one pack, closed; their refs."""
    with LocalStore(path) as store:
        refs = store.put_many(TEXTS)
    assert len(list((path / "bodies").glob("pack-*.pack"))) == 1
    return [r for r in refs if isinstance(r, str)]


def _symlink(at: Path, outside: Path) -> None:
    at.symlink_to(outside)


def _fifo(at: Path, outside: Path) -> None:
    os.mkfifo(at)


def _directory(at: Path, outside: Path) -> None:
    at.mkdir()


@pytest.mark.parametrize("plant", [_symlink, _fifo, _directory])
def test_a_packed_body_reads_back_whatever_is_planted_at_its_file_path(
    tmp_path: Path, plant: Callable[[Path, Path], None]
) -> None:
    """A symlink, FIFO or directory planted where a packed body's file would go does not hide
    the body: put reports it stored (it is, in the pack), so get, has and the read-only store
    serve it from the pack, and the link's target is never read."""
    path = tmp_path / "s"
    refs = _packed(path)
    outside = tmp_path / "secret.txt"
    outside.write_text("never read")
    (path / "bodies" / refs[3][:2]).mkdir()
    plant(path / "bodies" / refs[3][:2] / f"{refs[3]}.txt", outside)
    with LocalStore(path) as store:
        assert store.put(TEXTS[3]) == refs[3]
        assert store.put_many(TEXTS[3:5]) == refs[3:5]
        assert store.has(refs[3])
        assert store.get(refs[3]) == TEXTS[3]
    with ReadOnlyStore(path) as reader:
        assert reader.get(refs[3]) == TEXTS[3]
    assert outside.read_text() == "never read"


def test_a_pack_whose_index_lists_other_bytes_for_a_ref_never_stands_for_its_body(
    tmp_path: Path, logs: list[dict[str, Any]]
) -> None:
    """A pack planted with a self-consistent name whose index lists two refs with other bytes
    (one of the right length, one empty) does not count as storing them: put_many and put
    store the real bodies, which read back exactly, also after the session is reopened."""
    path = tmp_path / "s"
    LocalStore(path).close()
    refs = [ref_for(t) for t in TEXTS]
    lying = [(refs[0], b"X" * len(TEXTS[0])), (refs[1], b"")]
    name, data, _ = encode_pack(lying)
    (path / "bodies" / name).write_bytes(data)
    with LocalStore(path) as store:
        assert store.put_many(TEXTS[:6]) == refs[:6]
        assert store.put(TEXTS[1]) == refs[1]
        assert [store.get(r) for r in refs[:6]] == TEXTS[:6]
    with LocalStore(path) as store:
        assert store.put_many(TEXTS[:2]) == refs[:2]
        assert [store.get(r) for r in refs[:2]] == TEXTS[:2]
    damaged = [e["ref"] for e in logs if e["event"] == "toolbudget.spill.packed_damaged"]
    assert set(damaged) == set(refs[:2])


def test_writing_a_packed_body_to_its_named_file_stays_within_the_quota(
    tmp_path: Path, logs: list[dict[str, Any]]
) -> None:
    """``path_of`` on packed bodies of a session at its quota writes no second copy over it (a
    ``path_unavailable`` warning says why), and the group commit that follows for that text
    meets QuotaExceeded, so the text stays inline rather than naming a missing file."""
    path = tmp_path / "s"
    quota = sum(len(t) for t in TEXTS)
    with LocalStore(path, quota_bytes=quota) as store:
        refs = store.put_many(TEXTS)
        assert refs == [ref_for(t) for t in TEXTS]
        for ref in refs:
            assert isinstance(ref, str)
            store.path_of(ref)
        assert store.bodies_bytes <= quota
        [again] = store.put_many([TEXTS[0]])
        assert isinstance(again, QuotaExceeded)
    with LocalStore(path, quota_bytes=quota) as store:
        assert store.bodies_bytes <= quota
    assert list((path / "bodies").rglob("*.txt")) == []
    unavailable = [e for e in logs if e["event"] == "toolbudget.spill.path_unavailable"]
    assert len(unavailable) == len(TEXTS) and "quota" in unavailable[0]["error"]


def test_a_ref_in_two_packs_reads_back_from_the_intact_one_whichever_is_listed_first(
    tmp_path: Path,
) -> None:
    """When two packs hold a ref (one skipped by an earlier process, the ref stored again) and
    the copy listed first is damaged, get and the read-only store read the intact copy."""
    path = tmp_path / "s"
    LocalStore(path).close()
    bodies = path / "bodies"
    ref = ref_for(TEXTS[0])
    intact, data, _ = encode_pack([(ref, TEXTS[0].encode()), (ref_for(TEXTS[1]), b"")])
    (bodies / intact).write_bytes(data)
    for i in range(200):  # a damaged pack that the listing puts first (order is the fs's own)
        filler = f"filler {i}"
        damaged, data, _ = encode_pack([(ref, b"X" * len(TEXTS[0])), (ref_for(filler), b"")])
        (bodies / damaged).write_bytes(data)
        names = os.listdir(bodies)
        if names.index(damaged) < names.index(intact):
            break
        (bodies / damaged).unlink()
    else:
        pytest.fail("no damaged pack was listed before the intact one")
    with LocalStore(path) as store:
        assert store.get(ref) == TEXTS[0]
    with ReadOnlyStore(path) as reader:
        assert reader.get(ref) == TEXTS[0]


def test_a_group_too_large_for_one_pack_index_is_split_into_packs_that_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group whose index would pass the bound a reader accepts (shrunk here to 2,000 bytes,
    about 40 refs) is written as several packs, each readable: none is skipped on reopening,
    and every body reads back exactly."""
    monkeypatch.setattr(_packs, "_MAX_INDEX", 2_000)
    texts = [f"small result {i}\n" * 3 for i in range(100)]
    path = tmp_path / "s"
    with LocalStore(path) as store:
        assert store.put_many(texts) == [ref_for(t) for t in texts]
    assert len(list((path / "bodies").glob("pack-*.pack"))) >= 3
    with LocalStore(path) as store:
        assert [store.get(ref_for(t)) for t in texts] == texts
        assert store.bodies_bytes == sum(len(t) for t in texts)


def test_a_result_spilled_again_after_resume_reads_back_past_a_symlink_at_its_file_path(
    tmp_path: Path,
) -> None:
    """A session whose spilled outputs were packed, resumed with a symlink planted at one
    body's file path, spills that output again under a new call: the decision is logged as
    spilled and the model reads the exact output back; the link's target is never read."""
    config = {"result_cap": 4_000, "preview_chars": 500}
    path = tmp_path / "s"
    history = _conversation(20, 8_000)
    with Budget.open(path, config) as session:
        session.prepare(history, now=0.0)
    assert list((path / "bodies").glob("pack-*.pack"))
    text = _result_text(3, 8_000)
    ref = ref_for(text)
    outside = tmp_path / "secret.txt"
    outside.write_text("never read")
    (path / "bodies" / ref[:2]).mkdir(exist_ok=True)
    (path / "bodies" / ref[:2] / f"{ref}.txt").symlink_to(outside)
    with Budget.open(path, config) as session:
        req = session.prepare([*history, *_round(20, text)], now=1.0)
        [again] = [d for d in req.report.decisions if d.call_id == "toolu_00000020"]
        assert (again.kind, again.ref) == ("spilled", ref)
        assert session.read(ref) == text
    assert outside.read_text() == "never read"
