"""FsspecStore's roll-up snapshots (issue 31): what a resume reads, and that it is the whole log.

On fsspec's in-memory filesystem (the store's code paths without a server) and, in the slow
lane, on moto's S3 server on loopback with requests counted by a proxy. A resume must read the
records a full replay reads, whatever the append pattern, with a torn or damaged snapshot, and
with a reader whose listing predates a roll-up that collected the objects it listed.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spill import FsspecStore
from spill._objlog import Listing, ObjectLog
from spill._objsnap import ROLLUP_OBJECTS, encode_snapshot, parse_snapshot
from tests._faultproxy import Fault, FaultProxy, fault_proxy
from tests._s3 import MotoS3


def _memory_url() -> str:
    # fsspec's memory filesystem is one store per process: a fresh prefix per session.
    return f"memory://snapshots-{secrets.token_hex(8)}/session"


def _append(store: FsspecStore, batches: list[int], start: int = 0) -> list[dict[str, Any]]:
    """Append ``batches[i]`` records per call; return every record appended, in order."""
    records: list[dict[str, Any]] = []
    n = start
    for size in batches:
        batch = [{"n": n + i, "pad": "x" * (n % 7)} for i in range(size)]
        n += size
        store.append_log(batch)
        records += batch
    return records


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=3 * ROLLUP_OBJECTS))
def test_a_resume_reads_every_record_whatever_the_append_pattern(batches: list[int]) -> None:
    """Any sequence of append sizes: a fresh store reads exactly the records appended, in order,
    and the objects it reads beside its snapshot never exceed ROLLUP_OBJECTS."""
    url = _memory_url()
    with FsspecStore(url, cache_dir=None) as writer:
        records = _append(writer, batches)
    with FsspecStore(url) as reader:
        assert reader.read_log() == records
        listing = reader._log.scan()
        newest = listing.snapshots[-1] if listing.snapshots else -1
        assert len([s for s in listing.seqs if s > newest]) < ROLLUP_OBJECTS
        assert reader._log.snapshot == newest


def test_the_writer_keeps_every_object_after_the_previous_snapshot() -> None:
    """After each roll-up, the log objects after the previous snapshot are all still there (a
    reader that listed before the newest snapshot needs them), and only two snapshots remain."""
    url = _memory_url()
    with FsspecStore(url) as writer:
        previous = -1
        for n in range(5 * ROLLUP_OBJECTS):
            writer.append_log([{"n": n}])
            listing = writer._log.scan()
            if len(listing.snapshots) >= 2:
                previous = listing.snapshots[-2]
            assert set(range(previous + 1, n + 1)) <= set(listing.seqs)
            assert len(listing.snapshots) <= 2
        assert listing.snapshots == (4 * ROLLUP_OBJECTS - 1, 5 * ROLLUP_OBJECTS - 1)
        assert min(listing.seqs) == 4 * ROLLUP_OBJECTS


@pytest.mark.parametrize("damage", ["torn", "flipped", "empty"])
def test_a_damaged_newest_snapshot_is_skipped_for_the_one_before_it(
    damage: str, logs: list[dict[str, Any]]
) -> None:
    """A snapshot cut short, with a flipped byte, or empty is ignored with a warning; the
    resume takes the previous snapshot and the appends after it and reads every record."""
    url = _memory_url()
    with FsspecStore(url) as writer:
        records = _append(writer, [1] * (3 * ROLLUP_OBJECTS + 3))
        newest = writer._log.scan().snapshots[-1]
        key = writer._log.snapshot_key(newest)
        data = bytes(writer._objects.fs.cat_file(key))
        broken = {
            "torn": data[: len(data) // 2],
            "flipped": data[:-5] + bytes([data[-5] ^ 1]) + data[-4:],
            "empty": b"",
        }[damage]
        writer._objects.fs.pipe_file(key, broken)
    with FsspecStore(url) as reader:
        assert reader.read_log() == records
        assert reader._log.snapshot < newest
    skipped = [e for e in logs if e["event"] == "toolbudget.log.snapshot_skipped"]
    assert [e["object"] for e in skipped] == [f"log/{newest:012d}.snapshot"]


def test_a_snapshot_checks_its_own_name_size_and_checksum() -> None:
    """parse_snapshot gives back the bytes of a whole snapshot and refuses any other through,
    a missing byte, an extra byte and a changed byte."""
    body = b'{"n":1}\n{"n":2}\n'
    data = encode_snapshot(7, body)
    assert parse_snapshot(data, 7) == body
    assert "through" in str(parse_snapshot(data, 8))
    assert "torn" in str(parse_snapshot(data[:-1], 7))
    assert "torn" in str(parse_snapshot(data + b"x", 7))
    assert "checksum" in str(parse_snapshot(data[:-2] + b"3\n", 7))


def test_a_reader_whose_listing_a_roll_up_collected_lists_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A reader that listed the log, then slept through two roll-ups that collected what it
    listed, lists again and reads every record: no object a reader needs is lost to it."""
    url = _memory_url()
    with FsspecStore(url) as writer:
        records = _append(writer, [1] * (ROLLUP_OBJECTS + 2))
        reader = FsspecStore(url)
        stale = reader._log.scan()
        records += _append(writer, [1] * (2 * ROLLUP_OBJECTS), start=len(records))
        assert not set(stale.seqs) <= set(writer._log.scan().seqs)  # the stale listing is collected
    real = ObjectLog.scan
    listings: list[Listing] = [stale]

    def scan(self: ObjectLog) -> Listing:
        return listings.pop() if listings else real(self)

    monkeypatch.setattr(ObjectLog, "scan", scan)
    with reader:
        assert reader.read_log() == records


