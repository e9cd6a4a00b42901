"""A streamed answer cut off (the upstream closes mid-stream, or ends before its final event; the
agent hangs up): the proxy says so with an event and records none of its usage."""

from __future__ import annotations

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

from benchmarks.standin import Served, StandIn
from budget.proxy import SESSION_HEADER, ProxySettings, create_app
from budget.proxy._pool import USAGE_SIDECAR
from budget.proxy._tap import Tap
from tests.proxy._kit import BUDGET, anthropic_history, eventually

_HEADERS = {
    "content-type": "application/json",
    "x-api-key": "k",
    "anthropic-version": "v",
    SESSION_HEADER: "streamed",
}


def _event(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps({"type": name, **data}) + b"\n\n"


_START = _event("message_start", {"message": {"usage": {"input_tokens": 1234, "output_tokens": 1}}})
_DELTA = _event("message_delta", {"usage": {"output_tokens": 42}})
_STOP = _event("message_stop", {})


def _upstream(ending: str) -> Starlette:
    """An Anthropic stream that sends its prompt's usage, then ends as ``ending`` says: whole,
    cleanly before its last events (``early``), by dropping the connection (``broken``), or with
    an ``error`` event (``error``: the API's overloaded error mid-stream; ``error then stop``: the
    final events after it, as a gateway relaying Chat Completions sends ``[DONE]``)."""

    async def answer(request: Request) -> Response:
        await request.body()

        async def events() -> AsyncIterator[bytes]:
            yield _START
            if ending == "broken":
                raise RuntimeError("the upstream goes away mid-stream")
            if ending == "whole":
                yield _DELTA
                yield _STOP
            if ending in ("error", "error then stop"):
                yield _event("error", {"error": {"type": "overloaded_error", "message": "x"}})
            if ending == "error then stop":
                yield _DELTA
                yield _STOP

        return StreamingResponse(events(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/messages", answer, methods=["POST"])])


def _cuts(events: list[MutableMapping[str, Any]]) -> list[tuple[str, str, str | None]]:
    return [
        (e["log_level"], e["reason"], e.get("error"))
        for e in events
        if e["event"] == "toolbudget.proxy.stream_cut"
    ]


@pytest.mark.parametrize(
    ("ending", "cuts"),
    [
        ("whole", []),
        ("early", [("warning", "no final event", None)]),
        ("broken", [("warning", "upstream broke off", "RemoteProtocolError")]),
        ("error", [("warning", "error event", "overloaded_error")]),
        ("error then stop", [("warning", "error event", "overloaded_error")]),
    ],
)
def test_a_stream_the_upstream_cuts_off_is_an_event_and_its_usage_is_not_recorded(
    tmp_path: Path, ending: str, cuts: list[tuple[str, str, str | None]], structlog_defaults: None
) -> None:
    """A stream ending before Anthropic's ``message_stop`` (cleanly or not) logs a
    ``stream_cut`` event, its prompt's usage is neither kept for the next request nor saved, and
    a broken one reaches the agent broken; a whole one records its usage."""
    with Served(_upstream(ending)) as up:
        settings = ProxySettings(
            root=tmp_path / "s", anthropic_upstream=up.url, openai_upstream=up.url, budget=BUDGET
        )
        app = create_app(settings)
        body = orjson.dumps({"model": "m", "messages": anthropic_history(1), "stream": True})
        with (
            Served(app) as proxy,
            structlog.testing.capture_logs() as events,
            httpx.Client() as client,
        ):
            received = b""
            try:
                with client.stream(
                    "POST", f"{proxy.url}/v1/messages", content=body, headers=_HEADERS
                ) as answer:
                    for chunk in answer.iter_raw():
                        received += chunk
                broke = False
            except httpx.RemoteProtocolError:
                broke = True
            pool = app.state.proxy.pool
            assert eventually(lambda: all(s.busy == 0 for s in pool._slots.values()))
            [slot] = pool._slots.values()
            usage = slot.usage
    assert received.startswith(_START)
    assert broke == (ending == "broken")
    assert _cuts(events) == cuts
    sidecar = tmp_path / "s" / "anthropic-h-streamed" / USAGE_SIDECAR
    if ending == "whole":
        assert usage == {"input_tokens": 1234, "output_tokens": 42} and sidecar.exists()
    else:
        assert usage is None and not sidecar.exists()


def test_an_agent_hanging_up_mid_stream_is_an_event(
    tmp_path: Path, structlog_defaults: None
) -> None:
    """The agent drops a streamed answer after its first bytes: a ``stream_cut`` event (info:
    the agent chose to) says so, and the prompt's usage already read is not recorded."""
    standin = StandIn(chunk_delay_s=0.3)
    with Served(standin.app()) as up:
        settings = ProxySettings(
            root=tmp_path / "s", anthropic_upstream=up.url, openai_upstream=up.url, budget=BUDGET
        )
        app = create_app(settings)
        body = orjson.dumps({"model": "m", "messages": anthropic_history(1), "stream": True})
        with Served(app) as proxy, structlog.testing.capture_logs() as events:
            with (
                httpx.Client() as client,
                client.stream(
                    "POST", f"{proxy.url}/v1/messages", content=body, headers=_HEADERS
                ) as answer,
            ):
                next(answer.iter_raw())
            assert eventually(lambda: _cuts(events))
            [slot] = app.state.proxy.pool._slots.values()
            assert eventually(lambda: slot.busy == 0)
    assert _cuts(events) == [("info", "client disconnected", None)]
    assert slot.usage is None


@pytest.mark.parametrize("api", ["anthropic", "chat", "responses"])
@pytest.mark.parametrize("event_lines", [True, False])
def test_a_stream_is_complete_once_its_apis_final_event_came(api: str, event_lines: bool) -> None:
    """The stand-in's stream of each API (with or without ``event:`` lines) is complete when
    whole, and not without its last event."""
    from benchmarks.standin import _EVENTS
    from budget.proxy._tap import Tap

    usage = {"input_tokens": 7, "output_tokens": 3}
    body = {"stream_options": {"include_usage": True}}
    events = _EVENTS[api]("m", "ok", usage, body)
    if not event_lines:
        events = [
            b"\n".join(x for x in e.split(b"\n") if not x.startswith(b"event:")) for e in events
        ]
    for whole in (True, False):
        tap = Tap("text/event-stream", "", 200)
        for event in events if whole else events[:-1]:
            tap.feed(event)
        tap.close()
        # Anthropic's message_stop is read from its event line only (the Anthropic SDK reads
        # every event by that line, so a stream always has them).
        assert tap.complete == (whole and (event_lines or api != "anthropic")), (api, whole)


@pytest.mark.parametrize(
    ("events", "error"),
    [
        # Anthropic's error event; the Responses API's; a Chat Completions chunk holding one.
        (
            b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error"}}\n\n',
            "overloaded_error",
        ),
        (
            b'event: error\ndata: {"type":"error","code":"server_error","message":"m"}\n\n',
            "server_error",
        ),
        (b'data: {"error":{"message":"m","type":"server_error"}}\n\n', "server_error"),
        (b'data: {"type":"error"}\n\n', "error"),
        # OpenRouter's mid-stream error: a chunk with its choices (finish_reason "error") and the
        # error beside them; the OpenAI SDK raises on any chunk holding an error.
        (
            b'data: {"choices":[{"delta":{"content":""},"finish_reason":"error"}],'
            b'"error":{"code":502,"message":"m"}}\n\n',
            "error",
        ),
        # A chunk holding a usage and an error is read for both.
        (
            b'data: {"error":{"type":"server_error"},"usage":{"prompt_tokens":3}}\n\n',
            "server_error",
        ),
        # The Responses API's failed response (its error inside the response, beside the usage).
        (
            b'event: response.failed\ndata: {"type":"response.failed","response":{"status":'
            b'"failed","error":{"code":"server_error"},"usage":{"input_tokens":3}}}\n\n',
            "server_error",
        ),
        # An answer's text holding the word, quoted or not, is no error.
        (b'data: {"choices":[{"delta":{"content":"error"}}]}\n\n', None),
        (b'data: {"choices":[{"delta":{"content":"an \\"error\\" here"}}]}\n\n', None),
        (
            b'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"text":"error"}}\n\n',
            None,
        ),
    ],
)
def test_the_tap_reads_the_error_event_a_stream_ends_with(events: bytes, error: str | None) -> None:
    """A stream's error event is read by its type, in each API's form; text is never one."""
    tap = Tap("text/event-stream", "", 200)
    tap.feed(events)
    tap.close()
    assert tap.stream_error == error


@pytest.mark.parametrize("crlf", [False, True])
@pytest.mark.parametrize("gzipped", [False, True])
def test_an_error_event_split_anywhere_is_read_and_the_stream_is_no_success(
    crlf: bool, gzipped: bool
) -> None:
    """A Chat Completions stream whose usage chunk is followed by an error chunk and ``[DONE]``,
    fed a byte at a time (CRLF or LF, gzip or not), reads the error at every split."""
    import zlib

    body = (
        b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}\n\n'
        b'data: {"error":{"message":"m","type":"server_error"}}\n\n'
        b"data: [DONE]\n\n"
    )
    if crlf:
        body = body.replace(b"\n", b"\r\n")
    if gzipped:
        packer = zlib.compressobj(wbits=31)
        body = packer.compress(body) + packer.flush()
    tap = Tap("text/event-stream", "gzip" if gzipped else "", 200)
    for i in range(len(body)):
        tap.feed(body[i : i + 1])
    tap.close()
    assert tap.stream_error == "server_error" and tap.complete
