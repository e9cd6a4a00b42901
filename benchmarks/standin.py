"""A stand-in model API on loopback: answers the three budgeted APIs, records what it received.

Used by the proxy's tests and its overhead benchmark (``benchmarks/proxy.py``): it answers
``POST /v1/messages`` (Anthropic), ``/v1/chat/completions`` and ``/v1/responses`` (OpenAI) with a
small answer in each API's own shape, as JSON or as a server-sent event stream when the body
asks ``"stream": true`` (Anthropic's and OpenAI's documented event sequences, trimmed to one text
block), and any other path with a JSON echo. ``usage_for`` says what usage to report for a
request (default: a count from the body's size). A request header ``x-standin-delay`` sets the
seconds between streamed events; ``x-standin-status`` makes it answer with that status and the API's error body: a rate limit for 429, else prompt too long.

Servers run in a thread of their own (:class:`Served`), so a test drives them with blocking SDK
clients.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

__all__ = ["Received", "Served", "StandIn", "serve_in_thread"]

UsageFor = Callable[[str, dict[str, Any]], Mapping[str, int] | None]


@dataclass(frozen=True, slots=True)
class Received:
    """One request as the stand-in received it."""

    method: str
    path: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    raw_path: bytes = b""
    """The path as the request line carried it (``path`` is percent-decoded)."""

    def json(self) -> Any:
        """The body, parsed."""
        return orjson.loads(self.body)

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive)."""
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)


def _default_usage(api: str, body: dict[str, Any]) -> dict[str, int]:
    size = len(orjson.dumps(body)) // 4
    if api == "anthropic":
        return {"input_tokens": size, "cache_read_input_tokens": 0, "output_tokens": 5}
    if api == "chat":
        return {"prompt_tokens": size, "completion_tokens": 5, "total_tokens": size + 5}
    return {"input_tokens": size, "output_tokens": 5, "total_tokens": size + 5}


def _sse(event: str | None, data: Mapping[str, Any]) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + orjson.dumps(data) + b"\n\n"


@dataclass
class StandIn:
    """The stand-in upstream's state: what it received, how it answers."""

    usage_for: UsageFor = _default_usage
    chunk_delay_s: float = 0.0
    """Seconds between two streamed events (a real model streams over seconds)."""
    text: str = "ok"
    record: bool = True
    received: list[Received] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def app(self) -> Starlette:
        """The ASGI app."""
        return Starlette(routes=[Route("/{path:path}", self._handle, methods=["GET", "POST"])])

    def bodies(self, path: str) -> list[bytes]:
        """The bodies received on ``path``, in order."""
        with self._lock:
            return [r.body for r in self.received if r.path == path]

    async def _handle(self, request: Request) -> Response:
        body = await request.body()
        if self.record:
            got = Received(
                request.method,
                request.url.path,
                tuple(request.headers.items()),
                body,
                request.scope.get("raw_path") or b"",
            )
            with self._lock:
                self.received.append(got)
        path = request.url.path
        api = {"/v1/messages": "anthropic", "/v1/chat/completions": "chat"}.get(path)
        api = api or ("responses" if path == "/v1/responses" else None)
        if api is None or request.method != "POST":
            return Response(orjson.dumps({"path": path}), media_type="application/json")
        status = request.headers.get("x-standin-status")
        if status is not None:
            code = int(status)
            return _error(api, code, "rate limited" if code == 429 else _TOO_LONG)
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            return _error(api, 400, "invalid JSON")
        usage = dict(self.usage_for(api, parsed) or {}) if isinstance(parsed, dict) else {}
        model = str(parsed.get("model", "stand-in")) if isinstance(parsed, dict) else "stand-in"
        if isinstance(parsed, dict) and parsed.get("stream"):
            events = _EVENTS[api](model, self.text, usage, parsed)
            delay = float(request.headers.get("x-standin-delay", self.chunk_delay_s))
            return StreamingResponse(self._paced(events, delay), media_type="text/event-stream")
        answer = _ANSWERS[api](model, self.text, usage)
        return Response(orjson.dumps(answer), media_type="application/json")

    async def _paced(self, events: list[bytes], delay: float) -> AsyncIterator[bytes]:
        for i, event in enumerate(events):
            if i and delay:
                await asyncio.sleep(delay)
            yield event


_TOO_LONG = "prompt is too long: 250000 tokens > 200000 maximum"


