"""Object-store performance on loopback: FsspecStore on moto's S3 server beside LocalStore.

Measured in the same run, on this machine, against moto's S3 server on 127.0.0.1 (the dev
extra): a spill (``put``) of 10 KB, 1 MB and 10 MB, and the resume curve: open + ``read_log``
of sessions of 1,000 and 10,000 decisions written 1, 10 and 100 decisions per append (one log
object per append: one per request is the normal case), each session written through the
store's own ``append_log``, so the S3 session holds what its writer leaves (roll-up snapshots
and the appends after them, issue 31). Loopback has no network latency, and moto is a Python
server: the figures say what the store's own work and the S3 protocol cost, not what a real
bucket gives (add the bucket's round trip, ~10-30 ms per request on AWS, to each object
touched: a resume touches one listing page and at most 33 objects, fetched concurrently).

Each figure is the median of ``--repeat`` runs (best beside it). Run from the repository root::

    python -m benchmarks object-store [--repeat 5] [--decisions 1000 --decisions 10000] [--json out.json]
"""

from __future__ import annotations

import contextlib
import functools
import json
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from benchmarks._timing import times
from spill import FsspecStore, LocalStore

__all__ = ["Row", "command", "main", "measure"]

SIZES = {"10 KB": 10_000, "1 MB": 1_000_000, "10 MB": 10_000_000}
DECISIONS = (1_000, 10_000)
PER_APPEND = (100, 10, 1)
BUCKET = "bench"


@dataclass(frozen=True, slots=True)
class Row:
    """One operation measured on both stores: median and best seconds of each."""

    operation: str
    local_median_s: float
    local_best_s: float
    s3_median_s: float
    s3_best_s: float


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """One point of the resume curve: a session of ``decisions`` decisions written
    ``per_append`` per append (``appends`` log objects written), the objects the S3 resume
    reads (its snapshot and the appends after it), and both stores' resume times."""

    decisions: int
    per_append: int
    appends: int
    s3_objects_read: int
    local_median_s: float
    local_best_s: float
    s3_median_s: float
    s3_best_s: float


def _body(size: int) -> str:
    """A distinct body of ``size`` ASCII characters (distinct: a put of a known ref is a no-op)."""
    head = secrets.token_hex(16)
    return (head + "x" * size)[:size]


def _put(store: LocalStore | FsspecStore, size: int) -> str:
    return store.put(_body(size))


def _records(n: int) -> list[dict[str, Any]]:
    return [{"call_id": f"toolu_{i:05d}", "decision": "kept", "seq": i} for i in range(n)]


