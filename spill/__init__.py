"""toolbudget's session store: spilled bodies by content hash, a checksummed decision log.

    from spill import LocalStore

    with LocalStore("sessions/abc") as store:
        ref = store.put(big_text)                 # durable before it returns
        store.append_log([{"call_id": "toolu_1", "decision": "spilled", "ref": ref}])
        assert store.get(ref) == big_text

:class:`Store` is the one interface the core uses; :class:`LocalStore` keeps a session in a
directory (locked while open), :class:`MemoryStore` keeps it in memory, :class:`FsspecStore`
keeps it on object storage or any fsspec filesystem (``s3://bucket/sessions/abc``; extra
``toolbudget[s3]``). Refs are 32 lowercase
hex characters (xxh3-128 of the UTF-8 text); :func:`validate_ref` is the only way a ref from a
model reaches the filesystem. :func:`gc_sessions` removes old, unused session directories.
"""

from __future__ import annotations

from spill._fsspec import FsspecStore
from spill._gc import gc_sessions
from spill._local import DEFAULT_QUOTA_BYTES, LocalStore
from spill._log import LOG_VERSION
from spill._memory import MemoryStore
from spill._store import REF_RE, LogRecord, Store, ref_for, validate_ref

__all__ = [
    "DEFAULT_QUOTA_BYTES",
    "LOG_VERSION",
    "REF_RE",
    "FsspecStore",
    "LocalStore",
    "LogRecord",
    "MemoryStore",
    "Store",
    "gc_sessions",
    "ref_for",
    "validate_ref",
]
