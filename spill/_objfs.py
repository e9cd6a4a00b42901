"""An fsspec session's filesystem: opening it (s3fs's retries left to botocore), its object
names, and a failed call turned into a StoreError that names the action and the session.

:class:`ObjectSession` is the part the :class:`spill.FsspecStore`'s other parts (:mod:`spill._objlog`,
:mod:`spill._objcache`) name objects through; the layout is described in :mod:`spill._fsspec`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from spill._errors import ConfigError, StoreError

META_NAME: Final = "session.json"
BODIES_NAME: Final = "bodies"
LOG_DIR: Final = "log"
LOG_SUFFIX: Final = ".jsonl"
SEQ_DIGITS: Final = 12
BODY_SUFFIX: Final = ".txt"
URL_RE: Final = re.compile(r"\A[A-Za-z][A-Za-z0-9+.-]*://")
# botocore's "standard" retry mode: exponential backoff with jitter, retrying throttling
# (503 SlowDown), 5xx and connection/read timeouts (botocore docs, "Retries"; botocore 1.43).
# ``total_max_attempts`` counts the first request; Config's ``max_attempts`` counts retries only.
# 5 in all rather than standard mode's default of 3: a spill that gives up keeps its text inline.
_S3_RETRIES: Final = {"mode": "standard", "total_max_attempts": 5}
_S3_TIMEOUTS: Final = {"connect_timeout": 5, "read_timeout": 30}
_S3_DELETE_BATCH: Final = 1000
"""Most keys one S3 DeleteObjects request may name (S3 API reference, DeleteObjects)."""


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


def checked_url(url: object, what: str) -> str:
    """``url`` without its trailing slashes, once it has a scheme and something after it;
    ConfigError naming ``what`` needs it otherwise. ``s3://`` (a bucket variable left empty)
    would strip to ``s3:``, a relative local path."""
    if not isinstance(url, str) or not URL_RE.match(url):
        raise ConfigError(f"{what} needs a URL with a scheme (s3://...), got {url!r}")
    scheme, rest = url.split("://", 1)
    if not rest.strip("/"):
        raise ConfigError(f"{what} needs a location after the scheme, got {url!r}")
    # A scheme is case-insensitive (RFC 3986, 3.1); fsspec's registry knows the lowercase one.
    return f"{scheme.lower()}://{rest}".rstrip("/")


def filesystem(url: str, storage_options: Mapping[str, Any]) -> tuple[Any, str]:
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
            # s3fs (2026.9, ``_cat_file``) HEADs every object it reads unless max_concurrency is
            # 1, to split reads above its 50 MB block size into ranged GETs: a round trip more
            # per log object and body, for objects that are nearly always far smaller.
            options.setdefault("max_concurrency", 1)
            cls = _s3_class()
            fs, root = cls(**options), cls._strip_protocol(url)
        else:
            if protocol in ("file", "local"):
                # A directory tree, not an object store: an object's directories are made as it
                # is written (else every write of a new session fails).
                options.setdefault("auto_mkdir", True)
            fs, root = fsspec.core.url_to_fs(url, **options)
    except ImportError as exc:
        raise ConfigError(
            f"no fsspec filesystem for {protocol}:// is installed ({exc}); for S3: "
            "pip install 'toolbudget[s3]'"
        ) from exc
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"cannot open {url}: {exc}") from exc
    except OSError as exc:  # zip://x: fsspec opens its archive (here a directory) at once
        raise StoreError(f"cannot open {url}: {exc}") from exc
    return fs, str(root).rstrip("/")


def local_dir(url: str) -> str | None:
    """The local directory a ``file://`` or ``local://`` URL names, as fsspec resolves it; None
    for any other URL (an object store has no directory to be missing)."""
    scheme, _, rest = url.partition("://")
    if scheme.lower() not in ("file", "local"):
        return None
    # fsspec knows its protocols in lower case only (``FILE://`` is "Protocol not known").
    return filesystem(f"{scheme.lower()}://{rest}", {})[1]


def fetch_exact(fs: Any, keys: list[str]) -> list[bytes | BaseException]:
    """The bytes of each object named, or the exception its read met, in order; concurrent on
    an async filesystem (s3fs: one coroutine per object, fsspec batching them).

    ``cat_ranges`` rather than ``cat``: ``cat`` expands glob characters (``[``, ``*``, ``?``) in
    the names it is given, so a session named ``run[1]`` would read ``run1``'s objects; a name
    a user chose is never a pattern here.
    """
    if not keys:
        return []
    out = fs.cat_ranges(keys, None, None, on_error="return")
    return [bytes(item) if isinstance(item, bytes | bytearray) else item for item in out]


def delete_exact(fs: Any, keys: Sequence[str]) -> None:
    """Delete exactly the objects named (a missing one is fine); StoreError-free callers map
    what is raised.

    Never fsspec's ``rm``: it expands glob characters in the names, so collecting a session
    named ``a?`` would delete the objects of a live session ``ab``. On S3 the keys go by
    DeleteObjects, up to 1000 a request, and a key it could not delete raises; elsewhere one
    ``rm_file`` each, which takes its path literally.
    """
    call = getattr(fs, "_call_s3", None)
    if call is not None and hasattr(fs, "split_path"):
        from fsspec.asyn import sync  # noqa: PLC0415 - optional dependency, as _import_fsspec

        by_bucket: dict[str, list[str]] = {}
        for key in keys:
            bucket, name, _ = fs.split_path(key)
            by_bucket.setdefault(bucket, []).append(name)
        for bucket, names in by_bucket.items():
            for start in range(0, len(names), _S3_DELETE_BATCH):
                batch = [{"Key": name} for name in names[start : start + _S3_DELETE_BATCH]]
                out = sync(
                    fs.loop,
                    call,
                    "delete_objects",
                    Bucket=bucket,
                    Delete={"Objects": batch, "Quiet": True},
                )
                errors = out.get("Errors") or []
                if errors:
                    first = errors[0]
                    raise OSError(
                        f"{len(errors)} object(s) not deleted, e.g. {first.get('Key')}: "
                        f"{first.get('Code')} {first.get('Message')}"
                    )
        return
    for key in keys:
        try:
            fs.rm_file(key)
        except FileNotFoundError:
            continue


def missing_bucket(exc: BaseException) -> bool:
    """Whether ``exc`` (s3fs's FileNotFoundError) says the bucket itself does not exist."""
    cause = exc.__cause__
    response = getattr(cause, "response", None)
    code = response.get("Error", {}).get("Code") if isinstance(response, dict) else None
    return code == "NoSuchBucket" or "NoSuchBucket" in repr(cause)


class ObjectSession:
    """An fsspec session's objects: its URL, filesystem and root path; object names, exact
    reads, and a failed call turned into a StoreError.

    A part of :class:`spill.FsspecStore` (which serializes the calls under its mutex and knows
    whether it is closed), shared by its log (:class:`spill._objlog.ObjectLog`) and its cache
    (:class:`spill._objcache.ReadCache`); it holds no state that changes.
    """

    def __init__(self, url: str, fs: Any, root: str) -> None:
        self.url = url
        self.fs = fs
        self.root = root

    def key(self, rel: str) -> str:
        """The object key of ``rel`` (a name relative to the session)."""
        return f"{self.root}/{rel}"

    def body_rel(self, ref: str) -> str:
        """The name of ``ref``'s body, relative to the session."""
        return f"{BODIES_NAME}/{ref[:2]}/{ref}{BODY_SUFFIX}"

    def body_key(self, ref: str) -> str:
        """The object key of ``ref``'s body."""
        return self.key(self.body_rel(ref))

    def log_rel(self, seq: int) -> str:
        """The name of log object ``seq``, relative to the session."""
        return f"{LOG_DIR}/{seq:0{SEQ_DIGITS}d}{LOG_SUFFIX}"

    def log_key(self, seq: int) -> str:
        """The object key of log object ``seq``."""
        return self.key(self.log_rel(seq))

    def existing(self, key: str) -> bytes | None:
        """The bytes of object ``key``, None if there is none."""
        try:
            return bytes(self.fs.cat_file(key))
        except FileNotFoundError:
            return None
        except Exception as exc:
            raise self.store_error(f"read {key}", exc) from exc

    def remote_size(self, key: str) -> int | None:
        """The size of object ``key``, None if there is none."""
        try:
            info = self.fs.info(key)
        except FileNotFoundError:
            return None
        except Exception as exc:
            raise self.store_error(f"inspect {key}", exc) from exc
        size = info.get("size")
        return int(size) if isinstance(size, int) else None

    def call(self, action: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)``, a failure a StoreError naming ``action``."""
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            raise self.store_error(action, exc) from exc

    def store_error(self, action: str, exc: BaseException) -> StoreError:
        """A StoreError naming the action, the session and the cause (after any retries)."""
        if isinstance(exc, StoreError):
            return exc
        reason = str(exc) or type(exc).__name__
        # s3fs turns botocore's ClientError into an OSError; the S3 error code is on the cause.
        response = getattr(exc.__cause__, "response", None)
        code = response.get("Error", {}).get("Code") if isinstance(response, dict) else None
        tag = code or type(exc).__name__
        return StoreError(f"cannot {action} in session {self.url}: {reason} [{tag}; no retry left]")
