"""The log line encoder with its fast paths for plain lists and dicts writes the bytes, and
refuses the records, that the encoder before them did (kept here as it was)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import orjson
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from spill._errors import StoreError
from spill._log import (
    _RESERVED,
    _SORTED,
    _SURROGATE_KEY,
    _SURROGATE_KEY_JSON,
    LOG_VERSION,
    _tag_surrogates,
    encode_records,
)
from tests._lanes import examples


def _old_encode_records(records: Sequence[Mapping[str, Any]]) -> bytes:
    if isinstance(records, Mapping | str | bytes):
        raise StoreError(
            f"append_log takes a sequence of records, got a single {type(records).__name__}"
        )
    return b"".join(_old_encode_record(record, index) for index, record in enumerate(records))


def _old_encode_record(record: Mapping[str, Any], index: int) -> bytes:
    if not isinstance(record, Mapping):
        raise StoreError(f"log record {index} must be a mapping, got {type(record).__name__}")
    body: dict[Any, Any] = dict(record)
    for key in _RESERVED:
        if key in body:
            raise StoreError(f"log record {index} uses the reserved key {key!r}")
    body["v"] = LOG_VERSION
    try:
        payload = orjson.dumps(body, option=_SORTED)
    except TypeError as exc:
        tagged = _tag_surrogates(body, index)
        if tagged is body:
            raise StoreError(f"log record {index} is not JSON-serializable: {exc}") from exc
        try:
            payload = orjson.dumps(tagged, option=_SORTED)
        except TypeError as exc2:
            raise StoreError(f"log record {index} is not JSON-serializable: {exc2}") from exc2
    else:
        if _SURROGATE_KEY_JSON in payload:
            raise StoreError(f"log record {index} uses the reserved key {_SURROGATE_KEY!r}")
    crc = xxhash.xxh32_hexdigest(payload)
    return b'%s,"crc":"%s"}\n' % (payload[:-1], crc.encode("ascii"))


_KEYS = st.one_of(st.sampled_from(["t", "id", "text", "v", "crc", _SURROGATE_KEY]), st.text())
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text() | st.just("\ud800 lone") | st.just({1}),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=8,
)
_RECORD = st.dictionaries(_KEYS, _VALUES, max_size=5)
_RECORDS = st.one_of(
    st.lists(st.one_of(_RECORD, _RECORD.map(MappingProxyType), st.integers()), max_size=4),
    st.lists(_RECORD, max_size=3).map(tuple),
    _RECORD,
    st.text(max_size=3),
)


def _outcome(encode: Any, records: Any) -> bytes | str:
    try:
        out: bytes = encode(records)
    except StoreError as exc:
        return f"StoreError: {exc}"
    return out


@settings(max_examples=examples(500), deadline=None)
@given(_RECORDS)
def test_the_encoder_writes_and_refuses_as_before(records: Any) -> None:
    """Lists, tuples, mapping proxies, single records, lone surrogates and reserved or
    unserializable values: the same bytes, or the same refusal, as the encoder before."""
    assert _outcome(encode_records, records) == _outcome(_old_encode_records, records)
