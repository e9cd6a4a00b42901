"""The upstream leg: each request sent through httpx's connection pool (its transport), never
through an ``httpx.AsyncClient``.

A client adds, per request, what a proxy must not do: a cookie jar shared by every agent behind
the proxy (an upstream's ``Set-Cookie``, Cloudflare's ``__cf_bm`` on the model APIs, went back
with every later request, another agent's too, where the contract forwards each request's headers
as its agent sent them), auth and redirect handling, event hooks. The transport sends the
request as built, maps httpcore's errors to httpx's (``httpx.HTTPError`` as before) and keeps
the connections alive; its response streams the same raw bytes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import Final, Self

import httpx

__all__ = ["Upstream"]

TIMEOUT: Final = httpx.Timeout(600.0, connect=30.0)
"""The SDKs' own request timeout, 10 minutes (anthropic/_constants.py, openai/_constants.py),
between two bytes of a response: a long answer streams for longer than that in total."""
URLS_KEPT: Final = 64
"""Upstream URLs kept parsed (a proxy sends to a handful: each API's path, a few queries)."""


class Upstream:
    """The connections to the model APIs, and how a request is sent on one."""

    def __init__(self, transport: httpx.AsyncBaseTransport | None = None) -> None:
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=64)
        # trust_env=False: the proxy never takes a proxy or CA settings from its environment.
        self._transport = transport or httpx.AsyncHTTPTransport(limits=limits, trust_env=False)
        self._timeout = TIMEOUT.as_dict()
        self._urls: dict[str, httpx.URL] = {}

    def request(
        self,
        method: str,
        url: str,
        headers: list[tuple[bytes, bytes]],
        content: bytes | AsyncIterator[bytes],
        written: Callable[[], None] | None = None,
    ) -> httpx.Request:
        """The request to send: ``content`` bytes (httpx sets their length) or an async iterator
        of bytes (streamed, chunked unless ``headers`` carry its length). Raises as httpx does on
        what it cannot write (an invalid URL): nothing is sent then.

        ``written``, with bytes: called once their last byte is written to the connection (not
        if the request fails before). The request's bytes are the same: the length is the header
        httpx would have put last."""
        if written is not None and isinstance(content, bytes):
            headers = [*headers, (b"Content-Length", str(len(content)).encode())]
            content = _then(content, written)
        return httpx.Request(
            method,
            self._url(url),
            headers=headers,
            content=content,
            extensions={"timeout": self._timeout},
        )

    def _url(self, url: str) -> httpx.URL:
        """``url`` parsed once: httpx's parse is most of a request's making (~20 of ~40 µs,
        several times that after an idle pause), and the proxy sends to the same few URLs."""
        parsed = self._urls.get(url)
        if parsed is None:
            parsed = httpx.URL(url)  # raises on an invalid URL, as the request would
            if len(self._urls) >= URLS_KEPT:
                self._urls.clear()
            self._urls[url] = parsed
        return parsed

    async def send(self, request: httpx.Request) -> httpx.Response:
        """The upstream's response, its body not read yet (``aiter_raw`` it, then ``aclose``)."""
        response = await self._transport.handle_async_request(request)
        response.request = request
        return response

    async def __aenter__(self) -> Self:
        await self._transport.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc: BaseException | None = None,
        tb: TracebackType | None = None,
    ) -> None:
        await self._transport.__aexit__(exc_type, exc, tb)


async def _then(content: bytes, written: Callable[[], None]) -> AsyncIterator[bytes]:
    """``content`` in one chunk, then ``written`` called: httpcore asks for the next chunk once
    it wrote this one."""
    yield content
    written()
