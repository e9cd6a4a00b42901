"""Session-store performance: resume from the decision log, and spill throughput.

Measures what docs/performance.md sets targets for, on the store alone:

- ``read_log`` of 10,000 decision records (target: resume in under 100 ms, reading no body),
  for small records (a ``kept`` decision) and envelope-sized ones (a ``spilled`` decision
  carrying its ~2,300-character replacement text);
- opening an existing session holding 10,000 bodies and reading its log (the whole resume);
- ``put`` of a 10 MB body with fsync on and off, in MB/s (target: spills at >= 300 MB/s to a
  local disk), and ``get`` of it back (hash-verified).

Each figure is the best of ``--repeat`` runs, with the median beside it: on a shared machine the
best run is the one least disturbed by other work. Run from the repository root::

    python -m benchmarks store-perf [--repeat 7] [--dir DIR] [--json out.json]

``--dir`` picks the filesystem measured (default: the system temp directory, which may be a
RAM disk on some machines; pass a directory on the disk sessions will live on).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated

import orjson
import typer

from benchmarks._timing import times
from spill import LocalStore, ref_for

__all__ = ["Figure", "command", "main", "measure"]

RECORDS = 10_000
BODY_BYTES = 10_000_000
MB = 1_000_000


@dataclass(frozen=True, slots=True)
class Figure:
    """One measured quantity: best and median of the runs, in ``unit``."""

    name: str
    best: float
    median: float
    unit: str


def _put_each(store: LocalStore, bodies: list[str]) -> list[float]:
    """Seconds each put takes, one new body each (a repeated body would not be rewritten)."""
    out = []
    for body in bodies:
        started = time.perf_counter()
        store.put(body)
        out.append(time.perf_counter() - started)
    return out


def _ms(name: str, seconds: list[float]) -> Figure:
    return Figure(name, min(seconds) * 1e3, statistics.median(seconds) * 1e3, "ms")


def _rate(name: str, size: int, seconds: list[float]) -> Figure:
    return Figure(name, size / min(seconds) / MB, size / statistics.median(seconds) / MB, "MB/s")


def _records(envelope: bool) -> list[dict[str, object]]:
    text = "line of preview output\n" * 100 if envelope else None
    return [
        {
            "call_id": f"toolu_{i:020d}",
            "decision": "spilled" if envelope else "kept",
            "reason": "cap" if envelope else "fits",
            "ref": ref_for(str(i)) if envelope else None,
            "chars": 60_000 + i,
            "lines": 1_200,
            "round": i // 3,
            "text": text,
        }
        for i in range(RECORDS)
    ]


def _bodies(count: int, *, cjk: bool = False) -> list[str]:
    """``count`` different texts of about BODY_BYTES UTF-8 bytes, like a long build log.

    ``cjk`` adds two CJK characters per line: CPython then stores the text as UCS-2 and its
    UTF-8 encoder (needed to hash and write it) is several times slower than for ASCII.
    """
    line = (
        "Building wheel for package-{} (pyproject.toml) ... done" + (" 中文" if cjk else "") + "\n"
    )
    base = "".join(line.format(i) for i in range(BODY_BYTES // 50))
    base = base.encode()[:BODY_BYTES].decode("utf-8", "ignore")
    return [f"{i:08d}" + base[8:] for i in range(count)]


def _parse_only(data: bytes) -> None:
    """The floor under read_log: orjson-parse every line, with no checks at all."""
    loads = orjson.loads
    for line in data.split(b"\n")[:-1]:
        loads(line)


def measure(root: Path, repeat: int) -> list[Figure]:
    """Run every measurement in fresh sessions under ``root``."""
    figures: list[Figure] = []
    for envelope in (False, True):
        records = _records(envelope)
        with LocalStore(root / f"log-{envelope}", fsync=False) as store:
            store.append_log(records)
            assert len(store.read_log()) == RECORDS
            data = (root / f"log-{envelope}" / "decisions.jsonl").read_bytes()
            kind = f"{len(data) // RECORDS:,} B records"
            figures.append(_ms(f"read_log, 10,000 {kind}", times(store.read_log, repeat)))
            seconds = times(lambda: _parse_only(data), repeat)  # noqa: B023 - called right here
            figures.append(_ms("  reference: bare orjson.loads per line", seconds))

    resume = root / "resume"
    with LocalStore(resume, fsync=False) as store:
        refs = [store.put(f"body {i}\n" * 20) for i in range(RECORDS)]
        store.append_log([{"call_id": f"toolu_{i}", "ref": ref} for i, ref in enumerate(refs)])

    def reopen() -> None:
        with LocalStore(resume) as again:
            assert len(again.read_log()) == RECORDS

    figures.append(_ms("open + read_log, 10,000 bodies on disk", times(reopen, repeat)))

    for cjk in (False, True):
        bodies = _bodies(repeat + 1, cjk=cjk)
        size = len(bodies[0].encode("utf-8"))
        text = "ASCII + CJK" if cjk else "ASCII"
        for fsync in (True, False):
            with LocalStore(root / f"put-{fsync}-{cjk}", fsync=fsync, quota_bytes=None) as store:
                seconds = _put_each(store, bodies[:repeat])
            state = "on" if fsync else "off"
            figures.append(_rate(f"put 10 MB {text}, fsync {state}", size, seconds))
        with LocalStore(root / f"get-{cjk}", fsync=False) as store:
            ref = store.put(bodies[-1])
            seconds = times(lambda: store.get(ref), repeat)  # noqa: B023 - called right here
        figures.append(_rate(f"get 10 MB {text} (hash-verified)", size, seconds))
    return figures


def main(*, repeat: int = 7, workdir: Path | None = None, json_path: Path | None = None) -> int:
    """Measure and print the figures; optionally write them as JSON.

    The command line is ``python -m benchmarks store-perf`` (see ``benchmarks/cli.py``).
    """
    with tempfile.TemporaryDirectory(dir=workdir, prefix="store-perf-") as tmp:
        figures = measure(Path(tmp), max(1, repeat))
    width = max(len(f.name) for f in figures)
    print(f"{'measure':<{width}}  {'best':>9}  {'median':>9}")
    for f in figures:
        print(f"{f.name:<{width}}  {f.best:>9.1f}  {f.median:>9.1f}  {f.unit}")
    if json_path is not None:
        json_path.write_text(json.dumps([asdict(f) for f in figures], indent=2) + "\n")
    return 0


def command(
    repeat: Annotated[int, typer.Option(help="Runs per figure.")] = 7,
    workdir: Annotated[
        Path | None, typer.Option("--dir", help="Where to create the sessions.")
    ] = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Also write the figures here.")
    ] = None,
) -> None:
    """Session-store performance: resume from the decision log, and spill throughput."""
    raise typer.Exit(main(repeat=repeat, workdir=workdir, json_path=json_path))


if __name__ == "__main__":
    from benchmarks._command import run_alone

    run_alone(command, "benchmarks.store_perf")
