"""``toolbudget traces fetch DIR`` against a loopback mirror of the raw-file endpoint (issue 34,
item 5): the real manifest, the real files (the public trace set beside the checkout, served as
the public repositories serve them), an interrupted download resumed, a wrong file refused."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from benchmarks.fetch import BASE_URL, TraceFile, blob_sha1, load_manifest
from tests._entry import run_toolbudget

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Mirror:
    """A loopback server answering ``/<owner>/<repo>/<commit>/<path>`` from the shared copy."""

    files: dict[str, Path]
    url: str = ""
    cut: set[str] = field(default_factory=set)
    """Paths whose next response stops after half the body (then served whole)."""
    corrupt: set[str] = field(default_factory=set)
    """Paths served with one byte changed."""
    ranges: list[tuple[str, str]] = field(default_factory=list)
    """(path, Range header) of every request that carried one."""
    requests: int = 0


def _handler(mirror: Mirror) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            mirror.requests += 1
            path = unquote(urlsplit(self.path).path)
            source = mirror.files.get(path)
            if source is None:
                self.send_error(404)
                return
            data = source.read_bytes()
            if path in mirror.corrupt:
                data = bytes([data[0] ^ 1]) + data[1:]
            start = 0
            wanted = self.headers.get("Range")
            if wanted:
                mirror.ranges.append((path, wanted))
                m = re.fullmatch(r"bytes=(\d+)-", wanted)
                assert m, wanted
                start = int(m.group(1))
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            else:
                self.send_response(200)
            body = data[start:]
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if path in mirror.cut:
                mirror.cut.discard(path)
                self.wfile.write(body[: len(body) // 2])
                self.close_connection = True
                return
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # quiet: the test reads the mirror's own record

    return Handler


@pytest.fixture
def mirror(shared_traces: Path) -> Iterator[Mirror]:
    """The public trace set served on 127.0.0.1 at the manifest's addresses, until the test ends."""
    files = {urlsplit(f.url(BASE_URL)).path: shared_traces / f.local for f in load_manifest()}
    served = Mirror({unquote(k): v for k, v in files.items()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(served))
    served.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _fetch(dest: Path, mirror: Mirror, cwd: Path) -> tuple[int, list[str], str]:
    done = run_toolbudget(["traces", "fetch", str(dest), "--source", mirror.url], cwd=cwd)
    return done.returncode, done.stdout.splitlines(), done.stderr


def test_the_manifest_lists_the_shared_trace_set_file_for_file(shared_traces: Path) -> None:
    """Every file of ``../shared/traces`` (but its README) is in the manifest with its size and
    git blob hash, and nothing else is."""
    listed = {f.local: f for f in load_manifest()}
    on_disk = {
        p.relative_to(shared_traces).as_posix(): p
        for p in shared_traces.rglob("*")
        if p.is_file() and p.name != "README.md"
    }
    assert sorted(listed) == sorted(on_disk)
    for name, f in listed.items():
        assert (f.bytes, f.blob) == (on_disk[name].stat().st_size, blob_sha1(on_disk[name]))


def test_fetch_downloads_every_file_checks_it_and_a_second_run_fetches_nothing(
    tmp_path: Path, mirror: Mirror, shared_traces: Path
) -> None:
    """A first run fetches the 29 files byte for byte into bench's layout and says what it
    fetched; a second run downloads nothing and says every file is there."""
    dest = tmp_path / "traces"
    code, out, err = _fetch(dest, mirror, tmp_path)
    assert code == 0, err
    manifest = load_manifest()
    assert len([line for line in out if line.startswith("fetched ")]) == len(manifest) == 29
    total = sum(f.bytes for f in manifest)
    assert out[-1] == (
        f"29 file(s) fetched ({total:,} bytes), 0 already there and checked; "
        f"run: toolbudget bench --traces {dest}"
    )
    for f in manifest:
        assert (dest / f.local).read_bytes() == (shared_traces / f.local).read_bytes(), f.local
    assert not list(dest.rglob("*.part"))
    before = mirror.requests
    code, out, err = _fetch(dest, mirror, tmp_path)
    assert code == 0, err
    assert out == [
        f"0 file(s) fetched (0 bytes), 29 already there and checked; "
        f"run: toolbudget bench --traces {dest}"
    ]
    assert mirror.requests == before


def test_an_interrupted_download_is_resumed_from_where_it_stopped(
    tmp_path: Path, mirror: Mirror
) -> None:
    """A connection that drops halfway through a file fails the run with a line saying to run
    again, keeping the bytes received; the next run asks for the rest (Range) and completes."""
    big = max(load_manifest(), key=lambda f: f.bytes)
    path = unquote(urlsplit(big.url(BASE_URL)).path)
    mirror.cut.add(path)
    dest = tmp_path / "traces"
    code, _, err = _fetch(dest, mirror, tmp_path)
    assert code == 2
    assert err.count("\n") == 1 and "run the command again to resume" in err, err
    part = dest / (big.local + ".part")
    kept = part.stat().st_size
    assert 0 < kept < big.bytes
    code, out, err = _fetch(dest, mirror, tmp_path)
    assert code == 0, err
    assert mirror.ranges == [(path, f"bytes={kept}-")]
    assert f"fetched {big.local} ({big.bytes:,} bytes, resumed at byte {kept:,})" in out
    assert blob_sha1(dest / big.local) == big.blob
    assert not part.exists()


def test_a_file_that_is_not_the_listed_one_is_refused_and_not_kept(
    tmp_path: Path, mirror: Mirror
) -> None:
    """A source serving other bytes under a listed path fails the run naming the file and both
    hashes; nothing of it is kept, and a file already in place that differs is never replaced."""
    first: TraceFile = load_manifest()[0]
    mirror.corrupt.add(unquote(urlsplit(first.url(BASE_URL)).path))
    dest = tmp_path / "traces"
    code, _, err = _fetch(dest, mirror, tmp_path)
    assert code == 2
    assert "is not the listed file" in err and first.blob in err and "nothing kept" in err
    assert not (dest / first.local).exists()
    assert not (dest / (first.local + ".part")).exists()
    (dest / first.local).write_text("my own notes\n")
    mirror.corrupt.clear()
    code, _, err = _fetch(dest, mirror, tmp_path)
    assert code == 2
    assert "move it away to fetch it again" in err
    assert (dest / first.local).read_text() == "my own notes\n"


@pytest.mark.parametrize("case", ["source", "directory"])
def test_a_source_that_is_no_url_or_a_directory_that_cannot_be_made_is_one_error_line(
    tmp_path: Path, case: str
) -> None:
    """``--source`` that is no URL, or a DIRECTORY below a file, is an ``error:`` line and exit
    code 2, not a ValueError or NotADirectoryError traceback."""
    (tmp_path / "a-file").write_text("x")
    dest = tmp_path / ("traces" if case == "source" else "a-file/traces")
    source = "not a url" if case == "source" else "http://127.0.0.1:9"
    done = run_toolbudget(["traces", "fetch", str(dest), "--source", source], cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: ")
    assert "Traceback" not in done.stderr
