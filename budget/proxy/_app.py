"""The proxy: an ASGI app (Starlette) forwarding every request to the model API with httpx.

``POST`` to an Anthropic Messages, Chat Completions or Responses path is budgeted: the body's
``messages`` (``input`` for Responses) go through the conversation's session's ``prepare`` and
the request copy goes upstream in their place; nothing else of the body or the headers is
changed. Every other path and method is forwarded as it came, its body streamed.

The response always comes back as the upstream sent it: status, headers (hop-by-hop ones aside,
and those its ``Connection`` header names, as any HTTP proxy does: RFC 9110 §7.6.1), and every
raw byte as it arrives, never buffered nor decoded; a :class:`budget.proxy._tap.Tap` reads its
usage on the side.

Whatever goes wrong on the proxy's side (a body that is not JSON, a toolbudget error, a session
that cannot be opened) sends the original bytes upstream, with a ``toolbudget.proxy.passthrough``
event naming the reason: the agent never sees the proxy fail. Events never carry a header, a
body or an exception's message (which may quote the body): only names, counts and error classes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, Final

import httpx
from anyio import to_thread
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from budget._log import get_logger
from budget.proxy._asgi import Awaited, ProxyApp, Relayed, chained, untouched
from budget.proxy._encode import NumberRewritten
from budget.proxy._incremental import INLINE_BYTES, Bodies, Parsed
from budget.proxy._limits import open_sessions
from budget.proxy._pool import Pool, Slot
from budget.proxy._request import copy_body, parse_body
from budget.proxy._routes import (
    HOP_BY_HOP,
    METHODS,
    NOT_FORWARDED,
    OVERFLOW_STATUSES,
    Api,
    budgeted_api,
    forwarded,
    gateway_error,
)
from budget.proxy._settings import ProxySettings
from budget.proxy._tap import Tap, understood
from budget.proxy._upstream import Upstream
from budget.tokens._overflow import is_context_overflow

__all__ = ["ERROR_READ_BYTES", "create_app"]

ERROR_READ_BYTES: Final = 64 << 10
"""How much of a refused request's answer (400, 413) is read to find a prompt-too-long in it before
it goes back: Anthropic's and OpenAI's are a few hundred bytes, and an upstream's error body may
be anything (the proxy never holds one whole)."""


class Proxy:
    """What one running proxy holds: the settings, the upstream client, the sessions."""

    def __init__(self, settings: ProxySettings, clock: Callable[[], float]) -> None:
        self.settings = settings
        self._log = get_logger("toolbudget")
        # No more sessions open than the open-file limit has room for (budget.proxy._limits).
        max_open, soft, hard = open_sessions(settings.max_open)
        if max_open < settings.max_open:
            self._log.warning("toolbudget.proxy.fd_limit", soft=soft, hard=hard, max_open=max_open)
        self.pool = Pool(
            settings.root,
            settings.budget,
            max_open=max_open,
            idle_close_s=settings.idle_close_s,
        )
        self._clock = clock
        self._tasks: set[asyncio.Task[None]] = set()
        # The conversations' last bodies, to parse each request against (budget.proxy._incremental).
        self.bodies = Bodies(idle_s=settings.idle_close_s)
        self.working = 0
        """Requests being budgeted and responses being relayed (see :meth:`_alone`)."""
        self.upstream: Upstream | None = None

    @asynccontextmanager
    async def lifespan(self, _app: Starlette) -> AsyncIterator[None]:
        async with Upstream() as upstream:
            self.upstream = upstream
            try:
                yield
            finally:
                if self._tasks:
                    await asyncio.gather(*self._tasks, return_exceptions=True)
                await self.pool.close()

    def _upstream(self, api: Api | None, request: Request) -> tuple[str, str]:
        """The URL to send ``request`` to, and its provider (whose error shape a 502 takes)."""
        if api is not None:
            provider = api.provider
        else:
            # Another path (models, count_tokens, files...): Anthropic's SDKs and Claude Code
            # always send anthropic-version; OpenAI's never do.
            anthropic = "anthropic-version" in request.headers or "x-api-key" in request.headers
            provider = "anthropic" if anthropic else "openai"
        base = (
            self.settings.anthropic_upstream
            if provider == "anthropic"
            else self.settings.openai_upstream
        )
        # The path as the client wrote it: scope["path"] is percent-decoded, and a decoded %2F
        # would send another path upstream (an OpenRouter model id "org%2Fmodel", a file id).
        raw_path = request.scope.get("raw_path")
        path = raw_path.decode("latin-1") if raw_path else request.url.path
        query = request.url.query
        return base.rstrip("/") + path + (f"?{query}" if query else ""), provider

    async def handle(self, request: Request) -> Response:
        api = budgeted_api(request.method, request.url.path)
        url, provider = self._upstream(api, request)
        # The raw bytes: a value with a non-ASCII byte (a UTF-8 app name in x-title) is forwarded
        # as it came, where a str value would make httpx refuse the request (it encodes ASCII).
        if api is None:
            headers, body, waiting = untouched(request)
            return await self._forward(request.method, url, headers, body, None, provider, waiting)
        headers = forwarded(request.headers.raw, NOT_FORWARDED)
        try:
            raw = await request.body()
        except ClientDisconnect:
            return self._hung_up()
        self.working += 1
        try:
            content, slot = await self._budget(api, request.headers, raw)
        finally:
            self.working -= 1
        # The session is _forward's to release from here on, whatever happens.
        waiting = Awaited(request.receive)
        return await self._forward(request.method, url, headers, content, slot, provider, waiting)

    def _passthrough(self, reason: str, api: Api, **fields: Any) -> None:
        self._log.warning("toolbudget.proxy.passthrough", reason=reason, api=api.format, **fields)

    async def _budget(
        self, api: Api, headers: Mapping[str, str], raw: bytes
    ) -> tuple[bytes, Slot | None]:
        """The body to send upstream (the request copy, or ``raw`` itself) and its session.

        ``prepare`` and encoding run in a worker thread while the proxy has other work in
        flight, and so does parsing a body that does not go on from its conversation's last
        one: a long conversation's body takes milliseconds, during which the event loop goes on
        relaying other sessions' streams. Alone, the proxy runs them in the event loop.
        """
        if headers.get("content-encoding", "identity").lower() != "identity":
            self._passthrough("encoded body", api)
            return raw, None
        try:
            # A body going on from its conversation's last one is parsed here (its new bytes cost
            # less than a hop to a worker thread); a long one (a first body) in a worker thread.
            at_most = None if self._alone() else INLINE_BYTES
            parsed = parse_body(self.bodies, api, headers, raw, at_most=at_most)
            if parsed is None:
                parsed = await to_thread.run_sync(parse_body, self.bodies, api, dict(headers), raw)
        except Exception as exc:
            # JSON nested deeper than the session key's hashing goes (orjson encodes 254 levels,
            # Python recurses ~1,000), or any other failure to key the conversation.
            self._passthrough("body not understood", api, error=type(exc).__name__)
            return raw, None
        assert parsed is not None  # no limit in a worker thread
        if isinstance(parsed, str):
            self._passthrough(parsed, api)
            return raw, None
        body, history, key = parsed.body, parsed.history, parsed.key[1] if parsed.key else ""
        assert history is not None  # parse_body's answer has its history
        try:
            slot = await self.pool.get(key, api.format, body.get("model"))
        except Exception as exc:
            self._passthrough("session unavailable", api, session=key, error=type(exc).__name__)
            return raw, None
        try:
            out = await self._prepare(slot, api, parsed, history, raw)
        except NumberRewritten:  # a replaced message holds a number orjson would write otherwise
            self.pool.release(slot)
            self._passthrough("number not re-encodable", api, session=key)
            return raw, None
        except Exception as exc:
            self.pool.release(slot)
            self._passthrough("prepare failed", api, session=key, error=type(exc).__name__)
            return raw, None
        return out, slot

    async def _prepare(
        self, slot: Slot, api: Api, parsed: Parsed, history: list[Any], raw: bytes
    ) -> bytes:
        started = time.perf_counter()
        async with slot.lock:
            # The last request's fsyncs: awaited here, not waited for in copy_body.
            syncing = slot.syncing
            if syncing is not None and not syncing.done():
                await asyncio.wait((syncing,))
            self.pool.save_usage(slot)  # the last answer's, if its fsync's end has not yet
            work = partial(copy_body, slot, parsed, history, raw, self._clock())
            out, report = work() if self._alone() else await to_thread.run_sync(work)
        self._log.info(
            "toolbudget.proxy.prepared",
            session=slot.key,
            api=api.format,
            results=report.results,
            spilled=report.spilled,
            trimmed=report.trimmed,
            chars_before=report.chars_before,
            chars_after=report.chars_after,
            ms=round((time.perf_counter() - started) * 1000, 2),
        )
        return out

    async def _forward(
        self,
        method: str,
        url: str,
        headers: list[tuple[bytes, bytes]],
        content: bytes | AsyncIterator[bytes],
        slot: Slot | None,
        provider: str,
        waiting: Awaited,
    ) -> Response:
        assert self.upstream is not None, "the proxy's lifespan has not started"
        sync = None if slot is None else self.pool.sync_once(slot, self._spawn)
        try:
            req = self.upstream.request(method, url, headers, content, sync)
        except Exception as exc:  # a request httpx cannot write (an invalid URL): nothing sent
            if slot is not None:
                self.pool.release(slot)
            self._log.error("toolbudget.proxy.upstream_failed", error=type(exc).__name__)
            return gateway_error(provider, type(exc).__name__, url)
        resp: httpx.Response | None = None
        try:
            async with waiting:
                resp = await self.upstream.send(req)
        except BaseException as exc:
            if slot is not None:
                self.pool.release(slot)
            if isinstance(exc, ClientDisconnect):  # mid-body: the upstream had a part of it
                return self._hung_up()
            if not isinstance(exc, httpx.HTTPError):
                raise
            self._log.error("toolbudget.proxy.upstream_failed", error=type(exc).__name__)
            return gateway_error(provider, type(exc).__name__, url)
        finally:
            if sync is not None:
                sync()  # no-op once the body's end handed them off; else the request failed
        if resp is None:  # the agent hung up first: its upstream request is dropped
            if slot is not None:
                self.pool.release(slot)
            return self._hung_up(slot)
        headers_out = forwarded(resp.headers.raw, HOP_BY_HOP)
        if slot is None:
            out: Response = Relayed(self._relay(resp, None, None), resp.status_code)
        elif resp.status_code in OVERFLOW_STATUSES:
            try:
                out = await self._refused(resp, slot)
            except httpx.HTTPError as exc:  # the error body broke off: as if unreachable
                self._log.error("toolbudget.proxy.upstream_failed", error=type(exc).__name__)
                return gateway_error(provider, type(exc).__name__, url)
        else:
            tap = Tap(
                resp.headers.get("content-type", ""),
                resp.headers.get("content-encoding", ""),
                resp.status_code,
            )
            out = Relayed(self._relay(resp, slot, tap), resp.status_code)
        out.raw_headers = headers_out
        return out

    async def _refused(self, resp: httpx.Response, slot: Slot) -> Response:
        """A refused request's answer, read up to :data:`ERROR_READ_BYTES` so that an overflow
        (a few hundred bytes of JSON) is recorded before the agent can retry, then sent as it
        came; a longer body is no prompt-too-long of these APIs, and goes back as it comes,
        unread, the bytes read ahead of the rest."""
        chunks = resp.aiter_raw()
        head: list[bytes] = []
        size, ended = 0, False
        try:
            while not ended and size <= ERROR_READ_BYTES:
                chunk = await anext(chunks, None)
                ended = chunk is None
                if chunk is not None:
                    head.append(chunk)
                    size += len(chunk)
        except BaseException:  # the body broke off (a 502 for _forward), or we were cancelled
            self.pool.release(slot)
            await resp.aclose()
            raise
        if not ended:
            self.pool.release(slot)
            self._log.info(
                "toolbudget.proxy.usage_unread",
                session=slot.key,
                reason="error body too large to read",
            )
            rest = self._relay(resp, None, None, chained(head, chunks))
            return Relayed(rest, resp.status_code)
        await resp.aclose()
        raw = b"".join(head)
        try:
            tap = Tap(
                resp.headers.get("content-type", ""),
                resp.headers.get("content-encoding", ""),
                resp.status_code,
            )
            tap.feed(raw)
            await self._settle(slot, tap, resp.status_code)
        finally:
            self.pool.release(slot)
        return Response(raw, status_code=resp.status_code)

    async def _relay(
        self,
        resp: httpx.Response,
        slot: Slot | None,
        tap: Tap | None,
        chunks: AsyncIterator[bytes] | None = None,
    ) -> AsyncIterator[bytes]:
        """The upstream's raw bytes as they arrive (``chunks``, if some were read already); then
        what the tap read goes to the session.

        An upstream breaking off raises on (uvicorn then drops the agent's connection, which
        tells it the answer is cut, where a clean end would not); an agent hanging up ends the
        relay at its ``yield`` or its read. Either is a ``stream_cut`` event, and the tap's
        partial usage is dropped."""
        self.working += 1
        relaying = True
        cut: tuple[str, str | None] | None = ("client disconnected", None)
        try:
            try:
                async for chunk in resp.aiter_raw() if chunks is None else chunks:
                    yield chunk
                    if tap is not None:
                        tap.feed(chunk)
            except httpx.HTTPError as exc:
                cut = ("upstream broke off", type(exc).__name__)
                raise
            cut = None  # anything raised from here on is not the stream's
            # Every byte is relayed: what is left (the usage, see Pool.note_usage) is no work
            # for the event loop, and the agent's next request is still its only work.
            self.working -= 1
            relaying = False
            if slot is not None and tap is not None:
                await self._settle(slot, tap, resp.status_code)
        finally:
            if relaying:
                self.working -= 1
            if cut is not None:
                self._cut(slot, *cut)
            await resp.aclose()
            if slot is not None:
                self.pool.release(slot)

    def _hung_up(self, slot: Slot | None = None) -> Response:
        """The agent hung up before its request's body was whole, or before the answer came
        (``slot``: its session, if budgeted): an interrupted turn (its ``stream_cut`` event), not
        the application's error; the answer goes to no one."""
        self._cut(slot, "client disconnected")
        return Response(status_code=400)

    def _cut(self, slot: Slot | None, reason: str, error: str | None = None) -> None:
        """The ``stream_cut`` event: info when the agent hung up (its choice: an interrupted
        turn), a warning when the upstream's answer broke off."""
        fields: dict[str, Any] = {"reason": reason}
        if slot is not None:
            fields["session"] = slot.key
        if error is not None:
            fields["error"] = error
        if reason == "client disconnected":
            self._log.info("toolbudget.proxy.stream_cut", **fields)
        else:
            self._log.warning("toolbudget.proxy.stream_cut", **fields)

    async def _settle(self, slot: Slot, tap: Tap, status: int) -> None:
        """What the answer's tap read goes to the session: its usage, or a prompt-too-long as
        the session's overflow."""
        tap.close()
        if tap.stream_error is not None:
            # The upstream failed the answer after its first bytes (overloaded, an API error):
            # the agent saw the error event; the usage read so far is the prompt's only (a final
            # event after the error, as a gateway's ``[DONE]``, makes it no answer's).
            self._cut(slot, "error event", tap.stream_error)
            return
        if tap.unreadable is None and not tap.complete:
            # A clean end before the final event: the usage read so far is the prompt's only.
            self._cut(slot, "no final event")
            return
        if tap.unreadable is not None:
            self._log.info("toolbudget.proxy.usage_unread", session=slot.key, reason=tap.unreadable)
        usage = understood(tap.usage)
        if tap.usage is not None and usage is None:
            self._log.info("toolbudget.proxy.usage_unread", session=slot.key, reason="not a usage")
        if usage is not None:
            self.pool.note_usage(slot, usage)
        elif status in OVERFLOW_STATUSES and is_context_overflow(tap.error_body):
            async with slot.lock:
                try:
                    await to_thread.run_sync(slot.budget.on_overflow, tap.error_body)
                except Exception as exc:  # ContextOverflow at the third: the agent sees the 400
                    self._log.warning(
                        "toolbudget.proxy.overflow_failed",
                        session=slot.key,
                        error=type(exc).__name__,
                    )
            self._log.warning("toolbudget.proxy.overflow", session=slot.key)

    def _alone(self) -> bool:
        """Whether the request at hand is the proxy's only work in flight: then the event loop
        has no other stream to relay meanwhile, and its work (``prepare``, a parse) runs there,
        without two hops to a worker thread and back (~0.2 ms each, several ms on a loaded
        machine)."""
        return self.working <= 1

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task


def create_app(settings: ProxySettings, *, clock: Callable[[], float] = time.time) -> Starlette:
    """The proxy as an ASGI app (run it with uvicorn, or :func:`budget.proxy.serve`).

    ``clock`` gives each request's time (seconds since the epoch), as ``prepare``'s ``now``.
    """
    proxy = Proxy(settings, clock)
    route = Route("/{path:path}", proxy.handle, methods=METHODS)
    app = ProxyApp(proxy.handle, routes=[route], lifespan=proxy.lifespan)
    app.state.proxy = proxy
    return app
