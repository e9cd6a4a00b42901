"""The decision log's line format: checksummed JSONL, shared by every store.

One record per line. A line is the caller's record plus ``"v": 1`` serialized by orjson with
sorted keys, with ``"crc"`` (xxh32 hex of exactly those bytes) appended as the last member::

    {"call_id":"toolu_1","decision":"spilled","v":1,"crc":"1a2b3c4d"}

Appending ``crc`` last (instead of re-sorting) lets a reader verify a line by hashing a slice of
it, without serializing the record again; lines whose ``crc`` is elsewhere are still accepted if
the checksum matches the sorted serialization, which is the definition.

orjson refuses strings holding lone surrogates, which tool output can contain and which must be
restored exactly. Such a string is written as a one-member object ``{"\\u0000lone-surrogates":
<the string as an ASCII JSON literal>}`` and turned back into the string when read; records that
happen to use that key themselves are refused, so the encoding stays unambiguous.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson
import xxhash

from spill._errors import StoreError
from spill._store import events

__all__ = ["LOG_VERSION", "decode_log", "encode_records"]

LOG_VERSION: Final = 1
_RESERVED: Final = ("v", "crc")
_SORTED: Final = orjson.OPT_SORT_KEYS
_SURROGATE_KEY: Final = "\x00lone-surrogates"
_SURROGATE_KEY_JSON: Final = b'"\\u0000lone-surrogates"'
# `,"crc":"` + 8 hex digits + `"}` closes every line this module writes.
_CRC_OPEN: Final = b',"crc":"'
_CRC_TAIL_LEN: Final = 18


def encode_records(records: Sequence[Mapping[str, Any]]) -> bytes:
    """Serialize ``records`` as log lines (each ending in a newline), ready for one write()."""
    # Exact built-in types first: an isinstance check against the Mapping ABC costs about ten
    # times more, and a request logs a few records on the request path.
    if type(records) is not list and isinstance(records, Mapping | str | bytes):
        raise StoreError(
            f"append_log takes a sequence of records, got a single {type(records).__name__}"
        )
    return b"".join([_encode_record(record, index) for index, record in enumerate(records)])


def _encode_record(record: Mapping[str, Any], index: int) -> bytes:
    if type(record) is not dict and not isinstance(record, Mapping):
        raise StoreError(f"log record {index} must be a mapping, got {type(record).__name__}")
    body: dict[Any, Any] = dict(record)
    for key in _RESERVED:
        if key in body:
            raise StoreError(f"log record {index} uses the reserved key {key!r}")
    body["v"] = LOG_VERSION
    try:
        payload = orjson.dumps(body, option=_SORTED)
    except TypeError as exc:
        try:
            tagged = _tag_surrogates(body, index)
        except RecursionError:
            # orjson gave up at its own depth limit; the walk looking for lone surrogates
            # recursed past Python's: the record is as unloggable either way.
            tagged = body
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


def _tag_surrogates(value: Any, index: int) -> Any:
    """Return ``value`` with lone-surrogate strings tagged; the same object if nothing changed."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return {_SURROGATE_KEY: json.dumps(value, ensure_ascii=True)}
        return value
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        changed = False
        for key, item in value.items():
            if isinstance(key, str):
                if key == _SURROGATE_KEY:
                    raise StoreError(f"log record {index} uses the reserved key {key!r}")
                try:
                    key.encode("utf-8")
                except UnicodeEncodeError:
                    raise StoreError(
                        f"log record {index} has a key with lone surrogates; only values may"
                    ) from None
            new = _tag_surrogates(item, index)
            changed = changed or new is not item
            out[key] = new
        return out if changed else value
    if isinstance(value, list | tuple):
        items = [_tag_surrogates(item, index) for item in value]
        if any(new is not old for new, old in zip(items, value, strict=True)):
            return items
        return value
    return value