def _error(api: str, status: int, message: str) -> Response:
    if api == "anthropic":
        body: dict[str, Any] = {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": message},
        }
    else:
        body = {
            "error": {
                "message": f"This model's maximum context length is 128000 tokens. {message}",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        }
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


def _anthropic(model: str, text: str, usage: Mapping[str, int]) -> dict[str, Any]:
    return {
        "id": "msg_standin",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": dict(usage),
    }


def _anthropic_events(
    model: str, text: str, usage: Mapping[str, int], _body: Mapping[str, Any]
) -> list[bytes]:
    start = {**_anthropic(model, "", usage), "content": [], "stop_reason": None}
    start["usage"] = {**usage, "output_tokens": 1}
    return [
        _sse("message_start", {"type": "message_start", "message": start}),
        _sse(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        *(
            _sse(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": t},
                },
            )
            for t in (text[: len(text) // 2], text[len(text) // 2 :])
        ),
        _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": usage.get("output_tokens", 0)},
            },
        ),
        _sse("message_stop", {"type": "message_stop"}),
    ]


def _chat(model: str, text: str, usage: Mapping[str, int]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-standin",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": dict(usage),
    }


def _chat_events(
    model: str, text: str, usage: Mapping[str, int], body: Mapping[str, Any]
) -> list[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-standin",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    events = [
        _sse(None, chunk({"role": "assistant", "content": ""}, None)),
        _sse(None, chunk({"content": text}, None)),
        _sse(None, chunk({}, "stop")),
    ]
    options = body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        last = {**chunk({}, None), "choices": [], "usage": dict(usage)}
        events.append(_sse(None, last))
    return [*events, b"data: [DONE]\n\n"]


def _responses(model: str, text: str, usage: Mapping[str, int]) -> dict[str, Any]:
    return {
        "id": "resp_standin",
        "object": "response",
        "created_at": 0,
        "status": "completed",
        "model": model,
        "output": [
            {
                "type": "message",
                "id": "msg_standin",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": dict(usage) or None,
    }


def _responses_events(
    model: str, text: str, usage: Mapping[str, int], _body: Mapping[str, Any]
) -> list[bytes]:
    created = {**_responses(model, "", usage), "status": "in_progress", "output": [], "usage": None}
    done = _responses(model, text, usage)
    item = done["output"][0]
    part = item["content"][0]
    at = {"item_id": item["id"], "output_index": 0}
    sequence: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": created}),
        ("response.output_item.added", {"output_index": 0, "item": {**item, "content": []}}),
        ("response.content_part.added", {**at, "content_index": 0, "part": {**part, "text": ""}}),
        ("response.output_text.delta", {**at, "content_index": 0, "delta": text, "logprobs": []}),
        ("response.output_text.done", {**at, "content_index": 0, "text": text, "logprobs": []}),
        ("response.content_part.done", {**at, "content_index": 0, "part": part}),
        ("response.output_item.done", {"output_index": 0, "item": item}),
        ("response.completed", {"response": done}),
    ]
    return [
        _sse(kind, {"type": kind, "sequence_number": i, **data})
        for i, (kind, data) in enumerate(sequence)
    ]


_ANSWERS = {"anthropic": _anthropic, "chat": _chat, "responses": _responses}
_EVENTS = {"anthropic": _anthropic_events, "chat": _chat_events, "responses": _responses_events}


class Served:
    """An ASGI app served by uvicorn on a loopback port, in a thread; stopped by :meth:`stop`."""

    def __init__(self, app: Any, *, port: int = 0) -> None:
        config = uvicorn.Config(
            app, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="on"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the server did not start")
            self._thread.join(0.005)
        self.port: int = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def wait(self) -> None:
        """Serve until the process is interrupted or killed."""
        while self._thread.is_alive():
            self._thread.join(1.0)

    def stop(self) -> None:
        """Stop serving and wait for the thread (the app's lifespan ends)."""
        self._server.should_exit = True
        self._thread.join(30)

    def __enter__(self) -> Served:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_in_thread(app: Any) -> Served:
    """``app`` served on a free loopback port."""
    return Served(app)


def main(argv: list[str] | None = None) -> None:
    """``python -m benchmarks.standin [--port N] [--chunk-delay S]``: serve until killed, printing
    ``standin on URL`` once listening (the proxy benchmark runs it in a process of its own)."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m benchmarks.standin")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--chunk-delay", type=float, default=0.0)
    parser.add_argument(
        "--gc", action="store_true", help="keep the cyclic garbage collector on (off by default)"
    )
    args = parser.parse_args(argv)
    standin = StandIn(chunk_delay_s=args.chunk_delay, record=False)
    served = Served(standin.app(), port=args.port)
    if not args.gc:
        # The stand-in is the benchmark's instrument: a pause of its own lands on whichever call
        # it hits, direct or proxied, and is counted as the proxy's. Parsing a 2 MB body makes
        # tens of thousands of containers, and the collections they set off (a full one now and
        # then, ~10 ms) made the p99 of the difference between two direct calls of the same body
        # 8.4-9.6 ms at 800 rounds; 1.8 ms with the collector off. What a request allocates is
        # acyclic (freed by reference counting), so the process's memory stays flat without it.
        gc.freeze()
        gc.disable()
    print(f"standin on {served.url}", file=sys.stderr, flush=True)
    served.wait()


if __name__ == "__main__":
    main()
