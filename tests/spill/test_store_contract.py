"""The Store contract, run on LocalStore, MemoryStore and FsspecStore (moto's S3 on loopback)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget._errors import QuotaExceeded, RefError, StoreError
from spill import FsspecStore, LocalStore, MemoryStore, Store, ref_for
from tests._lanes import examples

StoreFactory = Callable[..., Store]

TEXTS = [
    "",
    "plain ascii\nwith lines\n",
    "CJK 中文字符 日本語 한국어",
    "emoji 🎉🧪👩‍👩‍👧 and combining é",
    "lone high \ud800 and lone low \udfff surrogates",
    "nul \x00 and \r\n line ends",
    "x" * 200_001,
]


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_put_get_round_trips_exact_text(make_store: StoreFactory, text: str) -> None:
    """get(put(text)) returns exactly the text, including CJK, emoji and lone surrogates."""
    store = make_store()
    ref = store.put(text)
    assert ref == ref_for(text)
    assert store.has(ref)
    assert store.get(ref) == text


def test_put_is_idempotent(make_store: StoreFactory) -> None:
    """Putting the same text twice returns the same ref and counts it once toward the quota."""
    store = make_store(quota_bytes=10)
    first = store.put("0123456789")
    assert store.put("0123456789") == first
    with pytest.raises(QuotaExceeded):
        store.put("a")


def test_quota_is_checked_before_writing(make_store: StoreFactory) -> None:
    """A body that would exceed the quota raises QuotaExceeded and is not stored."""
    store = make_store(quota_bytes=5)
    store.put("abc")
    with pytest.raises(QuotaExceeded) as info:
        store.put("defg")
    assert "quota of 5 bytes" in str(info.value)
    assert not store.has(ref_for("defg"))
    assert store.get(store.put("de")) == "de"


def test_quota_counts_utf8_bytes(make_store: StoreFactory) -> None:
    """The quota counts encoded bytes: three CJK characters are nine bytes."""
    store = make_store(quota_bytes=8)
    with pytest.raises(QuotaExceeded):
        store.put("中文字")
    store.put("中文")


def test_unknown_ref_raises_ref_error(make_store: StoreFactory) -> None:
    """get of a well-formed but unknown ref raises RefError; has says False; path_of still answers.

    path_of names where the body is or will be: an envelope naming the file is computed before
    its body is written (the body must be durable before the decision is logged).
    """
    store = make_store()
    ref = ref_for("never stored")
    assert not store.has(ref)
    with pytest.raises(RefError):
        store.get(ref)
    before = store.path_of(ref)
    assert store.put("never stored") == ref
    assert store.path_of(ref) == before


@pytest.mark.parametrize(
    "bad", ["../../etc/passwd", "/etc/passwd", "0" * 31 + "\x00", "A" * 32, "0" * 31, 42, None]
)
def test_malformed_refs_raise_ref_error_everywhere(make_store: StoreFactory, bad: Any) -> None:
    """get, has and path_of refuse malformed refs with RefError before touching anything."""
    store = make_store()
    store.put("something")
    for method in (store.get, store.has, store.path_of):
        with pytest.raises(RefError):
            method(bad)


def test_put_refuses_non_text(make_store: StoreFactory) -> None:
    """put of bytes raises StoreError naming the type."""
    store = make_store()
    with pytest.raises(StoreError, match="bytes"):
        store.put(b"raw")  # type: ignore[arg-type]


def test_path_of_matches_the_store_kind(make_store: StoreFactory) -> None:
    """path_of names a file holding the body for LocalStore and is None for the stores without
    local files (MemoryStore, FsspecStore: objects are read back by ref)."""
    store = make_store()
    ref = store.put("body text")
    path = store.path_of(ref)
    if isinstance(store, MemoryStore | FsspecStore):
        assert path is None
    else:
        assert path is not None
        with open(path, encoding="utf-8") as f:
            assert f.read() == "body text"


def test_log_round_trips_records_in_order(make_store: StoreFactory) -> None:
    """Appended records come back in order, without the v and crc fields the log adds."""
    store = make_store()
    first = [{"call_id": "toolu_1", "decision": "spilled", "ref": ref_for("a"), "chars": 1}]
    second: list[dict[str, Any]] = [
        {"call_id": "toolu_2", "decision": "kept", "nested": {"list": [1, 2.5, None, True]}},
        {"call_id": "toolu_3", "decision": "trimmed", "text": "日本語 🎉"},
    ]
    store.append_log(first)
    store.append_log(second)
    store.append_log([])
    assert store.read_log() == first + second


def test_log_keeps_lone_surrogates_exactly(make_store: StoreFactory) -> None:
    """Record strings with lone surrogates (which orjson refuses) are restored exactly."""
    store = make_store()
    record = {"text": "out \ud800 put", "parts": ["\udfff", {"deep": "a\udbffb"}], "n": 3}
    store.append_log([record, {"plain": "text"}])
    assert store.read_log() == [record, {"plain": "text"}]


def test_read_log_returns_copies(make_store: StoreFactory) -> None:
    """Mutating what read_log returned does not change what the next read returns."""
    store = make_store()
    store.append_log([{"k": [1]}])
    got = store.read_log()
    got[0]["k"].append(2)
    got.append({"x": 1})
    assert store.read_log() == [{"k": [1]}]


def test_duplicate_records_are_skipped_with_a_warning(
    make_store: StoreFactory, logs: list[dict[str, Any]]
) -> None:
    """The same record appended twice is read back once, with a warning naming line 2."""
    store = make_store()
    store.append_log([{"call_id": "toolu_1"}])
    store.append_log([{"call_id": "toolu_1"}, {"call_id": "toolu_2"}])
    assert store.read_log() == [{"call_id": "toolu_1"}, {"call_id": "toolu_2"}]
    warnings = [e for e in logs if e["event"] == "toolbudget.log.line_skipped"]
    assert [(e["line"], e["log_level"]) for e in warnings] == [(2, "warning")]
    assert "duplicate" in warnings[0]["reason"]


def _nested(depth: int) -> list[Any]:
    """A list nested ``depth`` deep: deeper than JSON encoders and Python's recursion go."""
    outer: list[Any] = []
    inner = outer
    for _ in range(depth):
        inner.append([])
        inner = inner[0]
    return outer


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ([{"v": 2}], "reserved key 'v'"),
        ([{"crc": "x"}], "reserved key 'crc'"),
        ([{"ok": 1}, {"when": object()}], "record 1 is not JSON-serializable"),
        ([{1: "int key"}], "not JSON-serializable"),
        ([{"big": 2**70}], "not JSON-serializable"),
        (["not a mapping"], "record 0 must be a mapping"),
        ({"a": 1}, "sequence of records"),
        ([{"\x00lone-surrogates": "x"}], "reserved key"),
        ([{"s": "\ud800", "t": {"\x00lone-surrogates": "x"}}], "reserved key"),
        ([{"deep": _nested(3_000)}], "record 0 is not JSON-serializable"),
    ],
)
def test_bad_records_are_refused_whole(
    make_store: StoreFactory, records: Any, message: str
) -> None:
    """A batch with an unloggable record raises StoreError naming it, and logs nothing."""
    store = make_store()
    with pytest.raises(StoreError, match=message.replace("[", r"\[")):
        store.append_log(records)
    assert store.read_log() == []


