"""toolbudget's session store: spilled bodies by content hash, a checksummed decision log.

    from spill import LocalStore

    with LocalStore("sessions/abc") as store:
        ref = store.put(big_text)                 # durable before it returns
        store.append_log([{"call_id": "toolu_1", "decision": "spilled", "ref": ref}])
        assert store.get(ref) == big_text

:class:`Store` is the one interface the core uses; :class:`LocalStore` keeps a session in a
directory (locked while open), :class:`MemoryStore` keeps it in memory. Refs are 32 lowercase
hex characters (xxh3-128 of the UTF-8 text); :func:`validate_ref` is the only way a ref from a
model reaches the filesystem. :func:`gc_sessions` removes old, unused session directories.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spill._gc import gc_sessions
    from spill._local import DEFAULT_QUOTA_BYTES, LocalStore
    from spill._log import LOG_VERSION
    from spill._memory import MemoryStore
    from spill._store import REF_RE, LogRecord, Store, ref_for, validate_ref

__all__ = [
    "DEFAULT_QUOTA_BYTES",
    "LOG_VERSION",
    "REF_RE",
    "LocalStore",
    "LogRecord",
    "MemoryStore",
    "Store",
    "gc_sessions",
    "ref_for",
    "validate_ref",
]

# spill's modules need budget._errors, and budget's __init__ imports spill. So that importing
# either package (or any spill submodule) first works, the names here load on first use
# (PEP 562), and budget is imported at the very end of this module, before any spill submodule
# can start loading: budget's own `from spill import ...` then finds __getattr__ ready.
_WHERE: dict[str, str] = {
    "gc_sessions": "spill._gc",
    "DEFAULT_QUOTA_BYTES": "spill._local",
    "LocalStore": "spill._local",
    "LOG_VERSION": "spill._log",
    "MemoryStore": "spill._memory",
    "REF_RE": "spill._store",
    "LogRecord": "spill._store",
    "Store": "spill._store",
    "ref_for": "spill._store",
    "validate_ref": "spill._store",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'spill' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])


import budget  # noqa: E402, F401  (must come after __getattr__; see the comment above _WHERE)
