"""Connection-level headers (RFC 9110 §7.6.1): those a request's or a response's ``Connection``
header names go no further than the proxy, as the fixed hop-by-hop ones do; every other header
passes as sent."""

from __future__ import annotations

from pathlib import Path

import httpx
import orjson
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from benchmarks.standin import Served
from budget.proxy import ProxySettings, create_app
from budget.proxy._routes import HOP_BY_HOP, NOT_FORWARDED, forwarded
from tests.proxy._kit import BUDGET, Stack, anthropic_history

_ANTHROPIC = {"content-type": "application/json", "x-api-key": "k", "anthropic-version": "v"}


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/models"])
def test_headers_a_requests_connection_header_names_do_not_reach_the_upstream(
    stack: Stack, path: str
) -> None:
    """``Connection: keep-alive, X-Hop`` and a second ``Connection: x-two`` line keep ``x-hop``
    and ``x-two`` from the upstream, on a budgeted path and an untouched one, while the other
    headers arrive as sent."""
    body = orjson.dumps({"model": "m", "messages": anthropic_history(1)})
    headers = [
        *_ANTHROPIC.items(),
        ("connection", "keep-alive, X-Hop"),
        ("connection", "x-two"),
        ("x-hop", "drop-me"),
        ("x-two", "drop-me-too"),
        ("x-kept", "keep-me"),
    ]
    with httpx.Client() as client:
        answer = client.post(stack.url + path, content=body, headers=headers)
    assert answer.status_code == 200
    [got] = stack.upstream.received
    names = {k.lower() for k, _ in got.headers}
    assert not names & {"x-hop", "x-two", "connection"}
    assert got.header("x-kept") == "keep-me" and got.header("x-api-key") == "k"


def _answering(status: int) -> Starlette:
    """An upstream answering every request with ``status`` and a ``Connection`` header naming
    ``x-resp-hop``."""

    async def answer(request: Request) -> Response:
        await request.body()
        headers = {"connection": "X-Resp-Hop", "x-resp-hop": "drop-me", "x-resp-kept": "keep-me"}
        return Response(b"{}", status_code=status, headers=headers, media_type="application/json")

    return Starlette(routes=[Route("/{path:path}", answer, methods=["GET", "POST"])])


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("GET", "/v1/models", 200), ("POST", "/v1/messages", 200), ("POST", "/v1/messages", 400)],
    ids=["untouched", "budgeted", "refused"],
)
def test_headers_a_responses_connection_header_names_do_not_reach_the_agent(
    tmp_path: Path, method: str, path: str, status: int
) -> None:
    """The upstream's ``Connection: X-Resp-Hop`` keeps ``x-resp-hop`` from the agent on an
    untouched, a budgeted and a refused request, while its other headers come back as sent."""
    body = orjson.dumps({"model": "m", "messages": anthropic_history(1)})
    with Served(_answering(status)) as up:
        settings = ProxySettings(
            root=tmp_path / "s", anthropic_upstream=up.url, openai_upstream=up.url, budget=BUDGET
        )
        direct = httpx.request(method, up.url + path, content=body, headers=_ANTHROPIC)
        with Served(create_app(settings)) as proxy:
            answer = httpx.request(method, proxy.url + path, content=body, headers=_ANTHROPIC)
    assert direct.headers.get("x-resp-hop") == "drop-me"  # the upstream did send it
    assert answer.status_code == status and answer.content == b"{}"
    assert "x-resp-hop" not in answer.headers
    assert answer.headers.get("x-resp-kept") == "keep-me"


def test_a_message_without_a_connection_header_loses_only_the_fixed_ones() -> None:
    """Without ``Connection``, only the fixed list is dropped, names matched in any case and
    every kept header left as the very bytes it came as."""
    raw = [
        (b"Host", b"h"),
        (b"X-Title", "café".encode()),
        (b"TE", b"trailers"),
        (b"x-api-key", b"k"),
    ]
    assert forwarded(raw, NOT_FORWARDED) == [(b"X-Title", "café".encode()), (b"x-api-key", b"k")]
    assert forwarded(raw, HOP_BY_HOP) == [raw[0], raw[1], raw[3]]
