"""When a budgeted request's fsyncs go to the sync thread: once its body's last byte is written
upstream, never before (the thread's wake-up and its hold of the GIL landed on the request's way
out), and still when the request fails first; the request's bytes as httpx writes them."""

from __future__ import annotations

import asyncio
import socket
import threading
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from benchmarks.standin import Served
from budget.proxy import SESSION_HEADER, ProxySettings, create_app
from budget.proxy import _app as proxy_app
from budget.proxy._pool import Pool
from budget.proxy._upstream import Upstream
from tests.proxy._kit import BUDGET, anthropic_history, eventually

_HEADERS = {"content-type": "application/json", "x-api-key": "k", "anthropic-version": "v"}


async def _wire(content: bytes, written: Any) -> list[bytes]:
    """The bytes a loopback server receives for a POST of ``content`` sent through an
    :class:`Upstream` of its own, without ``written``, then with it."""
    got: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = bytearray()
        while not data.endswith(content):
            data.extend(await reader.read(1 << 16))
        got.append(bytes(data))
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/m?b=1"
    headers = [(b"content-type", b"application/json"), (b"x-api-key", b"k")]
    for told in (None, written):
        async with Upstream() as upstream:
            resp = await upstream.send(upstream.request("POST", url, headers, content, told))
            await resp.aread()
            await resp.aclose()
    server.close()
    await server.wait_closed()
    return got


def test_a_request_told_when_its_body_is_written_goes_out_as_the_same_bytes() -> None:
    """``written`` changes no byte of the request (its length is the header httpx puts last) and
    is called once the body was consumed whole, not before."""
    content = orjson.dumps({"messages": anthropic_history(3)})
    calls: list[int] = []
    plain, told = asyncio.run(_wire(content, lambda: calls.append(1)))
    assert told == plain and calls == [1]
    assert b"content-length: " in plain.lower() and b"chunked" not in plain.lower()

    async def consumed() -> list[int]:
        seen: list[int] = []
        req = Upstream().request("POST", "http://127.0.0.1:9/", [], content, lambda: seen.append(1))
        chunks = req.stream.__aiter__()  # type: ignore[union-attr]
        assert await anext(chunks) == content and seen == []
        with pytest.raises(StopAsyncIteration):
            await anext(chunks)
        return seen

    assert asyncio.run(consumed()) == [1]


class _Checking(httpx.AsyncBaseTransport):
    """An upstream that notes whether the fsyncs were handed off before it read the body, and
    after; then answers 200."""

    def __init__(self, handed: threading.Event, seen: list[tuple[bool, bool]]) -> None:
        self._handed, self._seen = handed, seen

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        before = self._handed.is_set()
        await request.aread()
        self._seen.append((before, self._handed.is_set()))
        answer = httpx.ByteStream(b'{"type":"message","content":[]}')
        return httpx.Response(200, headers={"content-type": "application/json"}, stream=answer)


def test_a_requests_fsyncs_are_handed_off_once_its_body_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the proxy, the sync thread gets the request's fsyncs only once the upstream has
    read the body (they went before the request was sent)."""
    handed = threading.Event()
    seen: list[tuple[bool, bool]] = []
    soon = Pool.sync_soon

    def noting(pool: Pool, slot: Any) -> Any:
        handed.set()
        return soon(pool, slot)

    monkeypatch.setattr(Pool, "sync_soon", noting)
    monkeypatch.setattr(proxy_app, "Upstream", lambda: Upstream(_Checking(handed, seen)))
    settings = ProxySettings(root=tmp_path / "s", budget=BUDGET)
    body = orjson.dumps({"model": "m", "messages": anthropic_history(2)})
    with Served(app := create_app(settings)) as proxy:
        answer = httpx.post(
            f"{proxy.url}/v1/messages", content=body, headers={**_HEADERS, SESSION_HEADER: "h"}
        )
        pool = app.state.proxy.pool
        assert eventually(lambda: all(s.busy == 0 for s in pool._slots.values()))
    assert answer.status_code == 200
    assert seen == [(False, True)]


def test_a_request_failing_before_its_body_is_written_still_hands_its_fsyncs_off(
    tmp_path: Path,
) -> None:
    """An upstream nothing listens on: the agent gets a 502, the session's fsyncs still go to the
    sync thread (the session's next request waits for them), and the session is let go."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{free.getsockname()[1]}"  # nothing listens once it is closed
    settings = ProxySettings(root=tmp_path / "s", anthropic_upstream=url, budget=BUDGET)
    body = orjson.dumps({"model": "m", "messages": anthropic_history(2)})
    with Served(app := create_app(settings)) as proxy:
        answer = httpx.post(
            f"{proxy.url}/v1/messages", content=body, headers={**_HEADERS, SESSION_HEADER: "f"}
        )
        pool = app.state.proxy.pool
        (slot,) = pool._slots.values()
        assert slot.syncing is not None
        assert eventually(lambda: slot.busy == 0 and slot.syncing.done())
    assert answer.status_code == 502
