"""Object-store performance on loopback: FsspecStore on moto's S3 server beside LocalStore.

Measured in the same run, on this machine, against moto's S3 server on 127.0.0.1 (the dev
extra): a spill (``put``) of 10 KB, 1 MB and 10 MB, and a resume (open + ``read_log``) of 10,000
decisions, written as one log object per decision (the worst case: one request, one record) and
as one object per 10 decisions. Loopback has no network latency, and moto is a Python server:
the figures say what the store's own work and the S3 protocol cost, not what a real bucket
gives (add the bucket's round trip, ~10-30 ms per request on AWS, to each object touched).

Each figure is the median of ``--repeat`` runs (best beside it). Run from the repository root::

    python -m benchmarks object-store [--repeat 5] [--json out.json]
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
from spill._log import encode_records

__all__ = ["Row", "command", "main", "measure"]

SIZES = {"10 KB": 10_000, "1 MB": 1_000_000, "10 MB": 10_000_000}
DECISIONS = 10_000
BUCKET = "bench"


@dataclass(frozen=True, slots=True)
class Row:
    """One operation measured on both stores: median and best seconds of each."""

    operation: str
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


def measure(repeat: int = 5) -> list[Row]:
    """Run every measurement against a fresh moto server and a temp directory."""
    with _moto_server() as port:
        return _measure(port, repeat)


def _measure(port: int, repeat: int) -> list[Row]:
    import boto3  # moto[server] and the dev extra bring it

    options: dict[str, Any] = {
        "endpoint_url": f"http://127.0.0.1:{port}",
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"region_name": "us-east-1"},
    }
    rows: list[Row] = []
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
        for per_object in (1, 10):
            rows.append(_resume(root, options, per_object, repeat))
    return rows


def _resume(root: Path, options: dict[str, Any], per_object: int, repeat: int) -> Row:
    records = _records(DECISIONS)
    batches = [records[i : i + per_object] for i in range(0, DECISIONS, per_object)]
    local_dir = root / f"resume-{per_object}"
    with LocalStore(local_dir, fsync=False) as local:
        for batch in batches:
            local.append_log(batch)
    url = f"s3://{BUCKET}/resume-{per_object}"
    with FsspecStore(url, cache_dir=root / "c2", **options) as s3:
        # The very bytes append_log writes, PUT concurrently: seeding 10,000 objects one by one
        # would take minutes and is not what is measured.
        s3._fs.pipe({s3._log_key(seq): encode_records(batch) for seq, batch in enumerate(batches)})

    def local_resume() -> None:
        with LocalStore(local_dir) as store:
            assert len(store.read_log()) == DECISIONS

    def s3_resume() -> None:
        with FsspecStore(url, cache_dir=root / "c3", **options) as store:
            assert len(store.read_log()) == DECISIONS

    label = f"resume {DECISIONS:,} decisions, {len(batches):,} log objects"
    return _row(label, times(local_resume, repeat), times(s3_resume, repeat))


def _row(operation: str, local: list[float], s3: list[float]) -> Row:
    return Row(
        operation,
        statistics.median(local),
        min(local),
        statistics.median(s3),
        min(s3),
    )


def table(rows: list[Row]) -> str:
    """The rows as a Markdown table (milliseconds)."""
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


def main(*, repeat: int = 5, json_path: Path | None = None) -> int:
    """Measure and print the table; optionally write the rows as JSON.

    The command line is ``python -m benchmarks object-store`` (see ``benchmarks/cli.py``).
    """
    rows = measure(max(1, repeat))
    print(table(rows))
    if json_path is not None:
        json_path.write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    return 0


def command(
    repeat: Annotated[int, typer.Option(min=1, help="Runs per figure.")] = 5,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Also write the figures here.")
    ] = None,
) -> None:
    """Object-store sessions (FsspecStore on moto's S3 on loopback) beside LocalStore."""
    raise typer.Exit(main(repeat=repeat, json_path=json_path))


if __name__ == "__main__":
    from benchmarks._command import run_alone

    run_alone(command, "benchmarks.object_store")