def _untag_surrogates(value: Any) -> Any:
    if isinstance(value, dict):
        if len(value) == 1 and _SURROGATE_KEY in value:
            text = json.loads(value[_SURROGATE_KEY])
            if not isinstance(text, str):
                raise ValueError("a tagged lone-surrogate string did not decode to a string")
            return text
        return {key: _untag_surrogates(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_untag_surrogates(item) for item in value]
    return value


def _check_line(line: bytes) -> tuple[dict[str, Any], str] | str:
    """Decode a line not in our own layout (or damaged): (record, its crc), or why not."""
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return "not valid JSON"
    if not isinstance(record, dict):
        return "not a JSON object"
    version = record.get("v")
    if type(version) is not int or version != LOG_VERSION:
        return f"unknown version v={version!r}" if "v" in record else "missing version"
    crc = record.pop("crc", None)
    if not isinstance(crc, str):
        return "missing checksum"
    if xxhash.xxh32_hexdigest(orjson.dumps(record, option=_SORTED)) != crc:
        return "checksum mismatch"
    del record["v"]
    return _unwrap(record, crc) if _SURROGATE_KEY_JSON in line else (record, crc)


def decode_log(data: bytes, *, source: str) -> list[dict[str, Any]]:
    """Return the valid records of a log's bytes, in order, warning about every skipped line.

    Skipped: unparsable or torn lines, lines whose checksum does not match, records of an
    unknown version, and lines identical to an earlier valid line. A last line without a
    newline is kept if it is complete and its checksum matches: the next append terminates it,
    and it must not change from skipped to kept between two reads.

    Resume speed (docs/performance.md): a log that is whole, as nearly every log is, is decoded by
    :func:`_decode_whole` in a few C-speed passes over all its lines; anything unusual in it
    sends the whole log through the line-by-line path, which names every line it skips.
    """
    whole = _decode_whole(data)
    if whole is not None:
        return whole
    return _decode_lines(data, source=source)


def _decode_whole(data: bytes) -> list[dict[str, Any]] | None:
    """The records of a log whose every line is in this module's own layout and valid; else None.

    The same checks as the hot path of :func:`_decode_lines`, made for all lines at once with
    comprehensions and ``map`` instead of one Python-level step per check per line: each line
    parses on its own as an object, ends in ``,"crc":"<8 hex>"}``, and those 8 digits are both
    the xxh32 of the line without that member and the ``crc`` it parses to; ``v`` is exactly
    the int 1; no two lines share a checksum (so none duplicates another); no string is a
    tagged lone-surrogate one. None as soon as one check fails anywhere: the caller decodes the
    log line by line then, and says which lines it skipped and why.
    """
    if _SURROGATE_KEY_JSON in data:
        return None
    lines = data.split(b"\n")
    if not lines[-1]:
        lines.pop()  # the newline closing the last line (or an empty log)
    n = len(lines)
    try:
        records = list(map(orjson.loads, lines))
    except orjson.JSONDecodeError:
        return None
    if n and set(map(type, records)) != {dict}:
        return None
    crc32 = xxhash.xxh32_hexdigest
    crcs = [crc32(line[:-_CRC_TAIL_LEN] + b"}") for line in lines]
    if len(set(crcs)) != n:
        return None  # a duplicated line (or a collision): told apart line by line
    # Every line's last 18 bytes, joined, against the 18 bytes each should end in, joined: a
    # shorter line makes the lengths differ, so equal means equal line by line.
    tails = b"".join([line[-_CRC_TAIL_LEN:] for line in lines])
    expected = ',"crc":"' + '"},"crc":"'.join(crcs) + '"}'
    if n and tails != expected.encode():
        return None
    if [record.pop("crc", None) for record in records] != crcs:
        return None
    versions = [record.pop("v", None) for record in records]
    if versions.count(LOG_VERSION) != n or (n and set(map(type, versions)) != {int}):
        return None
    return records


def _decode_lines(data: bytes, *, source: str) -> list[dict[str, Any]]:
    """:func:`decode_log` one line at a time: skips damaged lines with a warning naming each.

    A line in this module's own layout is verified with one xxh32 call and parsed once,
    straight from ``data``; only other lines take the general (re-serializing) path.
    """
    view = memoryview(data)
    size = len(data)
    has_tagged = _SURROGATE_KEY_JSON in data
    find = data.find
    startswith = data.startswith
    loads = orjson.loads
    crc32 = xxhash.xxh32_hexdigest
    records: list[dict[str, Any]] = []
    append = records.append
    # crc -> offset of the first valid line with it; lines are compared in full only when two
    # share a crc, so finding duplicates stays linear in the size of the log.
    seen: dict[str, int] = {}
    collided: set[bytes] = set()
    number = 0
    start = 0
    while start < size:
        line_start = start
        end = find(b"\n", start)
        torn = end < 0
        if torn:
            end = size
        start = end + 1
        number += 1
        checked: tuple[dict[str, Any], str] | str | None = None
        # The hot path, kept inline: our own layout, checksum verified, one parse.
        if (
            end - line_start > _CRC_TAIL_LEN
            and startswith(_CRC_OPEN, end - _CRC_TAIL_LEN)
            and startswith(b'"}', end - 2)
        ):
            crc = crc32(data[line_start : end - _CRC_TAIL_LEN] + b"}")
            if startswith(crc.encode(), end - 10):
                try:
                    record = loads(view[line_start:end])
                except orjson.JSONDecodeError:  # damaged, yet matching its crc by chance
                    record = None
                if type(record) is dict:
                    version = record.pop("v", None)
                    if version == LOG_VERSION and type(version) is int:
                        del record["crc"]
                        checked = _unwrap(record, crc) if has_tagged else (record, crc)
        if checked is None:
            checked = _check_line(data[line_start:end]) if end > line_start else "empty line"
        if type(checked) is tuple:
            record, crc = checked
            first = seen.setdefault(crc, line_start)
            if first == line_start:
                append(record)
                continue
            line = data[line_start:end]
            first_end = find(b"\n", first)
            first_line = data[first : first_end if first_end >= 0 else size]
            if line != first_line and line not in collided:
                collided.add(line)
                append(record)
                continue
            checked = "duplicate of an earlier record"
        reason = str(checked)
        if torn:
            reason += " (torn last line: no final newline)"
        events().warning("toolbudget.log.line_skipped", source=source, line=number, reason=reason)
    return records


def _unwrap(record: dict[str, Any], crc: str) -> tuple[dict[str, Any], str] | str:
    """Restore the tagged lone-surrogate strings of a verified record (``v``/``crc`` removed)."""
    try:
        return _untag_surrogates(record), crc
    except ValueError as exc:
        return f"bad lone-surrogate string: {exc}"
