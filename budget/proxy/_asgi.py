"""The proxy's ASGI plumbing, lean on the request's path: the app hands each HTTP request
straight to the proxy's handler, and a streamed answer goes out from the request's own task.

Starlette's app runs every request through its middleware and router (a regex match, wrappers
for errors the handler never raises); its ``StreamingResponse`` (under uvicorn, which speaks ASGI
2.3) streams from a second task of an anyio task group and listens for the agent hanging up in
the first, so the answer's headers and first bytes went out only at the event loop's next turn,
after the group and its cancel scope were made. Together ~0.15 ms of the first streamed byte
after an idle pause (issue 33). Starlette still runs the lifespan and answers what the proxy
does not serve (another method: 405).

The agent hanging up is listened for from the moment its body is read, while the upstream's
answer is awaited (:class:`Awaited`) as while it is relayed (:class:`Relayed`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from types import TracebackType

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from budget.proxy._routes import METHODS, NOT_FORWARDED, NOT_FORWARDED_UNTOUCHED, forwarded

__all__ = ["Awaited", "ProxyApp", "Relayed", "chained", "then_set", "untouched"]


class ProxyApp(Starlette):
    """Starlette, but for the HTTP requests the proxy serves: those go to ``handle`` at once."""

    def __init__(self, handle: Callable[[Request], Awaitable[Response]], **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._handle = handle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] not in METHODS
            or not scope["path"].startswith("/")  # "OPTIONS *": the router's 404, as before
        ):
            await super().__call__(scope, receive, send)
            return
        scope["app"] = self
        response = await self._handle(Request(scope, receive, send))
        await response(scope, receive, send)


class Relayed(StreamingResponse):
    """A ``StreamingResponse`` streamed from the request's own task inside an :class:`Awaited`,
    whose listener cancels it when the agent hangs up: the relay ends at its ``yield`` or its
    read as before (:meth:`budget.proxy._app.Proxy._relay`)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with Awaited(receive):
            await self.stream_response(send)


class Awaited:
    """The upstream's answer awaited (``async with``) while a plain asyncio task listens for the
    agent hanging up (:class:`Relayed` streams the answer in one too): the agent gone, the wait is
    cancelled, which drops the upstream's request (a non-streamed answer takes minutes, billed
    and held until it came, for no one) and ends the block; ``hung_up`` says so.

    The listener starts once ``body_sent`` is set (at once without it): until then the agent's
    messages are its body's, which the body's own stream reads."""

    def __init__(self, receive: Receive, body_sent: asyncio.Event | None = None) -> None:
        self._receive = receive
        self._body_sent = body_sent
        self._waiting = True
        self.hung_up = False
        self._listener: asyncio.Task[None] | None = None
        self._cancelling = 0

    async def _listen(self, waiter: asyncio.Task[object]) -> None:
        if self._body_sent is not None:
            await self._body_sent.wait()
        while (await self._receive())["type"] != "http.disconnect":
            pass
        # This task runs only while the waiter is at an await: the cancellation lands there,
        # inside the block, never after it.
        if self._waiting:
            self.hung_up = True
            waiter.cancel()

    async def __aenter__(self) -> Awaited:
        waiter = asyncio.current_task()
        assert waiter is not None  # an ASGI app runs in a task
        self._cancelling = waiter.cancelling()
        self._listener = asyncio.get_running_loop().create_task(self._listen(waiter))
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        self._waiting = False
        if self._listener is not None:
            self._listener.cancel()
        if not self.hung_up or exc_type is not asyncio.CancelledError:
            return False  # the server's own cancellation (shutting down) is not ours to absorb
        waiter = asyncio.current_task()
        assert waiter is not None
        # Our own cancellation, done with: the request ends normally, unless the server's
        # landed with it (asyncio.timeout's rule: only a count back to where it was absorbs).
        return waiter.uncancel() <= self._cancelling


async def then_set(body: AsyncIterator[bytes], sent: asyncio.Event) -> AsyncIterator[bytes]:
    """``body``'s chunks, then ``sent`` set: the agent's body is all read."""
    async for chunk in body:
        yield chunk
    sent.set()


def untouched(
    request: Request,
) -> tuple[list[tuple[bytes, bytes]], bytes | AsyncIterator[bytes], Awaited]:
    """The headers and body of a request forwarded untouched, framed as the agent framed it: a
    body of a known length streamed with that length, a chunked one chunked, none as none (a GET
    or HEAD with a body, even an empty chunked one, is refused by some servers and gateways);
    and its wait for the answer, listening for the agent hanging up once the body is sent."""
    chunked = "transfer-encoding" in request.headers
    # Chunked: its Content-Length, if it sent one too, is not its length (RFC 9112 §6.3).
    headers = forwarded(request.headers.raw, NOT_FORWARDED if chunked else NOT_FORWARDED_UNTOUCHED)
    if not chunked and "content-length" not in request.headers:
        return headers, b"", Awaited(request.receive)
    sent = asyncio.Event()
    return headers, then_set(request.stream(), sent), Awaited(request.receive, sent)


async def chained(head: list[bytes], rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The chunks read already, then the rest of the stream."""
    for chunk in head:
        yield chunk
    async for chunk in rest:
        yield chunk
