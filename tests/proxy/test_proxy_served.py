"""``toolbudget proxy`` as served: the answer's headers are the upstream's, none of the ASGI
server's own added."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import httpx

from tests.proxy._kit import run_proxy

_ANSWER = (
    b"HTTP/1.1 200 OK\r\n"
    b"content-type: application/json\r\n"
    b"server: upstream-x\r\n"
    b"date: Mon, 01 Jan 2024 00:00:00 GMT\r\n"
    b"content-length: 2\r\n"
    b"connection: close\r\n"
    b"\r\n{}"
)


def _upstream() -> tuple[socket.socket, str]:
    """A loopback upstream answering each request with :data:`_ANSWER`, its own server and
    date headers, byte for byte (no ASGI server of its own adds any)."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # closed: the test is over
            with conn:
                got = b""
                while b"\r\n\r\n" not in got and (chunk := conn.recv(65536)):
                    got += chunk
                conn.sendall(_ANSWER)

    threading.Thread(target=serve, daemon=True).start()
    return listener, f"http://127.0.0.1:{listener.getsockname()[1]}"


def test_the_answers_server_and_date_headers_are_the_upstreams_alone(tmp_path: Path) -> None:
    """An answer relayed by ``toolbudget proxy`` carries the upstream's ``server`` and ``date``
    once each, as sent: uvicorn added its own beside them (``server: upstream-x, uvicorn``,
    two dates), where the proxy promises the upstream's headers."""
    listener, upstream = _upstream()
    child, url = run_proxy(tmp_path / "sessions", upstream)
    try:
        body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
        headers = {"content-type": "application/json", "anthropic-version": "v"}
        with httpx.Client(timeout=30) as client:
            answers = [
                client.get(f"{url}/v1/models", headers=headers),
                client.post(f"{url}/v1/messages", content=body, headers=headers),
            ]
    finally:
        child.terminate()
        child.wait(10)
        listener.close()
    for answer in answers:
        assert answer.status_code == 200
        assert answer.headers.get_list("server") == ["upstream-x"]
        assert answer.headers.get_list("date") == ["Mon, 01 Jan 2024 00:00:00 GMT"]
