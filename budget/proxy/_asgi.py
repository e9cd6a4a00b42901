"""The proxy's ASGI plumbing, lean on the request's path: the app hands each HTTP request
straight to the proxy's handler, and a streamed answer goes out from the request's own task.

Starlette's app runs every request through its middleware and router (a regex match, wrappers
for errors the handler never raises); its ``StreamingResponse`` (under uvicorn, which speaks ASGI
2.3) streams from a second task of an anyio task group and listens for the agent hanging up in
the first, so the answer's headers and first bytes went out only at the event loop's next turn,
after the group and its cancel scope were made. Together ~0.15 ms of the first streamed byte
after an idle pause (issue 33). Starlette still runs the lifespan and answers what the proxy
does not serve (another method: 405).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from budget.proxy._routes import METHODS

__all__ = ["ProxyApp", "Relayed"]


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
    """A ``StreamingResponse`` streamed from the request's own task, while a plain asyncio task
    listens for the agent hanging up and cancels it then: the relay ends at its ``yield`` or its
    read as before (:meth:`budget.proxy._app.Proxy._relay`)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        relay = asyncio.current_task()
        assert relay is not None  # an ASGI app runs in a task
        state = {"streaming": True, "hung_up": False}

        async def listen() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            # This task runs only while the relay waits at an await: the cancellation lands
            # there, inside stream_response, never after it.
            if state["streaming"]:
                state["hung_up"] = True
                relay.cancel()

        listener = asyncio.get_running_loop().create_task(listen())
        try:
            await self.stream_response(send)
        except asyncio.CancelledError:
            if not state["hung_up"]:
                raise  # the server cancelled the request (shutting down): not ours to absorb
            relay.uncancel()  # our own cancellation, done with: the request ends normally
        finally:
            state["streaming"] = False
            listener.cancel()
