"""While the upstream has not answered yet: an agent hanging up then ends the upstream's request
too, and lets its session go."""

from __future__ import annotations

import asyncio
import socket
import threading
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import structlog
from starlette.types import Receive, Scope, Send

from benchmarks.standin import Served
from budget.proxy import ProxySettings, create_app
from budget.proxy._asgi import Awaited
from tests.proxy._kit import BUDGET, eventually

_ANTHROPIC = "content-type: application/json\r\nx-api-key: k\r\nanthropic-version: v\r\n"


class _Silent:
    """An upstream that reads each request and never answers: it only notes the requests it got
    and those whose connection the proxy closed."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.dropped: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        self.started.append(scope["path"])
        while (await receive())["type"] != "http.disconnect":
            pass
        self.dropped.append(scope["path"])


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/messages", {"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
        ("POST", "/v1/messages/count_tokens", {"model": "m", "messages": []}),
        ("GET", "/v1/models", None),
    ],
)
def test_an_agent_hanging_up_before_the_answer_ends_the_upstream_request(
    tmp_path: Path, method: str, path: str, body: Any, structlog_defaults: None
) -> None:
    """The agent hangs up while the upstream is still working on its answer (a long
    non-streamed one, slow headers): the proxy drops its upstream request at once, where it
    waited up to ten minutes for an answer no one reads, and the session is not left busy."""
    upstream = _Silent()
    raw = b"" if body is None else orjson.dumps(body)
    head = f"{method} {path} HTTP/1.1\r\nhost: x\r\n{_ANTHROPIC}content-length: {len(raw)}\r\n"
    with Served(upstream) as up:
        settings = ProxySettings(
            root=tmp_path / "s", anthropic_upstream=up.url, openai_upstream=up.url, budget=BUDGET
        )
        app = create_app(settings)
        with structlog.testing.capture_logs() as events, Served(app) as proxy:
            with socket.create_connection(("127.0.0.1", proxy.port)) as sock:
                sock.sendall(head.encode() + b"\r\n" + raw)
                assert eventually(lambda: upstream.started == [path])
            assert eventually(lambda: upstream.dropped == [path], 5.0)
            pool = app.state.proxy.pool
            assert eventually(lambda: all(s.busy == 0 for s in pool._slots.values()))
            cuts = eventually(
                lambda: [e for e in events if e["event"] == "toolbudget.proxy.stream_cut"]
            )
    assert [e["reason"] for e in cuts] == ["client disconnected"]
    assert [e.get("session") is not None for e in cuts] == [path == "/v1/messages"]
    assert not [e for e in events if e["event"] == "toolbudget.proxy.upstream_failed"]


def test_a_request_answered_in_time_is_not_cut(tmp_path: Path) -> None:
    """An agent that keeps its connection gets the answer, however the listening for its
    hanging up goes (a body-less GET, whose only message is its empty body)."""
    hold = threading.Event()

    async def answer(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        await receive()
        hold.wait(0.3)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    with Served(answer) as up:
        settings = ProxySettings(
            root=tmp_path / "s", anthropic_upstream=up.url, openai_upstream=up.url
        )
        with Served(create_app(settings)) as proxy:
            got = httpx.get(f"{proxy.url}/v1/models", headers={"anthropic-version": "v"})
    assert (got.status_code, got.content) == (200, b"{}")


def test_a_shutdown_landing_with_the_hang_up_still_cancels_the_request() -> None:
    """The server cancels the request's task (shutting down) as the agent hangs up: the
    wait absorbs only its own cancellation, so the task still ends cancelled, where both were
    absorbed and the request went on."""

    async def main() -> str:
        task: asyncio.Task[str] | None = None

        async def receive() -> dict[str, Any]:
            assert task is not None
            task.cancel()  # the server's own, landing with the disconnect
            return {"type": "http.disconnect"}

        async def request() -> str:
            async with Awaited(receive) as waiting:
                await asyncio.Event().wait()
            return "went on" if waiting.hung_up else "answered"

        task = asyncio.get_running_loop().create_task(request())
        try:
            return await task
        except asyncio.CancelledError:
            return "cancelled"

    assert asyncio.run(main()) == "cancelled"
