"""A refused request's answer: read only as far as finding a prompt-too-long needs, and always
passed back to the agent whole and unchanged."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, MutableMapping
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import structlog
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from benchmarks.standin import Served
from budget.proxy import SESSION_HEADER, ProxySettings, create_app
from spill._readonly import ReadOnlyStore
from tests.proxy._kit import BUDGET, anthropic_history, eventually

_HEADERS = {
    "content-type": "application/json",
    "x-api-key": "k",
    "anthropic-version": "v",
    SESSION_HEADER: "refused",
}
_HEAD = b'{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: '
_BULK = b"x" * (1 << 20)
_TAIL = b'"}}'


def _upstream(release: threading.Event, *, broken: bool = False) -> Starlette:
    """Answers 400 with an error body of over 1 MiB: its first MiB at once, the rest once
    ``release`` is set; or, when ``broken``, its first bytes, then the connection dropped."""

    async def answer(request: Request) -> Response:
        await request.body()

        async def body() -> AsyncIterator[bytes]:
            if broken:
                yield _HEAD
                raise RuntimeError("the upstream goes away mid-body")
            yield _HEAD + _BULK
            while not release.is_set():
                await asyncio.sleep(0.01)
            yield _TAIL

        return StreamingResponse(body(), status_code=400, media_type="application/json")

    return Starlette(routes=[Route("/v1/messages", answer, methods=["POST"])])


def _proxy_to(up: Served, tmp_path: Path) -> Any:
    settings = ProxySettings(
        root=tmp_path / "s", anthropic_upstream=up.url, openai_upstream=up.url, budget=BUDGET
    )
    return create_app(settings)


def _events(events: list[MutableMapping[str, Any]], name: str) -> list[Any]:
    return [e.get("reason") for e in events if e["event"] == f"toolbudget.proxy.{name}"]


def test_a_large_error_body_is_relayed_as_it_comes_not_read_whole_first(
    tmp_path: Path, structlog_defaults: None
) -> None:
    """The agent gets the 400's status and first bytes while the upstream still holds the rest
    of its 1 MiB body back (the proxy reads a bounded prefix, not the whole), then every byte
    as sent; so long a body is not taken for an overflow."""
    release = threading.Event()
    body = orjson.dumps({"model": "m", "messages": anthropic_history(1)})
    with (
        Served(_upstream(release)) as up,
        Served(app := _proxy_to(up, tmp_path)) as proxy,
        structlog.testing.capture_logs() as events,
        httpx.Client(timeout=httpx.Timeout(10.0)) as client,
    ):
        try:
            with client.stream(
                "POST", f"{proxy.url}/v1/messages", content=body, headers=_HEADERS
            ) as answer:
                status = answer.status_code  # before the upstream sent its body's end
                release.set()
                received = answer.read()
        finally:
            release.set()
        pool = app.state.proxy.pool
        assert eventually(lambda: all(s.busy == 0 for s in pool._slots.values()))
    assert status == 400
    assert received == _HEAD + _BULK + _TAIL
    assert _events(events, "usage_unread") == ["error body too large to read"]
    assert _events(events, "overflow") == []
    with ReadOnlyStore(tmp_path / "s" / "anthropic-h-refused") as store:
        assert [r for r in store.read_log() if r.get("t") == "ovf"] == []


def test_an_error_body_broken_off_is_a_502_and_lets_the_session_go(tmp_path: Path) -> None:
    """The upstream drops the connection inside a refused request's short error body: the agent
    gets a 502 and the session is not left busy (it was, and never closed as idle again)."""
    body = orjson.dumps({"model": "m", "messages": anthropic_history(1)})
    with (
        Served(_upstream(threading.Event(), broken=True)) as up,
        Served(app := _proxy_to(up, tmp_path)) as proxy,
    ):
        answer = httpx.post(f"{proxy.url}/v1/messages", content=body, headers=_HEADERS)
        pool = app.state.proxy.pool
        assert len(pool) == 1
        assert eventually(lambda: all(s.busy == 0 for s in pool._slots.values()))
    assert answer.status_code == 502


_MARKER = "sk-ant-api03-ECHOEDSECRET"
_QUOTING = orjson.dumps(
    {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": f"prompt is too long: 180000 tokens > 150000 maximum; request: {_MARKER}",
        },
    }
)


def test_a_prompt_too_long_body_quoting_a_secret_is_in_no_event_nor_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An upstream's prompt-too-long body quoting a secret goes back to the agent as sent, the
    session learns the window it states, and no event (structlog or logging) nor file the proxy
    wrote holds the secret."""

    async def refuse(request: Request) -> Response:
        await request.body()
        return Response(_QUOTING, status_code=400, media_type="application/json")

    up_app = Starlette(routes=[Route("/v1/messages", refuse, methods=["POST"])])
    body = orjson.dumps({"model": "claude-sonnet-4-5", "messages": anthropic_history(1)})
    caplog.set_level(logging.DEBUG)
    with (
        Served(up_app) as up,
        Served(app := _proxy_to(up, tmp_path)) as proxy,
        structlog.testing.capture_logs() as events,
    ):
        answer = httpx.post(f"{proxy.url}/v1/messages", content=body, headers=_HEADERS)
        pool = app.state.proxy.pool
        assert eventually(lambda: all(s.busy == 0 for s in pool._slots.values()))
    assert (answer.status_code, answer.content) == (400, _QUOTING)
    [overflow] = [e for e in events if e["event"] == "toolbudget.session.context_overflow"]
    assert (overflow["count"], overflow["limit"], overflow["error"]) == (1, 150_000, "dict")
    assert _events(events, "overflow") == [None]
    logged = repr(events) + caplog.text
    assert _MARKER not in logged and "prompt is too long" not in logged
    written = [p for p in (tmp_path / "s").rglob("*") if p.is_file()]
    assert written, "the proxy wrote no session file at all"
    assert not any(_MARKER.encode() in p.read_bytes() for p in written)
    with ReadOnlyStore(tmp_path / "s" / "anthropic-h-refused") as store:
        [record] = [r for r in store.read_log() if r.get("t") == "ovf"]
    assert record["w"] == 150_000  # the stated window, believed from now on
