"""An fsspec session's roll-up snapshots: the log so far in one checksummed object.

Resuming from object storage costs a round trip per object read, and the log is one object
per append: 10,000 decisions written one request at a time took 427 s to resume from the
loopback S3 before issue 31. So the writer, every :data:`ROLLUP_OBJECTS` appends, writes one
object holding the bytes of every log object so far, and a resume reads that snapshot and only
the appends after it (:mod:`spill._objlog`).

A snapshot is ``log/<through:012d>.snapshot``: a header line, then the log's bytes through
sequence number ``through`` exactly as a full read would join them (each object's bytes, a
newline closing each), so decoding snapshot and tail gives the very records, warnings and
duplicate skips a full read gives::

    {"bytes":1234,"snapshot":1,"through":31,"xxh3":"<128-bit hex of the bytes>"}
    ...the log's lines...

Its content is a function of immutable objects, so two writes of one snapshot (a retried PUT,
a stale writer) write the same bytes; it is created conditionally (``If-None-Match: *``) and
never replaced. A snapshot whose header, size or checksum does not match (torn by a
non-atomic filesystem, damaged) is ignored with a warning: the reader takes the snapshot
before it and the appends after that one, which are kept until a newer snapshot supersedes it.
"""

from __future__ import annotations

import re
from typing import Final

import orjson
import xxhash

__all__ = ["ROLLUP_OBJECTS", "SNAPSHOT_RE", "encode_snapshot", "parse_snapshot"]

ROLLUP_OBJECTS: Final = 32
"""Appends between two snapshots: a resume reads at most this many objects beside its snapshot.

Why 32: a resume's tail is fetched concurrently, and 32 objects are a few rounds of botocore's
default connection pool (``max_pool_connections`` 10, botocore docs, "Config"), so a resume
costs a handful of round trips whatever the session's age (10-30 ms each on AWS S3, AWS's
"Best practices design patterns: optimizing Amazon S3 performance"); while the writer's extra
traffic, one snapshot of the whole log per 32 appends, stays 1/32 of the log's size per append.
"""

SNAPSHOT_VERSION: Final = 1
SNAPSHOT_SUFFIX: Final = ".snapshot"
SNAPSHOT_RE: Final = re.compile(r"\A([0-9]{12})\.snapshot\Z")


def encode_snapshot(through: int, body: bytes) -> bytes:
    """The snapshot object of the log bytes ``body``, which end at sequence number ``through``."""
    header = {
        "bytes": len(body),
        "snapshot": SNAPSHOT_VERSION,
        "through": through,
        "xxh3": xxhash.xxh3_128_hexdigest(body),
    }
    return orjson.dumps(header, option=orjson.OPT_SORT_KEYS) + b"\n" + body


def parse_snapshot(data: bytes, through: int) -> bytes | str:
    """The log bytes of a snapshot named for ``through``, or why it is not a valid one."""
    end = data.find(b"\n")
    if end < 0:
        return "no header line (torn)"
    try:
        header = orjson.loads(data[:end])
    except orjson.JSONDecodeError:
        return "header is not JSON (damaged)"
    if not isinstance(header, dict) or header.get("snapshot") != SNAPSHOT_VERSION:
        return "not a snapshot of a known version"
    if header.get("through") != through:
        return f"header says through {header.get('through')!r}, its name {through}"
    body = data[end + 1 :]
    if header.get("bytes") != len(body):
        return f"holds {len(body)} bytes, its header {header.get('bytes')!r} (torn)"
    if header.get("xxh3") != xxhash.xxh3_128_hexdigest(body):
        return "checksum mismatch (damaged)"
    return body
