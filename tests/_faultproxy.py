"""An HTTP proxy on loopback that forwards to moto's S3 and injects the faults a test asks for.

The store's requests go over real HTTP through the proxy, so botocore sees real 503 responses,
real read timeouts and real 412s, and its own retry logic is what is tested.
"""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

__all__ = ["Fault", "FaultProxy", "fault_proxy"]

SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)
INTERNAL = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InternalError</Code>'
    b"<Message>We encountered an internal error. Please try again.</Message></Error>"
)


@dataclass
class Fault:
    """What to do to the next ``times`` requests that ``match`` (method, path).

    kind: ``slowdown`` answers 503 SlowDown without forwarding; ``internal`` answers 500
    InternalError without forwarding; ``delay`` waits ``seconds`` and then forwards (a read
    timeout for a client with a shorter one); ``lost_reply`` forwards the request (it lands) and
    answers 500, as when a response is lost on the way back; ``late_reply`` forwards it (it
    lands) and holds the answer ``seconds`` (a timeout after success, for a client with a
    shorter read timeout).
    """

    kind: str
    match: Callable[[str, str], bool]
    times: int = 1
    seconds: float = 0.0


@dataclass
class FaultProxy:
    """The running proxy: its endpoint, the faults still to inject, every request answered
    (method, path, status), every request as it arrived (method, path), and the most requests
    it has held at once (``peak``)."""

    endpoint: str
    faults: list[Fault] = field(default_factory=list)
    seen: list[tuple[str, str, int]] = field(default_factory=list)
    arrived: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    in_flight: int = 0
    peak: int = 0

    def enter(self) -> None:
        """Count a request in (see ``peak``)."""
        with self.lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)

    def leave(self) -> None:
        """Count a request out."""
        with self.lock:
            self.in_flight -= 1

    def take(self, method: str, path: str) -> Fault | None:
        """The fault to apply to this request (its count decremented), if any."""
        with self.lock:
            for fault in self.faults:
                if fault.times > 0 and fault.match(method, path):
                    fault.times -= 1
                    return fault
        return None


@contextmanager
def fault_proxy(upstream: str) -> Iterator[FaultProxy]:
    """Run a proxy on 127.0.0.1 (a free port) forwarding to ``upstream`` until the block ends."""
    target = urlsplit(upstream)
    state: list[FaultProxy] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            return

        def _handle(self) -> None:
            proxy = state[0]
            proxy.enter()
            try:
                self._forward(proxy)
            finally:
                proxy.leave()

        def _forward(self, proxy: FaultProxy) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            proxy.arrived.append((self.command, self.path))
            fault = proxy.take(self.command, self.path)
            if fault is not None and fault.kind in ("slowdown", "internal"):
                status, error = (503, SLOW_DOWN) if fault.kind == "slowdown" else (500, INTERNAL)
                self._answer(status, error, {"Content-Type": "application/xml"})
                proxy.seen.append((self.command, self.path, status))
                return
            if fault is not None and fault.kind == "delay":
                time.sleep(fault.seconds)
            conn = http.client.HTTPConnection(target.hostname or "", target.port, timeout=30)
            try:
                headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
                conn.request(self.command, self.path, body=body, headers=headers)
                reply = conn.getresponse()
                data = reply.read()
                status = reply.status
                reply_headers = {
                    k: v
                    for k, v in reply.getheaders()
                    if k.lower() not in ("connection", "transfer-encoding", "content-length")
                }
            finally:
                conn.close()
            if fault is not None and fault.kind == "late_reply":
                time.sleep(fault.seconds)
            if fault is not None and fault.kind == "lost_reply":
                proxy.seen.append((self.command, self.path, 500))
                self._answer(500, INTERNAL, {"Content-Type": "application/xml"})
                return
            proxy.seen.append((self.command, self.path, status))
            self._answer(status, data, reply_headers, head=self.command == "HEAD")

        def _answer(
            self, status: int, data: bytes, headers: dict[str, str], *, head: bool = False
        ) -> None:
            try:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                if not head or "Content-Length" not in headers:
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if not head:
                    self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                return  # the client gave up (its read timeout): what a delay fault is for

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    host, port = server.server_address[:2]
    state.append(FaultProxy(endpoint=f"http://{host!s}:{port}"))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state[0]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
