"""The decision log on disk: its line format, and recovery from damaged lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from spill import LocalStore
from spill._log import _decode_lines, _decode_whole, decode_log, encode_records
from tests._lanes import examples

RECORDS = [{"call_id": f"toolu_{i}", "decision": "spilled", "n": i} for i in range(5)]


def skipped(events: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """(line number, reason) of every log line the decoder skipped with a warning."""
    return [
        (e["line"], e["reason"])
        for e in events
        if e["event"] == "toolbudget.log.line_skipped" and e["log_level"] == "warning"
    ]


def write_session(path: Path, records: list[dict[str, Any]]) -> Path:
    """Create a session holding ``records`` and return the path of its log."""
    with LocalStore(path, fsync=False) as store:
        store.append_log(records)
    return path / "decisions.jsonl"


def test_line_format_is_the_record_plus_version_and_crc(tmp_path: Path) -> None:
    """Each line is one JSON object: the record, v=1, and crc = xxh32 of the sorted rest."""
    log = write_session(tmp_path / "s", [{"b": 1, "a": "日本"}])
    lines = log.read_bytes().split(b"\n")
    assert lines[1:] == [b""]
    obj = orjson.loads(lines[0])
    crc = obj.pop("crc")
    assert obj == {"a": "日本", "b": 1, "v": 1}
    assert crc == xxhash.xxh32_hexdigest(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS))


def test_lines_written_in_canonical_key_order_are_accepted() -> None:
    """A line whose crc sits in sorted position (another writer's layout) is still read."""
    body = {"x": [1, 2], "v": 1}
    crc = xxhash.xxh32_hexdigest(orjson.dumps(body, option=orjson.OPT_SORT_KEYS))
    line = orjson.dumps({**body, "crc": crc}, option=orjson.OPT_SORT_KEYS)
    assert line.index(b'"crc"') < line.index(b'"v"')
    assert decode_log(line + b"\n", source="test") == [{"x": [1, 2]}]


def test_torn_last_line_is_skipped_and_later_appends_stay_valid(
    tmp_path: Path, logs: list[dict[str, Any]]
) -> None:
    """A half-written last line is skipped with a warning; records appended later all read."""
    log = write_session(tmp_path / "s", RECORDS[:3])
    whole = encode_records([RECORDS[3]])
    with log.open("ab") as f:
        f.write(whole[: len(whole) // 2])
    with LocalStore(tmp_path / "s") as store:
        assert store.read_log() == RECORDS[:3]
        assert skipped(logs) == [(4, "not valid JSON (torn last line: no final newline)")]
        store.append_log([RECORDS[4]])
        logs.clear()
        assert store.read_log() == [*RECORDS[:3], RECORDS[4]]
        assert [line for line, _ in skipped(logs)] == [4]
    assert log.read_bytes().endswith(b"\n")
    assert len(log.read_bytes().split(b"\n")) == 6


def test_complete_line_missing_only_its_newline_is_kept_consistently(tmp_path: Path) -> None:
    """A complete record lacking only its newline is read, and still read after more appends."""
    log = write_session(tmp_path / "s", RECORDS[:2])
    log.write_bytes(log.read_bytes()[:-1])
    with LocalStore(tmp_path / "s") as store:
        assert store.read_log() == RECORDS[:2]
        store.append_log([RECORDS[2]])
        assert store.read_log() == RECORDS[:3]


@pytest.mark.parametrize("where", [0, 10, -25, -5])
def test_flipped_byte_skips_only_that_record(
    tmp_path: Path, logs: list[dict[str, Any]], where: int
) -> None:
    """A byte flipped anywhere in a line makes just that line skipped, with its line number."""
    log = write_session(tmp_path / "s", RECORDS)
    lines = log.read_bytes().split(b"\n")
    damaged = bytearray(lines[2])
    damaged[where] ^= 0x01
    lines[2] = bytes(damaged)
    log.write_bytes(b"\n".join(lines))
    with LocalStore(tmp_path / "s") as store:
        assert store.read_log() == RECORDS[:2] + RECORDS[3:]
    assert [line for line, _ in skipped(logs)] == [3]


def test_unknown_version_and_junk_lines_are_skipped_with_reasons(
    tmp_path: Path, logs: list[dict[str, Any]]
) -> None:
    """Lines of another version, blank lines, non-objects and crc-less objects are skipped."""
    future = {"call_id": "toolu_9", "v": 2}
    future["crc"] = xxhash.xxh32_hexdigest(orjson.dumps(future, option=orjson.OPT_SORT_KEYS))
    log = write_session(tmp_path / "s", RECORDS[:1])
    with log.open("ab") as f:
        f.write(orjson.dumps(future) + b"\n\n[1, 2]\n" + b'{"call_id": "x", "v": 1}\n')
    write_more = encode_records([RECORDS[1]])
    with log.open("ab") as f:
        f.write(write_more)
    with LocalStore(tmp_path / "s") as store:
        assert store.read_log() == RECORDS[:2]
    assert skipped(logs) == [
        (2, "unknown version v=2"),
        (3, "empty line"),
        (4, "not a JSON object"),
        (5, "missing checksum"),
    ]


def test_duplicated_line_is_skipped_after_reopen(
    tmp_path: Path, logs: list[dict[str, Any]]
) -> None:
    """A line copied twice into the log (e.g. a retried append) is restored once."""
    log = write_session(tmp_path / "s", RECORDS[:3])
    lines = log.read_bytes().split(b"\n")
    log.write_bytes(b"\n".join([lines[0], lines[1], lines[1], lines[2], b""]))
    with LocalStore(tmp_path / "s") as store:
        assert store.read_log() == RECORDS[:3]
    assert [(line, "duplicate" in why) for line, why in skipped(logs)] == [(3, True)]


def test_decisions_survive_close_and_reopen(tmp_path: Path) -> None:
    """Records and bodies written in one LocalStore are there after reopening the directory."""
    with LocalStore(tmp_path / "s") as store:
        ref = store.put("body 🎉")
        store.append_log([{"call_id": "toolu_1", "ref": ref}])
        store.write_meta({"requests": 3})
    with LocalStore(tmp_path / "s") as store:
        assert store.read_log() == [{"call_id": "toolu_1", "ref": ref}]
        assert store.get(ref) == "body 🎉"
        assert store.read_meta() == {"requests": 3}


def test_records_with_colliding_checksums_are_not_taken_for_duplicates(
    logs: list[dict[str, Any]],
) -> None:
    """Two different lines with the same crc and length are both kept; their copies are not."""
    first, second = encode_records([{"n": 195944}]), encode_records([{"n": 762009}])
    assert first != second
    assert first[-12:] == second[-12:]
    assert len(first) == len(second)
    data = first + second + second + first
    assert decode_log(data, source="test") == [{"n": 195944}, {"n": 762009}]
    assert [line for line, _ in skipped(logs)] == [3, 4]


ANY_TEXT = st.text(alphabet=st.characters(exclude_categories=()), max_size=20)
KEYS = st.text(max_size=8).filter(lambda k: k not in ("v", "crc") and "\x00" not in k)
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=6,
)


@settings(max_examples=examples(40), deadline=None)
@given(records=st.lists(st.dictionaries(KEYS, JSON_VALUES, max_size=4), max_size=3))
def test_any_json_records_round_trip(records: list[dict[str, Any]]) -> None:
    """Arbitrary JSON records, lone surrogates included, decode to exactly what was encoded."""
    unique = [r for i, r in enumerate(records) if r not in records[:i]]
    assert decode_log(encode_records(unique), source="test") == unique


REALISTIC = [
    {"t": "d", "id": f"toolu_{i}", "kind": "spilled", "why": "cap", "chars": 60_000 + i,
     "tool": "bash", "ref": f"{i:032x}", "text": f"[toolbudget] Output …\n{i}\n" * 20}
    for i in range(50)
] + [{"t": "req", "n": 1, "at": 1.5, "m": 101}]  # fmt: skip


def test_a_whole_log_is_decoded_in_bulk() -> None:
    """A log as a session writes it takes the bulk path, and gives what line by line gives."""
    data = encode_records(REALISTIC)
    assert _decode_whole(data) == REALISTIC == _decode_lines(data, source="test")
    assert _decode_whole(data[:-1]) == REALISTIC  # a complete last line lacking its newline
    assert _decode_whole(b"") == []


DAMAGE = st.sampled_from(["flip", "truncate", "duplicate", "blank", "junk", "version", "reorder"])


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(
    records=st.lists(st.dictionaries(KEYS, JSON_VALUES, max_size=3), min_size=1, max_size=6),
    damage=DAMAGE,
    where=st.integers(0, 10_000),
)
def test_bulk_decoding_never_hides_a_damaged_line(
    records: list[dict[str, Any]], damage: str, where: int
) -> None:
    """The bulk path gives up on any log the line path would warn about, and else agrees."""
    lines = encode_records(records).splitlines(keepends=True)
    i = where % len(lines)
    line = lines[i]
    if damage == "flip":
        at = where % (len(line) - 1)  # not the newline: that would join two lines
        lines[i] = line[:at] + bytes([line[at] ^ 0x01]) + line[at + 1 :]
    elif damage == "truncate":
        lines = [*lines[:i], line[: where % len(line)]]
    elif damage == "duplicate":
        lines.insert(i, line)
    elif damage == "blank":
        lines.insert(i, b"\n")
    elif damage == "junk":
        lines.insert(i, b'{"v": 1, "x": 1}\n')
    elif damage == "version":
        lines[i] = encode_records([{"t": "x"}]).replace(b'"v":1', b'"v":2')
    else:  # another writer's layout: crc in sorted position, still valid
        body = orjson.loads(line)
        lines[i] = orjson.dumps(body, option=orjson.OPT_SORT_KEYS) + b"\n"
    data = b"".join(lines)
    with capture_logs() as warned:
        by_line = _decode_lines(data, source="test")
    whole = _decode_whole(data)
    if warned:
        assert whole is None
    if whole is not None:
        assert whole == by_line
    assert decode_log(data, source="test") == by_line


def _log_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files fsync'd from now on (``spill._fs.fsync``, the one fsync call)."""
    import os

    from spill import _fs

    synced: list[str] = []
    real = _fs.fsync

    def fsync(fd: int) -> None:
        synced.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        real(fd)

    monkeypatch.setattr(_fs, "fsync", fsync)
    return synced


def test_a_deferred_log_sync_writes_at_once_and_fsyncs_at_sync_or_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``defer_sync`` an append's records are in the file (another reader sees them,
    a killed process keeps them) before any fsync; ``sync`` fsyncs the log once whatever the
    appends before it, then nothing until the next append; ``close`` fsyncs what is left."""
    store = LocalStore(tmp_path / "s", defer_sync=True)
    synced = _log_fsyncs(monkeypatch)
    store.append_log(RECORDS[:2])
    store.append_log(RECORDS[2:4])
    on_disk = decode_log((tmp_path / "s" / "decisions.jsonl").read_bytes(), source="log")
    assert [r["n"] for r in on_disk] == [0, 1, 2, 3]
    assert "decisions.jsonl" not in synced
    store.sync()
    assert synced.count("decisions.jsonl") == 1
    store.sync()
    assert synced.count("decisions.jsonl") == 1
    store.append_log(RECORDS[4:])
    store.close()
    assert synced.count("decisions.jsonl") == 2
    with LocalStore(tmp_path / "s") as again:
        assert [r["n"] for r in again.read_log()] == [0, 1, 2, 3, 4]


def test_a_log_sync_is_never_deferred_unless_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without ``defer_sync`` every append is fsync'd before it returns (the library's
    ``prepare`` contract), and ``sync`` has nothing left to do."""
    with LocalStore(tmp_path / "s") as store:
        synced = _log_fsyncs(monkeypatch)
        store.append_log(RECORDS[:1])
        assert synced.count("decisions.jsonl") == 1
        store.sync()
        assert synced.count("decisions.jsonl") == 1
