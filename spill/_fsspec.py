"""FsspecStore: a session on object storage (S3, GCS, Azure...) or any fsspec filesystem.

Layout under the session URL::

    <url>/session.json                 metadata, replaced by one PUT
    <url>/bodies/<ab>/<ref>.txt        spilled bodies by content hash (one PUT each)
    <url>/log/<seq:012d>.jsonl         the decision log: one object per append_log call
    <url>/log/<seq:012d>.snapshot      a roll-up of the log through <seq> (spill._objsnap)

Object stores give atomic whole-object PUTs and (S3 since 2024, GCS, Azure) a conditional
create, but no append and no lock. So the log is a sequence of immutable objects: each
``append_log`` creates the next sequence number with ``If-None-Match: *`` (fsspec's
``pipe_file(..., mode="create")``, which s3fs turns into that header). Two writers on one session
both aim at the same next number; the one that loses the race gets :class:`SessionLocked`, and
the store stays refused from then on (its view of the sequence is stale). On a filesystem without
an atomic conditional create, fsspec checks for the object and then writes it: a best effort,
racy between two writers; the local filesystem is better served by :class:`spill.LocalStore`.

A 412 on our own create can also mean a retried PUT whose first attempt landed: the existing
object is read back, and if it holds exactly our bytes the append succeeded.

Bodies are content-addressed: a PUT of the same ref writes the same bytes, so it is idempotent
and needs no condition; every read checks the content hash. A local read-through cache holds
bodies by ref (see :class:`FsspecStore`); it is content-addressed too, so it never goes stale
and a damaged entry is detected by its hash and fetched again.

A group commit (``put_many``) sends a request's bodies concurrently, one PUT each, and returns a
ref only once its PUT has been answered: S3 answers a PUT once the object is durable, so the
bodies are durable before the decisions that point to them are logged, and a process killed
between the two leaves bodies that nothing points to, never a decision without its body
(``tests/reliability/test_crash_s3.py``).

:class:`FsspecStore` holds one part per job: the session's objects (filesystem, names and
error mapping: :class:`spill._objfs.ObjectSession`), the log of objects
(:class:`spill._objlog.ObjectLog`), the read-through cache (:class:`spill._objcache.ReadCache`); the roll-up snapshots that keep a resume to one snapshot and
a few appends are :mod:`spill._objsnap`; removing idle sessions is :mod:`spill._objgc`. This module holds
the bodies (put, group commit, get, quota), the metadata, the mutex every call takes and whether
the store is closed.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, TypeVar

import xxhash

from spill._errors import ConfigError, QuotaExceeded, RefError, StoreError
from spill._fs import make_dirs
from spill._log import decode_log, encode_records
from spill._objcache import ReadCache
from spill._objfs import BODIES_NAME, LOG_DIR, META_NAME, ObjectSession, checked_url, filesystem
from spill._objgc import gc_url_sessions, ignore_skip
from spill._objlog import ObjectLog
from spill._sessiondir import decode_meta, encode_meta
from spill._store import (
    LogRecord,
    PutResult,
    StoreBase,
    check_quota,
    check_seconds,
    encode_text,
    events,
    validate_ref,
)

__all__ = ["FsspecStore"]

_R = TypeVar("_R")

DEFAULT_QUOTA_BYTES: Final = 1 << 30
_BODY_NAME_RE: Final = re.compile(r"\A([0-9a-f]{32})\.txt\Z")
_GROUP_THREADS: Final = 16
"""Most requests a group commit has in flight at once. An object PUT is one round trip that
mostly waits on the network (and on the store's own replication before its 200), so a batch's
bodies are sent concurrently rather than one after the other; 16 stays well under botocore's
connection pool (``max_pool_connections``, 10 by default in botocore, 100 as s3fs configures
aiobotocore) without queueing a whole large batch behind it."""


def _clock(now: object) -> float:
    """``now`` of a gc as a float time; ConfigError unless a number (an int past the largest
    float is infinitely late, as ``float("inf")``: float() alone raised OverflowError)."""
    if isinstance(now, bool) or not isinstance(now, int | float):
        raise ConfigError(f"now must be a number of seconds, got {now!r:.80}")
    try:
        return float(now)
    except OverflowError:
        return math.inf if now > 0 else -math.inf


def _private_local_root(objects: ObjectSession) -> None:
    """A local session's directory (``file://``) made 0700 if it is new, as a plain path's is
    (:mod:`spill._sessiondir`): fsspec makes an object's directories as the umask says (0755
    mostly), which would leave the spilled outputs readable by every user of the machine. An
    existing directory is left as it is; an object store has no directories to protect."""
    if "file" not in _protocols(objects.fs):
        return
    try:
        make_dirs(objects.root)
    except OSError as exc:
        raise StoreError(f"cannot create session directory {objects.root}: {exc}") from exc


def _protocols(fs: Any) -> tuple[str, ...]:
    protocol = getattr(fs, "protocol", ())
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


class FsspecStore(StoreBase):
    """A session at an fsspec URL: ``s3://bucket/sessions/abc``, ``gs://...``, ``memory://...``.

    ``FsspecStore(url, **storage_options)`` passes ``storage_options`` to the filesystem (for
    S3: ``endpoint_url``, ``key``, ``secret``, ``client_kwargs``...). For ``s3://`` URLs the
    store turns off s3fs's listing cache (the log is listed to resume, and another writer may
    have added to it) and, unless ``config_kwargs`` is given, asks botocore for its standard
    retry mode (5 attempts in all, with backoff) and finite timeouts; s3fs's own retry loop is
    set to one attempt, so a failure is retried by botocore alone and reported once as a
    :class:`StoreError`. Stores opened with the same options share one filesystem instance
    (fsspec's instance cache), hence one client.

    Args:
        url: the session's URL (a scheme is required).
        quota_bytes: the most bytes of bodies the session may hold (None: no limit). Counted by
            listing the bodies once, on the first put.
        cache_dir: a local directory for the read-through cache of bodies (created 0700).
            None: a private temporary directory, removed on close.
        storage_options: passed to the fsspec filesystem.
    """

    def __init__(
        self,
        url: str,
        *,
        quota_bytes: int | None = DEFAULT_QUOTA_BYTES,
        cache_dir: str | os.PathLike[str] | None = None,
        **storage_options: Any,
    ) -> None:
        url = checked_url(url, "FsspecStore")
        check_quota(quota_bytes)
        self._quota = quota_bytes
        self._mutex = threading.Lock()
        self._closed = True
        self._objects = ObjectSession(url, *filesystem(url, storage_options))
        _private_local_root(self._objects)
        # Listed before the cache is made: a missing bucket refuses the open and leaves nothing.
        self._log = ObjectLog(self._objects)
        self._cache = ReadCache(url, cache_dir)
        self._total: int | None = None
        self._closed = False
        events().debug("toolbudget.spill.opened", path=self._objects.url)

    # -- public API -----------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The session's URL."""
        return self._objects.url

    @property
    def bodies_bytes(self) -> int:
        """Total size of the stored bodies, as counted against the quota."""
        with self._mutex:
            self._check_open()
            return self._bodies_total()

    def put(self, text: str) -> str:
        """Store ``text`` once by content hash; return its ref once the PUT has succeeded.

        A body already stored under its ref (same size) is not sent again.
        """
        if not isinstance(text, str):
            raise StoreError(f"put takes a str body, got {type(text).__name__}")
        data = encode_text(text)
        ref = xxhash.xxh3_128_hexdigest(data)
        with self._mutex:
            self._check_open()
            old = self._objects.remote_size(self._objects.body_key(ref))
            if old == len(data):
                self._cache.put(ref, data)
                return ref
            self._reserve(ref, data, old)
            try:
                self._objects.call(
                    "write body " + self._objects.body_rel(ref),
                    self._objects.fs.pipe_file,
                    self._objects.body_key(ref),
                    data,
                )
            except StoreError:
                self._total = None  # the PUT may have landed before its reply was lost: recount
                raise
            self._cache.put(ref, data)
        return ref

    def put_many(self, texts: Sequence[str]) -> list[PutResult]:
        """Store several bodies as one group commit; for each, its ref or the StoreError it met.

        The bodies are looked up (one HEAD each) and the new ones sent (one PUT each) with up to
        ``_GROUP_THREADS`` requests in flight: each is retried by the client library as a lone
        ``put`` is. A ref is returned only once its PUT has been answered 200, so every returned
        ref is durable before the call returns, as after :meth:`put`; a body that fails (the
        quota, retries run out) gets its StoreError and the others go on. Raises StoreError for
        the whole call only when nothing can be tried: the store is closed, or a text is not a
        str.
        """
        if isinstance(texts, str | bytes) or not isinstance(texts, Sequence):
            raise StoreError(f"put_many takes a sequence of str bodies, got {type(texts).__name__}")
        datas: dict[str, bytes] = {}
        refs: list[str] = []
        for text in texts:
            if not isinstance(text, str):
                raise StoreError(f"put_many takes str bodies, got {type(text).__name__}")
            data = encode_text(text)
            ref = xxhash.xxh3_128_hexdigest(data)
            datas.setdefault(ref, data)
            refs.append(ref)
        errors: dict[str, StoreError] = {}
        with self._mutex:
            self._check_open()
            unique = list(datas)
            sizes = self._run_all([self._size_task(self._objects.body_key(ref)) for ref in unique])
            new: list[str] = []
            for ref, size in zip(unique, sizes, strict=True):
                data = datas[ref]
                if isinstance(size, StoreError):
                    errors[ref] = size
                elif size == len(data):
                    self._cache.put(ref, data)
                else:
                    try:
                        self._reserve(ref, data, size)
                    except StoreError as exc:
                        errors[ref] = exc
                        continue
                    new.append(ref)
            sent = self._run_all([self._put_task(ref, datas[ref]) for ref in new])
            for ref, error in zip(new, sent, strict=True):
                if error is None:
                    self._cache.put(ref, datas[ref])
                else:
                    errors[ref] = error
                    self._total = None  # it may have landed before its reply was lost: recount
        return [errors.get(ref, ref) for ref in refs]

    def _reserve(self, ref: str, data: bytes, old: int | None) -> None:
        """Count a new body against the quota (QuotaExceeded if it does not fit)."""
        new_total = self._bodies_total() - (old or 0) + len(data)
        if self._quota is not None and new_total > self._quota:
            raise QuotaExceeded(
                f"storing a body of {len(data)} bytes would bring session {self._objects.url} "
                f"to {new_total} bytes of bodies, above its quota of {self._quota} bytes"
            )
        self._total = new_total

    def _size_task(self, key: str) -> Callable[[], int | StoreError | None]:
        def task() -> int | StoreError | None:
            try:
                return self._objects.remote_size(key)
            except StoreError as exc:
                return exc

        return task

    def _put_task(self, ref: str, data: bytes) -> Callable[[], StoreError | None]:
        def task() -> StoreError | None:
            try:
                self._objects.call(
                    "write body " + self._objects.body_rel(ref),
                    self._objects.fs.pipe_file,
                    self._objects.body_key(ref),
                    data,
                )
            except StoreError as exc:
                return exc
            return None

        return task

    def _run_all(self, tasks: Sequence[Callable[[], _R]]) -> list[_R]:
        """Run the tasks, several at a time when there are several; results in order."""
        if len(tasks) <= 1:
            return [task() for task in tasks]
        with ThreadPoolExecutor(
            max_workers=min(_GROUP_THREADS, len(tasks)), thread_name_prefix="spill-fsspec"
        ) as pool:
            futures = [pool.submit(task) for task in tasks]
        return [future.result() for future in futures]

    def get(self, ref: str) -> str:
        """Return the exact text under ``ref``: from the local cache, else fetched and cached."""
        ref = validate_ref(ref)
        with self._mutex:
            self._check_open()
            data = self._cache.get(ref)
            if data is not None and not self._cache.held(ref):
                # The cache may be shared with other sessions: ask this one (issue 31).
                if self._objects.remote_size(self._objects.body_key(ref)) is None:
                    raise RefError(
                        f"no body is stored for ref {ref} in session {self._objects.url}"
                    )
                self._cache.hold(ref)
            if data is None:
                try:
                    data = bytes(self._objects.fs.cat_file(self._objects.body_key(ref)))
                except FileNotFoundError:
                    raise RefError(
                        f"no body is stored for ref {ref} in session {self._objects.url}"
                    ) from None
                except Exception as exc:
                    raise self._objects.store_error(
                        f"read body {self._objects.body_rel(ref)}", exc
                    ) from exc
                if xxhash.xxh3_128_hexdigest(data) != ref:
                    raise StoreError(
                        f"body {self._objects.body_rel(ref)} in session {self._objects.url} is corrupt: "
                        "its content does not match its ref"
                    )
                self._cache.put(ref, data, replace=True)
        return data.decode("utf-8", "surrogatepass")

    def has(self, ref: str) -> bool:
        """Whether a body is stored under ``ref``; RefError if ``ref`` is malformed."""
        ref = validate_ref(ref)
        with self._mutex:
            self._check_open()
            return self._objects.remote_size(self._objects.body_key(ref)) is not None

    def path_of(self, ref: str) -> None:
        """None: the bodies are objects, not local files (after checking ``ref``)."""
        validate_ref(ref)

    def append_log(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Create the next log object with these records (a conditional create; see module)."""
        payload = encode_records(records)
        if not payload:
            return
        with self._mutex:
            self._check_open()
            self._log.append(payload)

    def read_log(self) -> list[LogRecord]:
        """Every valid record in order: the newest valid snapshot and the log objects after it.

        A missing sequence number (an object deleted) is skipped with a warning, as is an
        object listed but gone on the last listing; a damaged snapshot is skipped with a
        warning for the one before it; damaged lines are skipped as in a local log. A read that
        fails after the client's retries raises StoreError: never a resume missing records.
        """
        with self._mutex:
            self._check_open()
            body = self._log.read()
        return decode_log(body, source=f"{self._objects.url}/{LOG_DIR}")

    def read_meta(self) -> dict[str, Any]:
        """The session metadata; ``{}`` if none was written."""
        with self._mutex:
            self._check_open()
            try:
                data = self._objects.fs.cat_file(self._objects.key(META_NAME))
            except FileNotFoundError:
                return {}
            except Exception as exc:
                raise self._objects.store_error(f"read {META_NAME}", exc) from exc
        return decode_meta(bytes(data), self._objects.url)

    def write_meta(self, meta: Mapping[str, Any]) -> None:
        """Replace the session metadata with one PUT (atomic on object stores)."""
        data = encode_meta(meta)
        with self._mutex:
            self._check_open()
            self._objects.call(
                f"write {META_NAME}", self._objects.fs.pipe_file, self._objects.key(META_NAME), data
            )

    def close(self) -> None:
        """Release the session (and remove a private cache directory); idempotent."""
        with self._mutex:
            if self._closed:
                return
            self._closed = True
            self._cache.remove()
        events().debug("toolbudget.spill.closed", path=self._objects.url)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"the store for session {self._objects.url} is closed")

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"FsspecStore({self._objects.url!r}, {state})"

    @staticmethod
    def gc_sessions(
        root: str,
        *,
        older_than_s: float,
        now: float | None = None,
        on_skip: Callable[[str, str], None] | None = None,
        **storage_options: Any,
    ) -> list[str]:
        """Remove the sessions under the URL ``root`` whose newest object is older than
        ``older_than_s`` seconds; return their URLs, in name order.

        :func:`spill.gc_sessions` for object storage: a prefix under ``root`` is a session if it
        holds ``session.json`` and only what a store writes (anything else is left alone, with
        a ``toolbudget.gc.skipped`` warning). Object stores have no lock that says a session is
        open, so age alone decides: choose ``older_than_s`` longer than any pause of a live
        agent. On a ``file://`` URL, a directory a LocalStore wrote is collected as
        :func:`spill.gc_sessions` collects it, its lock honoured. ``on_skip`` is called with each
        session left in place and why;
        ``storage_options`` go to the filesystem, as for the store.
        """
        age = check_seconds(older_than_s, "older_than_s")
        return gc_url_sessions(
            root,
            older_than_s=age,
            now=time.time() if now is None else _clock(now),
            on_skip=on_skip if on_skip is not None else ignore_skip,
            storage_options=storage_options,
        )

    # -- helpers --------------------------------------------------------------------------

    def _bodies_total(self) -> int:
        """Bytes of bodies, listed once on first need (resume does not pay for it)."""
        if self._total is None:
            try:
                found = self._objects.fs.find(self._objects.key(BODIES_NAME), detail=True)
            except FileNotFoundError:
                found = {}
            except Exception as exc:
                raise self._objects.store_error(f"list {BODIES_NAME}/", exc) from exc
            self._total = sum(
                int(info.get("size") or 0)
                for name, info in found.items()
                if _BODY_NAME_RE.match(str(name).rsplit("/", 1)[-1])
            )
        return self._total
