"""``toolbudget traces fetch DIR``: the public trace set behind README's headline, downloaded.

Every file of :data:`MANIFEST` (``benchmarks/trace_set.json``) is a data file committed to a public
repository, fetched at its pinned commit from the host's raw-file endpoint
(``BASE_URL/<owner>/<repo>/<commit>/<path>``) into ``DIR/<format>/<owner>__<repo>/<path>``, the
layout ``toolbudget bench --traces DIR`` reads. Each file is written to ``<name>.part`` first and
renamed into place only once its size and git blob SHA-1 (``git hash-object``) match the
manifest: a file in place is a verified copy, so a second run skips it. An interrupted download
keeps its ``.part`` and the next run asks for the rest (an HTTP ``Range`` request; a server that
answers with the whole file instead is read from the start).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import quote

from budget import BudgetError

__all__ = [
    "BASE_URL",
    "MANIFEST",
    "FetchReport",
    "TraceFetchError",
    "TraceFile",
    "fetch_traces",
    "load_manifest",
]

BASE_URL: Final = "https://raw.githubusercontent.com"
"""GitHub's raw-file endpoint: ``/<owner>/<repo>/<commit>/<path>`` serves a file as committed."""

MANIFEST: Final = Path(__file__).with_name("trace_set.json")

_CHUNK: Final = 1 << 16
_TIMEOUT_S: Final = 60.0
"""Seconds a connection may stay silent before the file is given up (and resumed next run)."""


class TraceFetchError(BudgetError):
    """A trace file could not be fetched or is not the file the manifest lists."""


@dataclass(frozen=True, slots=True)
class TraceFile:
    """One file of the trace set: where it comes from and what it must hash to."""

    format: str
    repo: str
    commit: str
    path: str
    bytes: int
    blob: str

    @property
    def local(self) -> str:
        """Its path below DIR: ``<format>/<owner>__<repo>/<path>``."""
        return f"{self.format}/{self.repo.replace('/', '__')}/{self.path}"

    def url(self, base: str) -> str:
        """Its address below ``base``: ``<owner>/<repo>/<commit>/<path>``."""
        return f"{base.rstrip('/')}/{self.repo}/{self.commit}/{quote(self.path, safe='/')}"


@dataclass(frozen=True, slots=True)
class FetchReport:
    """What a run did: the files downloaded now (and how many bytes), those already in place."""

    fetched: tuple[TraceFile, ...]
    present: tuple[TraceFile, ...]
    downloaded_bytes: int


def load_manifest(path: Path = MANIFEST) -> tuple[TraceFile, ...]:
    """The trace set's files as ``benchmarks/trace_set.json`` lists them."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    files = tuple(TraceFile(**entry) for entry in doc["files"])
    for f in files:
        # A manifest path climbing out of DIR would write anywhere: refused, whatever its source.
        parts = Path(f.local).parts
        if Path(f.local).is_absolute() or ".." in parts:
            raise TraceFetchError(f"manifest {path}: {f.local!r} is not a path below DIR")
    return files


def blob_sha1(path: Path) -> str:
    """The git blob SHA-1 of the file at ``path`` (what ``git hash-object`` prints)."""
    digest = hashlib.sha1(f"blob {path.stat().st_size}\0".encode(), usedforsecurity=False)
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def fetch_traces(
    dest: Path,
    *,
    base_url: str = BASE_URL,
    files: tuple[TraceFile, ...] | None = None,
    say: Callable[[str], None] = print,
) -> FetchReport:
    """Fetch every file of the trace set missing under ``dest``; ``say`` gets one line a file.

    TraceFetchError on the first file that cannot be fetched (its ``.part`` kept for the next
    run) or whose bytes are not the listed ones (nothing kept: the source is not the listed file).
    """
    chosen = load_manifest() if files is None else files
    fetched: list[TraceFile] = []
    present: list[TraceFile] = []
    downloaded = 0
    for f in chosen:
        target = dest / f.local
        if target.exists():
            _check_in_place(f, target)
            present.append(f)
            continue
        got, resumed_at = _download(f, target, base_url)
        downloaded += got
        fetched.append(f)
        how = f", resumed at byte {resumed_at:,}" if resumed_at else ""
        say(f"fetched {f.local} ({f.bytes:,} bytes{how})")
    return FetchReport(tuple(fetched), tuple(present), downloaded)


def _check_in_place(f: TraceFile, target: Path) -> None:
    """A file already at ``target`` must be the listed one: another is never overwritten."""
    if not target.is_file() or target.stat().st_size != f.bytes or blob_sha1(target) != f.blob:
        raise TraceFetchError(
            f"{target} is there but is not {f.repo}@{f.commit[:8]}:{f.path} (size or git blob "
            f"hash differ from {f.bytes:,} bytes, {f.blob}): move it away to fetch it again"
        )


def _download(f: TraceFile, target: Path, base_url: str) -> tuple[int, int]:
    """Fetch ``f`` into ``target`` through ``target.part``; (bytes received, byte resumed at)."""
    part = target.with_name(target.name + ".part")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TraceFetchError(f"cannot make {target.parent}: {exc.strerror or exc}") from None
    have = part.stat().st_size if part.exists() else 0
    if have >= f.bytes:  # a complete (or overlong) leftover: check it rather than ask for more
        have = 0 if have > f.bytes else have
    url = f.url(base_url)
    received = 0
    if have < f.bytes:
        headers = {"Range": f"bytes={have}-"} if have else {}
        try:
            request = urllib.request.Request(url, headers=headers)  # ValueError: not a URL
            with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as response:
                if have and response.status != 206:  # the whole file came back: start over
                    have = 0
                with part.open("ab" if have else "wb") as out:
                    while chunk := response.read(_CHUNK):
                        out.write(chunk)
                        received += len(chunk)
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise TraceFetchError(
                f"could not fetch {url}: {reason} ({received:,} more bytes kept in {part}; run "
                "the command again to resume)"
            ) from None
    size = part.stat().st_size
    blob = blob_sha1(part)
    if size != f.bytes or blob != f.blob:
        if size < f.bytes:
            raise TraceFetchError(
                f"{url} ended after {size:,} of {f.bytes:,} bytes (kept in {part}; run the "
                "command again to resume)"
            )
        part.unlink()
        raise TraceFetchError(
            f"{url} is not the listed file: {size:,} bytes with git blob hash {blob}, expected "
            f"{f.bytes:,} bytes and {f.blob} (nothing kept)"
        )
    os.replace(part, target)
    return received, have