@contextlib.contextmanager
def _moto_server() -> Iterator[int]:
    """moto's S3 server in a process of its own on a free loopback port (its port), so that the
    server and the store measured do not share one interpreter's lock; stopped afterwards."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto's S3 server did not start") from None
                time.sleep(0.1)
        yield port
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def measure(
    repeat: int = 5, decisions: tuple[int, ...] = DECISIONS
) -> tuple[list[Row], list[ResumePoint]]:
    """Run every measurement against a fresh moto server and a temp directory."""
    with _moto_server() as port:
        return _measure(port, repeat, decisions)


def _measure(
    port: int, repeat: int, decisions: tuple[int, ...]
) -> tuple[list[Row], list[ResumePoint]]:
    import boto3  # moto[server] and the dev extra bring it

    options: dict[str, Any] = {
        "endpoint_url": f"http://127.0.0.1:{port}",
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"region_name": "us-east-1"},
    }
    rows: list[Row] = []
    points: list[ResumePoint] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        boto3.client(
            "s3",
            endpoint_url=options["endpoint_url"],
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        ).create_bucket(Bucket=BUCKET)
        with (
            LocalStore(root / "local") as local,
            FsspecStore(f"s3://{BUCKET}/spill", cache_dir=root / "c1", **options) as s3,
        ):
            for label, size in SIZES.items():
                lt = times(functools.partial(_put, local, size), repeat)
                st = times(functools.partial(_put, s3, size), repeat)
                rows.append(_row(f"spill {label}", lt, st))
        for n in decisions:
            for per_append in PER_APPEND:
                points.append(_resume(root, options, n, per_append, repeat))
    return rows, points


def _resume(
    root: Path, options: dict[str, Any], n: int, per_append: int, repeat: int
) -> ResumePoint:
    records = _records(n)
    batches = [records[i : i + per_append] for i in range(0, n, per_append)]
    local_dir = root / f"resume-{n}-{per_append}"
    with LocalStore(local_dir, fsync=False) as local:
        for batch in batches:
            local.append_log(batch)
    url = f"s3://{BUCKET}/resume-{n}-{per_append}"
    # Written by the store's own appends, as a session writes them (its roll-ups included).
    with FsspecStore(url, cache_dir=root / "c2", **options) as s3:
        for batch in batches:
            s3.append_log(batch)
        listing = s3._log.scan()
    newest = listing.snapshots[-1] if listing.snapshots else -1
    read = len(listing.snapshots[-1:]) + len([s for s in listing.seqs if s > newest])

    def local_resume() -> None:
        with LocalStore(local_dir) as store:
            assert len(store.read_log()) == n

    def s3_resume() -> None:
        with FsspecStore(url, cache_dir=root / "c3", **options) as store:
            assert len(store.read_log()) == n

    lt, st = times(local_resume, repeat), times(s3_resume, repeat)
    return ResumePoint(
        n,
        per_append,
        len(batches),
        read,
        statistics.median(lt),
        min(lt),
        statistics.median(st),
        min(st),
    )


def _row(operation: str, local: list[float], s3: list[float]) -> Row:
    return Row(
        operation,
        statistics.median(local),
        min(local),
        statistics.median(s3),
        min(s3),
    )


def table(rows: list[Row]) -> str:
    """The spill rows as a Markdown table (milliseconds)."""
    lines = [
        "| operation (loopback) | LocalStore median ms | FsspecStore on moto S3 median ms | ratio |",
        "|---|---:|---:|---:|",
    ]
    for row in rows:
        ratio = row.s3_median_s / row.local_median_s if row.local_median_s else float("inf")
        lines.append(
            f"| {row.operation} | {row.local_median_s * 1000:,.1f} "
            f"| {row.s3_median_s * 1000:,.1f} | {ratio:,.1f}x |"
        )
    return "\n".join(lines)


def curve(points: list[ResumePoint]) -> str:
    """The resume curve as a Markdown table (milliseconds)."""
    lines = [
        "| decisions | per append | log objects written | S3 objects read | LocalStore resume "
        "median ms | FsspecStore on moto S3 resume median ms (best) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for p in points:
        lines.append(
            f"| {p.decisions:,} | {p.per_append:,} | {p.appends:,} | {p.s3_objects_read:,} "
            f"| {p.local_median_s * 1000:,.1f} | {p.s3_median_s * 1000:,.1f} "
            f"({p.s3_best_s * 1000:,.1f}) |"
        )
    return "\n".join(lines)


def main(
    *, repeat: int = 5, json_path: Path | None = None, decisions: tuple[int, ...] = DECISIONS
) -> int:
    """Measure and print both tables; optionally write the figures as JSON.

    The command line is ``python -m benchmarks object-store`` (see ``benchmarks/cli.py``).
    """
    rows, points = measure(max(1, repeat), decisions)
    print(table(rows))
    print()
    print(curve(points))
    if json_path is not None:
        figures = {"spill": [asdict(r) for r in rows], "resume": [asdict(p) for p in points]}
        json_path.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


def command(
    repeat: Annotated[int, typer.Option(min=1, help="Runs per figure.")] = 5,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Also write the figures here.")
    ] = None,
    decisions: Annotated[
        list[int] | None,
        typer.Option(min=1, help="Session sizes of the resume curve (default 1,000 and 10,000)."),
    ] = None,
) -> None:
    """Object-store sessions (FsspecStore on moto's S3 on loopback) beside LocalStore."""
    sizes = tuple(decisions) if decisions else DECISIONS
    raise typer.Exit(main(repeat=repeat, json_path=json_path, decisions=sizes))


if __name__ == "__main__":
    from benchmarks._command import run_alone

    run_alone(command, "benchmarks.object_store")
