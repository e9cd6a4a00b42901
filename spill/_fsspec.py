"""FsspecStore: a session on object storage (S3, GCS, Azure...) or any fsspec filesystem.

Layout under the session URL::

    <url>/session.json                 metadata, replaced by one PUT
    <url>/bodies/<ab>/<ref>.txt        spilled bodies by content hash (one PUT each)
    <url>/log/<seq:012d>.jsonl         the decision log: one object per append_log call

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
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, TypeVar

import xxhash

from spill._errors import ConfigError, QuotaExceeded, RefError, SessionLocked, StoreError
from spill._log import decode_log, encode_records
from spill._sessiondir import decode_meta, encode_meta
from spill._store import (
    LogRecord,
    PutResult,
    StoreBase,
    check_quota,
    encode_text,
    events,
    validate_ref,
)

__all__ = ["FsspecStore"]

_R = TypeVar("_R")

DEFAULT_QUOTA_BYTES: Final = 1 << 30
META_NAME: Final = "session.json"
BODIES_NAME: Final = "bodies"
LOG_DIR: Final = "log"
LOG_SUFFIX: Final = ".jsonl"
SEQ_DIGITS: Final = 12
BODY_SUFFIX: Final = ".txt"
_LOG_NAME_RE: Final = re.compile(r"\A([0-9]{12})\.jsonl\Z")
_BODY_NAME_RE: Final = re.compile(r"\A([0-9a-f]{32})\.txt\Z")
_URL_RE: Final = re.compile(r"\A[A-Za-z][A-Za-z0-9+.-]*://")
# botocore's "standard" retry mode: exponential backoff with jitter, retrying throttling
# (503 SlowDown), 5xx and connection/read timeouts (botocore docs, "Retries"; botocore 1.43).
# ``total_max_attempts`` counts the first request; Config's ``max_attempts`` counts retries only.
# 5 in all rather than standard mode's default of 3: a spill that gives up keeps its text inline.
_S3_RETRIES: Final = {"mode": "standard", "total_max_attempts": 5}
_S3_TIMEOUTS: Final = {"connect_timeout": 5, "read_timeout": 30}
_GROUP_THREADS: Final = 16
"""Most requests a group commit has in flight at once. An object PUT is one round trip that
mostly waits on the network (and on the store's own replication before its 200), so a batch's
bodies are sent concurrently rather than one after the other; 16 stays well under botocore's
connection pool (``max_pool_connections``, 10 by default in botocore, 100 as s3fs configures
aiobotocore) without queueing a whole large batch behind it."""


def _import_fsspec() -> Any:
    try:
        import fsspec  # noqa: PLC0415 - optional dependency: the s3 extra
    except ImportError as exc:
        raise ConfigError(
            "FsspecStore needs fsspec (and s3fs for s3:// URLs): pip install 'toolbudget[s3]'"
        ) from exc
    return fsspec


@functools.cache
def _s3_class() -> type[Any]:
    """s3fs's filesystem with s3fs's own retry loop at one attempt.

    botocore retries with backoff (``_S3_RETRIES``); s3fs's loop (``S3FileSystem.retries``, 5,
    s3fs 2026.9 ``s3fs/core.py``) would repeat each of botocore's attempts five times. A
    subclass rather than an attribute set on an instance: fsspec caches instances by class and
    options, so stores opened with the same options share one client (creating an aiobotocore
    client costs far more than a request) and another user of s3fs is not changed.
    """
    try:
        import s3fs  # noqa: PLC0415 - optional dependency: the s3 extra
    except ImportError as exc:
        raise ConfigError(
            f"no fsspec filesystem for s3:// is installed ({exc}): pip install 'toolbudget[s3]'"
        ) from exc

    class RetriedByBotocore(s3fs.S3FileSystem):  # type: ignore[misc]
        retries = 1

    return RetriedByBotocore


def _filesystem(url: str, storage_options: Mapping[str, Any]) -> tuple[Any, str]:
    """The fsspec filesystem for ``url`` and the path of ``url`` in it (no trailing slash).

    For ``s3://`` URLs s3fs's listing cache is off (the log is listed to resume, and another
    writer may have added to it) and, unless ``config_kwargs`` is given, botocore's standard
    retry mode and finite timeouts are asked for (see :func:`_s3_class`).
    """
    fsspec = _import_fsspec()
    options = dict(storage_options)
    protocol = url.split("://", 1)[0].lower()
    try:
        if protocol in ("s3", "s3a"):
            options.setdefault("use_listings_cache", False)
            options.setdefault("config_kwargs", {"retries": _S3_RETRIES, **_S3_TIMEOUTS})
            cls = _s3_class()
            fs, root = cls(**options), cls._strip_protocol(url)
        else:
            fs, root = fsspec.core.url_to_fs(url, **options)
    except ImportError as exc:
        raise ConfigError(
            f"no fsspec filesystem for {protocol}:// is installed ({exc}); for S3: "
            "pip install 'toolbudget[s3]'"
        ) from exc
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"cannot open {url}: {exc}") from exc
    return fs, str(root).rstrip("/")


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
        if not isinstance(url, str) or not _URL_RE.match(url):
            raise ConfigError(f"FsspecStore needs a URL with a scheme (s3://...), got {url!r}")
        check_quota(quota_bytes)
        self._url = url.rstrip("/")
        self._quota = quota_bytes
        self._mutex = threading.Lock()
        self._closed = True
        self._locked_out = False
        self._fs, self._root = _filesystem(self._url, storage_options)
        self._own_cache = cache_dir is None
        self._cache = (
            tempfile.mkdtemp(prefix="toolbudget-cache-")
            if cache_dir is None
            else os.path.abspath(os.fspath(cache_dir))
        )
        os.makedirs(self._cache, mode=0o700, exist_ok=True)
        self._total: int | None = None
        self._next_seq = self._scan_log_names()[1]
        self._closed = False
        events().debug("toolbudget.spill.opened", path=self._url)

    # -- public API -----------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The session's URL."""
        return self._url

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
            old = self._remote_size(self._body_key(ref))
            if old == len(data):
                self._cache_put(ref, data)
                return ref
            self._reserve(ref, data, old)
            try:
                self._call(
                    "write body " + self._body_rel(ref),
                    self._fs.pipe_file,
                    self._body_key(ref),
                    data,
                )
            except StoreError:
                self._total = None  # the PUT may have landed before its reply was lost: recount
                raise
            self._cache_put(ref, data)
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
            sizes = self._run_all([self._size_task(self._body_key(ref)) for ref in unique])
            new: list[str] = []
            for ref, size in zip(unique, sizes, strict=True):
                data = datas[ref]
                if isinstance(size, StoreError):
                    errors[ref] = size
                elif size == len(data):
                    self._cache_put(ref, data)
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
                    self._cache_put(ref, datas[ref])
                else:
                    errors[ref] = error
                    self._total = None  # it may have landed before its reply was lost: recount
        return [errors.get(ref, ref) for ref in refs]

    def _reserve(self, ref: str, data: bytes, old: int | None) -> None:
        """Count a new body against the quota (QuotaExceeded if it does not fit)."""
        new_total = self._bodies_total() - (old or 0) + len(data)
        if self._quota is not None and new_total > self._quota:
            raise QuotaExceeded(
                f"storing a body of {len(data)} bytes would bring session {self._url} "
                f"to {new_total} bytes of bodies, above its quota of {self._quota} bytes"
            )
        self._total = new_total

    def _size_task(self, key: str) -> Callable[[], int | StoreError | None]:
        def task() -> int | StoreError | None:
            try:
                return self._remote_size(key)
            except StoreError as exc:
                return exc

        return task

    def _put_task(self, ref: str, data: bytes) -> Callable[[], StoreError | None]:
        def task() -> StoreError | None:
            try:
                self._call(
                    "write body " + self._body_rel(ref),
                    self._fs.pipe_file,
                    self._body_key(ref),
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
            data = self._cache_get(ref)
            if data is None:
                try:
                    data = bytes(self._fs.cat_file(self._body_key(ref)))
                except FileNotFoundError:
                    raise RefError(
                        f"no body is stored for ref {ref} in session {self._url}"
                    ) from None
                except Exception as exc:
                    raise self._error(f"read body {self._body_rel(ref)}", exc) from exc
                if xxhash.xxh3_128_hexdigest(data) != ref:
                    raise StoreError(
                        f"body {self._body_rel(ref)} in session {self._url} is corrupt: "
                        "its content does not match its ref"
                    )
                self._cache_put(ref, data, replace=True)
        return data.decode("utf-8", "surrogatepass")

    def has(self, ref: str) -> bool:
        """Whether a body is stored under ``ref``; RefError if ``ref`` is malformed."""
        ref = validate_ref(ref)
        with self._mutex:
            self._check_open()
            return self._remote_size(self._body_key(ref)) is not None

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
            if self._locked_out:
                raise self._locked(self._next_seq)
            seq = self._next_seq
            key = self._log_key(seq)
            try:
                self._fs.pipe_file(key, payload, mode="create")
            except FileExistsError:
                if self._existing(key) != payload:
                    self._locked_out = True
                    raise self._locked(seq) from None
                # Our own PUT landed and a retry of it found it there.
            except Exception as exc:
                raise self._error(f"create log object {self._log_rel(seq)}", exc) from exc
            self._next_seq = seq + 1

    def read_log(self) -> list[LogRecord]:
        """Every valid record in order: the log objects listed, fetched and read in sequence.

        A missing sequence number (an object deleted, or a writer that died between choosing
        the number and its PUT) and an unreadable object are skipped with a warning; damaged
        lines inside an object are skipped as in a local log.
        """
        with self._mutex:
            self._check_open()
            seqs, _ = self._scan_log_names()
            keys = [self._log_key(seq) for seq in seqs]
            try:
                fetched = self._fs.cat(keys, on_error="return") if keys else {}
            except Exception as exc:
                raise self._error("read the log objects", exc) from exc
        parts: list[bytes] = []
        expected = 0
        for seq, key in zip(seqs, keys, strict=True):
            if seq != expected:
                events().warning(
                    "toolbudget.log.object_missing",
                    source=self._url,
                    first=self._log_rel(expected),
                    count=seq - expected,
                )
            expected = seq + 1
            data = fetched.get(key, fetched.get(self._fs.unstrip_protocol(key)))
            if not isinstance(data, bytes | bytearray):
                events().warning(
                    "toolbudget.log.object_skipped",
                    source=self._url,
                    object=self._log_rel(seq),
                    reason=str(data) if data is not None else "not returned",
                )
                continue
            parts.append(bytes(data) if data.endswith(b"\n") else bytes(data) + b"\n")
        return decode_log(b"".join(parts), source=f"{self._url}/{LOG_DIR}")

    def read_meta(self) -> dict[str, Any]:
        """The session metadata; ``{}`` if none was written."""
        with self._mutex:
            self._check_open()
            try:
                data = self._fs.cat_file(self._key(META_NAME))
            except FileNotFoundError:
                return {}
            except Exception as exc:
                raise self._error(f"read {META_NAME}", exc) from exc
        return decode_meta(bytes(data), self._url)

    def write_meta(self, meta: Mapping[str, Any]) -> None:
        """Replace the session metadata with one PUT (atomic on object stores)."""
        data = encode_meta(meta)
        with self._mutex:
            self._check_open()
            self._call(f"write {META_NAME}", self._fs.pipe_file, self._key(META_NAME), data)

    def close(self) -> None:
        """Release the session (and remove a private cache directory); idempotent."""
        with self._mutex:
            if self._closed:
                return
            self._closed = True
            if self._own_cache:
                shutil.rmtree(self._cache, ignore_errors=True)
        events().debug("toolbudget.spill.closed", path=self._url)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"FsspecStore({self._url!r}, {state})"

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
        agent. ``on_skip`` is called with each session left in place and why;
        ``storage_options`` go to the filesystem, as for the store.
        """
        if isinstance(older_than_s, bool) or not isinstance(older_than_s, int | float):
            raise ConfigError(f"older_than_s must be a number of seconds, got {older_than_s!r}")
        if not older_than_s >= 0:
            raise ConfigError(f"older_than_s must be >= 0 seconds, got {older_than_s!r}")
        return _gc_url_sessions(
            root,
            older_than_s=float(older_than_s),
            now=time.time() if now is None else float(now),
            on_skip=on_skip if on_skip is not None else _ignore,
            storage_options=storage_options,
        )

    # -- helpers --------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"the store for session {self._url} is closed")

    def _key(self, rel: str) -> str:
        return f"{self._root}/{rel}"

    def _body_rel(self, ref: str) -> str:
        return f"{BODIES_NAME}/{ref[:2]}/{ref}{BODY_SUFFIX}"

    def _body_key(self, ref: str) -> str:
        return self._key(self._body_rel(ref))

    def _log_rel(self, seq: int) -> str:
        return f"{LOG_DIR}/{seq:0{SEQ_DIGITS}d}{LOG_SUFFIX}"

    def _log_key(self, seq: int) -> str:
        return self._key(self._log_rel(seq))

    def _locked(self, seq: int) -> SessionLocked:
        return SessionLocked(
            f"session {self._url} has another writer: log object {self._log_rel(seq)} was "
            "created by it first. A session can be written from one place at a time; reopen "
            "the session to continue from what the other writer logged."
        )

    def _scan_log_names(self) -> tuple[list[int], int]:
        """The sequence numbers present in log/, sorted, and the next one to create."""
        try:
            names = self._fs.ls(self._key(LOG_DIR), detail=False)
        except FileNotFoundError:
            return [], 0
        except Exception as exc:
            raise self._error(f"list {LOG_DIR}/", exc) from exc
        seqs = sorted(
            int(match.group(1))
            for name in names
            if (match := _LOG_NAME_RE.match(str(name).rstrip("/").rsplit("/", 1)[-1]))
        )
        return seqs, (seqs[-1] + 1 if seqs else 0)

    def _existing(self, key: str) -> bytes | None:
        try:
            return bytes(self._fs.cat_file(key))
        except FileNotFoundError:
            return None
        except Exception as exc:
            raise self._error(f"read {key}", exc) from exc

    def _remote_size(self, key: str) -> int | None:
        try:
            info = self._fs.info(key)
        except FileNotFoundError:
            return None
        except Exception as exc:
            raise self._error(f"inspect {key}", exc) from exc
        size = info.get("size")
        return int(size) if isinstance(size, int) else None

    def _bodies_total(self) -> int:
        """Bytes of bodies, listed once on first need (resume does not pay for it)."""
        if self._total is None:
            try:
                found = self._fs.find(self._key(BODIES_NAME), detail=True)
            except FileNotFoundError:
                found = {}
            except Exception as exc:
                raise self._error(f"list {BODIES_NAME}/", exc) from exc
            self._total = sum(
                int(info.get("size") or 0)
                for name, info in found.items()
                if _BODY_NAME_RE.match(str(name).rsplit("/", 1)[-1])
            )
        return self._total

    def _cache_path(self, ref: str) -> str:
        return os.path.join(self._cache, ref + BODY_SUFFIX)

    def _cache_get(self, ref: str) -> bytes | None:
        try:
            with open(self._cache_path(ref), "rb") as f:
                data = f.read()
        except OSError:
            return None
        if xxhash.xxh3_128_hexdigest(data) != ref:
            events().warning("toolbudget.spill.cache_corrupt", path=self._url, ref=ref)
            return None
        return data

    def _cache_put(self, ref: str, data: bytes, *, replace: bool = False) -> None:
        """Best effort: a cache that cannot be written only costs a fetch later.

        ``replace``: after a fetch, which happens only when the entry is absent or damaged.
        """
        path = self._cache_path(ref)
        if not replace and os.path.exists(path):
            return
        tmp = f"{path}.tmp-{secrets.token_hex(6)}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except OSError as exc:
            events().warning(
                "toolbudget.spill.cache_write_failed", path=self._url, ref=ref, error=str(exc)
            )
            with contextlib.suppress(OSError):
                os.unlink(tmp)

    def _call(self, action: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            raise self._error(action, exc) from exc

    def _error(self, action: str, exc: BaseException) -> StoreError:
        """A StoreError naming the action, the session and the cause (after any retries)."""
        if isinstance(exc, StoreError):
            return exc
        reason = str(exc) or type(exc).__name__
        # s3fs turns botocore's ClientError into an OSError; the S3 error code is on the cause.
        response = getattr(exc.__cause__, "response", None)
        code = response.get("Error", {}).get("Code") if isinstance(response, dict) else None
        tag = code or type(exc).__name__
        return StoreError(
            f"cannot {action} in session {self._url}: {reason} [{tag}; no retry left]"
        )


def _gc_url_sessions(
    root: str,
    *,
    older_than_s: float,
    now: float,
    on_skip: Callable[[str, str], None],
    storage_options: Mapping[str, Any],
) -> list[str]:
    """:meth:`FsspecStore.gc_sessions`: remove the sessions under ``root`` idle for
    ``older_than_s`` seconds.

    A prefix directly under ``root`` is a session if it holds a ``session.json`` object and
    nothing but what an :class:`FsspecStore` writes (``session.json``, ``bodies/``, ``log/``):
    anything else is left alone with a warning. Its age is that of its newest object. Object
    stores have no lock to say a session is open: a session is kept while any of its objects is
    younger than ``older_than_s``, so choose it longer than any pause of a live agent. The log
    objects are deleted first and ``session.json`` last: a gc that dies midway leaves a prefix
    that is still recognised (and finished) by the next gc.
    """
    if not isinstance(root, str) or not _URL_RE.match(root):
        raise ConfigError(f"gc_sessions needs a URL with a scheme (s3://...), got {root!r}")
    root = root.rstrip("/")
    fs, base = _filesystem(root, storage_options)
    try:
        entries = fs.ls(base, detail=True)
    except FileNotFoundError:
        return []
    except Exception as exc:
        raise StoreError(f"cannot list gc root {root}: {exc}") from exc
    removed: list[str] = []
    prefixes = sorted(str(e["name"]).rstrip("/") for e in entries if e.get("type") == "directory")
    for prefix in prefixes:
        url = f"{root}/{prefix.rsplit('/', 1)[-1]}"
        try:
            if _collect_url(fs, prefix, url, now, older_than_s, on_skip):
                removed.append(url)
        except Exception as exc:
            events().warning("toolbudget.gc.failed", session=url, error=str(exc))
            on_skip(url, str(exc))
    return removed


def _ignore(url: str, why: str) -> None:
    """The default ``on_skip``: the events already say why."""


def _collect_url(
    fs: Any,
    prefix: str,
    url: str,
    now: float,
    older_than_s: float,
    skip: Callable[[str, str], None],
) -> bool:
    """Remove one candidate session prefix if it qualifies; True if it was removed."""
    found: dict[str, dict[str, Any]] = fs.find(prefix, detail=True)
    rels = {str(name)[len(prefix) + 1 :]: info for name, info in found.items()}
    if META_NAME not in rels:
        return False
    foreign = sorted(
        rel
        for rel in rels
        if rel != META_NAME and rel.split("/", 1)[0] not in (BODIES_NAME, LOG_DIR)
    )
    if foreign:
        events().warning(
            "toolbudget.gc.skipped",
            session=url,
            reason=f"holds objects a session does not: {foreign[:5]}",
        )
        skip(url, f"holds objects a session does not: {', '.join(foreign[:5])}")
        return False
    newest = max(_modified(info) for info in rels.values())
    if now - newest <= older_than_s:
        skip(url, f"used {now - newest:.0f}s ago")
        return False
    logs = sorted(f"{prefix}/{rel}" for rel in rels if rel.startswith(LOG_DIR + "/"))
    bodies = sorted(f"{prefix}/{rel}" for rel in rels if rel.startswith(BODIES_NAME + "/"))
    for batch in (logs, bodies, [f"{prefix}/{META_NAME}"]):
        if batch:
            fs.rm(batch)
    events().info("toolbudget.gc.removed", session=url, idle_s=round(now - newest, 1))
    return True


def _modified(info: Mapping[str, Any]) -> float:
    """An object's last-modified time in seconds since the epoch (s3fs, local and memory
    filesystems name it differently)."""
    for key in ("LastModified", "mtime", "last_modified", "created"):
        value = info.get(key)
        if value is None:
            continue
        if isinstance(value, int | float):
            return float(value)
        if hasattr(value, "timestamp"):
            return float(value.timestamp())
    raise StoreError(f"{info.get('name')} has no modification time the gc can read")