def test_meta_round_trips_and_returns_copies(make_store: StoreFactory) -> None:
    """write_meta replaces the metadata; read_meta returns a fresh copy each time."""
    store = make_store()
    assert store.read_meta() == {}
    store.write_meta({"version": 1, "window": 200_000, "model": "claude", "ids": ["a"]})
    store.write_meta({"version": 2, "ids": ["b"]})
    meta = store.read_meta()
    assert meta == {"version": 2, "ids": ["b"]}
    meta["ids"].append("c")
    assert store.read_meta() == {"version": 2, "ids": ["b"]}


def test_meta_must_be_serializable(make_store: StoreFactory) -> None:
    """Unserializable metadata raises StoreError and leaves the previous metadata in place."""
    store = make_store()
    store.write_meta({"a": 1})
    with pytest.raises(StoreError):
        store.write_meta({"a": object()})
    with pytest.raises(StoreError):
        store.write_meta(["not", "a", "mapping"])  # type: ignore[arg-type]
    assert store.read_meta() == {"a": 1}


def test_closed_store_refuses_work_and_close_is_idempotent(make_store: StoreFactory) -> None:
    """After close every operation raises StoreError, and closing again is harmless."""
    store = make_store()
    ref = store.put("kept")
    store.close()
    store.close()
    calls: list[Callable[[], object]] = [
        lambda: store.put("x"),
        lambda: store.get(ref),
        lambda: store.has(ref),
        lambda: store.append_log([{"a": 1}]),
        store.read_log,
        store.read_meta,
        lambda: store.write_meta({}),
    ]
    for call in calls:
        with pytest.raises(StoreError, match="closed"):
            call()


def test_store_is_a_context_manager_and_a_store(make_store: StoreFactory) -> None:
    """Both stores satisfy the Store protocol and close when their with-block ends."""
    store = make_store()
    assert isinstance(store, Store)
    with store as same:
        assert same is store
        same.put("inside")
    with pytest.raises(StoreError):
        store.put("after")


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(text=st.text(alphabet=st.characters(exclude_categories=()), max_size=300))
def test_any_text_round_trips(make_store: StoreFactory, text: str) -> None:
    """Arbitrary text, surrogates included, comes back exactly under the ref of its content."""
    store = make_store(fsync=False)
    ref = store.put(text)
    assert ref == ref_for(text)
    assert store.get(ref) == text
    store.close()


def test_stores_compare_equal_on_the_same_inputs(tmp_path: Any) -> None:
    """LocalStore and MemoryStore give the same refs and the same log for the same inputs."""
    records = [{"call_id": f"toolu_{i}", "n": i, "text": "é\ud800" * i} for i in range(5)]
    with LocalStore(tmp_path / "s", fsync=False) as local, MemoryStore() as memory:
        for store in (local, memory):
            store.append_log(records[:3])
            store.append_log(records[2:])
        assert [local.put(t) for t in TEXTS] == [memory.put(t) for t in TEXTS]
        assert local.read_log() == memory.read_log() == records
