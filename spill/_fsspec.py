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
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import tempfile
import threading
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Final, Self

import orjson
import xxhash

from spill._errors import ConfigError, QuotaExceeded, RefError, SessionLocked, StoreError
from spill._log import decode_log, encode_records
from spill._store import LogRecord, check_quota, encode_text, events, validate_ref

__all__ = ["FsspecStore"]

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


def _import_fsspec() -> Any:
    try:
        import fsspec  # noqa: PLC0415 - optional dependency: the s3 extra
    except ImportError as exc:
        raise ConfigError(
            "FsspecStore needs fsspec (and s3fs for s3:// URLs): pip install 'toolbudget[s3]'"
        ) from exc
    return fsspec


class FsspecStore:
    """A session at an fsspec URL: ``s3://bucket/sessions/abc``, ``gs://...``, ``memory://...``.

    ``FsspecStore(url, **storage_options)`` passes ``storage_options`` to the filesystem (for
    S3: ``endpoint_url``, ``key``, ``secret``, ``client_kwargs``...). For ``s3://`` URLs the
    store turns off s3fs's listing cache (the log is listed to resume, and another writer may
    have added to it) and, unless ``config_kwargs`` is given, asks botocore for its standard
    retry mode (5 attempts in all, with backoff) and finite timeouts. s3fs's own retry loop is then set
    to one attempt on the store's own (uncached) filesystem instance, so a failure is retried by
    botocore alone and reported once as a :class:`StoreError`.

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
        fsspec = _import_fsspec()
        self._url = url.rstrip("/")
        self._quota = quota_bytes
        self._mutex = threading.Lock()
        self._closed = True
        self._locked_out = False
        options = dict(storage_options)
        protocol = url.split("://", 1)[0].lower()
        if protocol in ("s3", "s3a"):
            options.setdefault("use_listings_cache", False)
            options.setdefault("config_kwargs", {"retries": _S3_RETRIES, **_S3_TIMEOUTS})
            # Our own instance: s3fs's retry count is a class attribute, set on it below.
            options["skip_instance_cache"] = True
        try:
            self._fs, root = fsspec.core.url_to_fs(self._url, **options)
        except ImportError as exc:
            raise ConfigError(
                f"no fsspec filesystem for {protocol}:// is installed ({exc}); for S3: "
                "pip install 'toolbudget[s3]'"
            ) from exc
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"cannot open {self._url}: {exc}") from exc
        self._root = str(root).rstrip("/")
        if protocol in ("s3", "s3a") and hasattr(self._fs, "retries"):
            # botocore retries (with backoff); s3fs's own loop would repeat its 5 attempts 5 times.
            self._fs.retries = 1
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
        events().debug("spill.store.opened", path=self._url)

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
        """Store ``text`` once by content hash; return its ref once the PUT has succeeded."""
        if not isinstance(text, str):
            raise StoreError(f"put takes a str body, got {type(text).__name__}")
        data = encode_text(text)
        ref = xxhash.xxh3_128_hexdigest(data)
        with self._mutex:
            self._check_open()
            size = self._remote_size(self._body_key(ref))
            if size == len(data):
                self._cache_put(ref, data)
                return ref
            old = size or 0
            new_total = self._bodies_total() - old + len(data)
            if self._quota is not None and new_total > self._quota:
                raise QuotaExceeded(
                    f"storing a body of {len(data)} bytes would bring session {self._url} "
                    f"to {new_total} bytes of bodies, above its quota of {self._quota} bytes"
                )
            self._call(
                "write body " + self._body_rel(ref), self._fs.pipe_file, self._body_key(ref), data
            )
            self._total = new_total
            self._cache_put(ref, data)
        return ref

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
                    "spill.log.object_missing",
                    source=self._url,
                    first=self._log_rel(expected),
                    count=seq - expected,
                )
            expected = seq + 1
            data = fetched.get(key, fetched.get(self._fs.unstrip_protocol(key)))
            if not isinstance(data, bytes | bytearray):
                events().warning(
                    "spill.log.object_skipped",
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
        try:
            meta = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise StoreError(
                f"{META_NAME} in session {self._url} is not valid JSON: {exc}"
            ) from exc
        if not isinstance(meta, dict):
            raise StoreError(f"{META_NAME} in session {self._url} does not hold a JSON object")
        return meta

    def write_meta(self, meta: Mapping[str, Any]) -> None:
        """Replace the session metadata with one PUT (atomic on object stores)."""
        if not isinstance(meta, Mapping):
            raise StoreError(f"session metadata must be a mapping, got {type(meta).__name__}")
        try:
            data = orjson.dumps(dict(meta), option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2)
        except TypeError as exc:
            raise StoreError(f"session metadata is not JSON-serializable: {exc}") from exc
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
        events().debug("spill.store.closed", path=self._url)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"FsspecStore({self._url!r}, {state})"

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
            events().warning("spill.cache.corrupt", path=self._url, ref=ref)
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
            events().warning("spill.cache.write_failed", path=self._url, ref=ref, error=str(exc))
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