def test_a_failed_roll_up_leaves_the_append_done_and_is_tried_again_later(
    monkeypatch: pytest.MonkeyPatch, logs: list[dict[str, Any]]
) -> None:
    """A snapshot that cannot be written warns (toolbudget.log.snapshot_failed) and the append
    that triggered it still counts; a later append rolls the log up, and nothing is collected
    before a snapshot was written and read back."""
    url = _memory_url()
    with FsspecStore(url) as writer:
        real = writer._objects.fs.pipe_file
        broken = {"on": True}

        def pipe_file(path: str, data: bytes, **kwargs: Any) -> Any:
            if path.endswith(".snapshot") and broken["on"]:
                raise OSError("injected: snapshot PUT refused")
            return real(path, data, **kwargs)

        monkeypatch.setattr(writer._objects.fs, "pipe_file", pipe_file)
        records = _append(writer, [1] * ROLLUP_OBJECTS)
        assert writer._log.scan() == Listing(tuple(range(ROLLUP_OBJECTS)), ())
        broken["on"] = False
        records += _append(writer, [1] * ROLLUP_OBJECTS, start=len(records))
        assert writer._log.scan().snapshots
    assert any(e["event"] == "toolbudget.log.snapshot_failed" for e in logs)
    with FsspecStore(url) as reader:
        assert reader.read_log() == records


# -- on the loopback S3 -------------------------------------------------------------------------


@pytest.fixture
def proxy(moto_s3: MotoS3) -> Iterator[FaultProxy]:
    """A fault-injecting, request-counting proxy in front of the loopback S3 server."""
    with fault_proxy(moto_s3.endpoint) as running:
        yield running


def _via(proxy: FaultProxy, s3: MotoS3, url: str, tmp_path: Path) -> FsspecStore:
    options = s3.options(endpoint_url=proxy.endpoint)
    options["config_kwargs"] = {
        "retries": {"mode": "standard", "total_max_attempts": 3},
        "connect_timeout": 2,
        "read_timeout": 2,
    }
    return FsspecStore(url, cache_dir=tmp_path / secrets.token_hex(4), **options)


@pytest.mark.slow
def test_an_s3_resume_reads_one_snapshot_and_at_most_the_appends_after_it(
    moto_s3: MotoS3, proxy: FaultProxy, tmp_path: Path
) -> None:
    """On S3, a resume of 200 one-record appends is one LIST and at most ROLLUP_OBJECTS GETs
    beside the snapshot's, with several GETs in flight at once; the records are all there."""
    moto_s3.make_bucket("snapshots")
    url = f"s3://snapshots/{secrets.token_hex(8)}/session"
    with FsspecStore(url, cache_dir=tmp_path / "w", **moto_s3.options()) as writer:
        records = _append(writer, [1] * 200)
    with _via(proxy, moto_s3, url, tmp_path) as reader:
        proxy.seen.clear()
        assert reader.read_log() == records
    gets = [p for m, p, _ in proxy.seen if m == "GET" and "list-type" not in p]
    lists = [p for m, p, _ in proxy.seen if m == "GET" and "list-type" in p]
    assert len(lists) == 1  # the read's (the open's came before the count)
    assert not [p for m, p, _ in proxy.seen if m == "HEAD"]
    assert sum(".snapshot" in p for p in gets) == 1
    assert len(gets) <= ROLLUP_OBJECTS + 1
    assert proxy.peak > 1


@pytest.mark.slow
@pytest.mark.parametrize("times", [1, 3])
def test_a_snapshot_put_whose_reply_is_lost_never_costs_a_record(
    moto_s3: MotoS3, proxy: FaultProxy, tmp_path: Path, times: int
) -> None:
    """The snapshot PUT lands but its reply is lost, once (the retry meets a 412: the store
    reads it back and takes it) or on every attempt (a warning; tried again later): every
    append succeeds and a resume reads every record."""
    moto_s3.make_bucket("snapshots")
    url = f"s3://snapshots/{secrets.token_hex(8)}/session"
    proxy.faults.append(
        Fault("lost_reply", lambda m, p: m == "PUT" and ".snapshot" in p, times=times)
    )
    with _via(proxy, moto_s3, url, tmp_path) as writer:
        records = _append(writer, [1] * (2 * ROLLUP_OBJECTS + 1))
        assert writer._log.scan().snapshots
    with FsspecStore(url, cache_dir=tmp_path / "r", **moto_s3.options()) as reader:
        assert reader.read_log() == records
