"""A hostile review of the proxy (issue 33, item 5): requests a broken or hostile client sends
reach the upstream as sent, and the proxy never answers one with its own failure."""

from __future__ import annotations

import logging
import socket
import traceback
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import structlog

from tests.proxy._kit import Stack

_ANTHROPIC = {"content-type": "application/json", "x-api-key": "k", "anthropic-version": "v"}


def _passthroughs(events: list[MutableMapping[str, Any]]) -> list[tuple[str, Any]]:
    return [
        (e["reason"], e.get("error"))
        for e in events
        if e["event"] == "toolbudget.proxy.passthrough"
    ]


@pytest.mark.parametrize("depth", [300, 1_000])
def test_deeply_nested_json_goes_upstream_byte_for_byte(
    kit: Any, tmp_path: Path, depth: int
) -> None:
    """A first message nested deeper than the session key's hashing can encode goes upstream as
    sent with a passthrough event, not a 500 or a reset connection."""
    nested = b"[" * depth + b"]" * depth
    body = b'{"model": "m", "messages": [{"role": "user", "content": ' + nested + b"}]}"
    # The stand-in's default usage re-encodes the body, which orjson refuses this deep.
    fixed = {"input_tokens": 10, "output_tokens": 1}
    with (
        kit.Stack(tmp_path / "s", usage_for=lambda _api, _body: fixed) as stack,
        structlog.testing.capture_logs() as events,
    ):
        answer = httpx.post(f"{stack.url}/v1/messages", content=body, headers=_ANTHROPIC)
        assert answer.status_code == 200
        assert stack.upstream.bodies("/v1/messages") == [body]
    [(reason, _error)] = _passthroughs(events)
    assert reason == "body not understood"


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/models"])
def test_a_header_value_with_non_ascii_bytes_is_forwarded_as_sent(stack: Stack, path: str) -> None:
    """A header carrying UTF-8 bytes (an app name in x-title) reaches the upstream byte for byte
    on a budgeted and an untouched path (httpx refused a str value it cannot encode as ASCII)."""
    title = "café ✓".encode()
    body = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    with httpx.Client() as client:
        headers = [(k.encode(), v.encode()) for k, v in _ANTHROPIC.items()]
        answer = client.post(
            stack.url + path, content=body, headers=[*headers, (b"x-title", title)]
        )
    assert answer.status_code == 200
    [got] = stack.upstream.received
    assert got.header("x-title") == title.decode("latin-1")  # the stand-in reads bytes as latin-1


def test_a_percent_encoded_slash_in_the_path_is_not_decoded_on_the_way_up(stack: Stack) -> None:
    """``/v1/models/org%2Fmodel`` (one segment: a model id with a slash) reaches the upstream as
    that same path, not as ``/v1/models/org/model``; its query too."""
    answer = httpx.get(f"{stack.url}/v1/models/org%2Fmodel?x=%2F", headers=_ANTHROPIC)
    assert answer.status_code == 200
    [got] = stack.upstream.received
    assert got.raw_path == b"/v1/models/org%2Fmodel"


def test_a_session_opened_while_max_open_others_are_busy_stays_usable(
    kit: Any, tmp_path: Path
) -> None:
    """With ``max_open`` 1 and one session's answer still streaming, a second conversation's
    requests are budgeted in a session that stays open: it is not closed as idle between being
    opened and being used (it was: its requests passed through, ``prepare`` failing on a closed
    store)."""
    from benchmarks.standin import Served, StandIn
    from budget.proxy import ProxySettings, create_app

    standin = StandIn(chunk_delay_s=0.3)
    with Served(standin.app()) as up:
        settings = ProxySettings(
            root=tmp_path / "s",
            anthropic_upstream=up.url,
            openai_upstream=up.url,
            budget=kit.BUDGET,
            max_open=1,
        )
        with Served(create_app(settings)) as proxy, httpx.Client() as client:
            streamed = orjson.dumps(
                {"model": "m", "messages": kit.anthropic_history(1, tag="a"), "stream": True}
            )
            headers = {**_ANTHROPIC, "x-toolbudget-session": "a"}
            with (
                client.stream(
                    "POST", f"{proxy.url}/v1/messages", content=streamed, headers=headers
                ) as answer,
                structlog.testing.capture_logs() as events,
            ):
                chunks = answer.iter_raw()  # kept: a dropped iterator closes the stream
                next(chunks)  # session a is busy until its stream ends
                history = kit.anthropic_history(2, tag="b")
                for upto in (3, 5):
                    body = orjson.dumps({"model": "m", "messages": history[:upto]})
                    other = client.post(
                        f"{proxy.url}/v1/messages",
                        content=body,
                        headers={**_ANTHROPIC, "x-toolbudget-session": "b"},
                    )
                    other.raise_for_status()
    assert _passthroughs(events) == []
    closed = [e for e in events if e["event"] == "toolbudget.spill.closed"]
    assert not [e for e in closed if str(e["path"]).endswith("anthropic-h-b")]
    sent = orjson.loads(standin.bodies("/v1/messages")[-1])["messages"]
    assert sent[4]["content"][0]["content"].startswith("[toolbudget] Output of Bash")


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _raised_in_proxy(record: logging.LogRecord) -> bool:
    """Whether ``record`` is a traceback through the proxy's code (the stand-in's are not)."""
    if not record.exc_info or record.exc_info[2] is None:
        return False
    return any("budget/proxy" in f.filename for f in traceback.extract_tb(record.exc_info[2]))


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/files"])
def test_an_agent_hanging_up_mid_body_is_an_event_not_an_application_error(
    kit: Any, stack: Stack, path: str, structlog_defaults: None
) -> None:
    """An agent hanging up before its request's body is whole (budgeted, or streamed upstream)
    is a ``stream_cut`` event (client disconnected), not an uncaught exception's traceback; the
    proxy serves on."""
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nx-api-key: k\r\nContent-Length: 1000\r\n\r\n"
    handler = _Records()
    logging.getLogger("uvicorn.error").addHandler(handler)
    try:
        with structlog.testing.capture_logs() as events:
            with socket.create_connection(("127.0.0.1", int(stack.url.rsplit(":", 1)[1]))) as sock:
                sock.sendall(head.encode() + b'{"model": "m", "messa')
                kit.eventually(lambda: stack.upstream.received or path == "/v1/messages", 1.0)
            cuts = kit.eventually(
                lambda: [e for e in events if e["event"] == "toolbudget.proxy.stream_cut"]
            )
            body = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
            answer = httpx.post(f"{stack.url}/v1/messages", content=body, headers=_ANTHROPIC)
    finally:
        logging.getLogger("uvicorn.error").removeHandler(handler)
    assert [(e["reason"], e["log_level"]) for e in cuts] == [("client disconnected", "info")]
    assert not [r for r in handler.records if _raised_in_proxy(r)]
    assert answer.status_code == 200


def test_a_method_the_proxy_does_not_serve_is_refused_and_never_forwarded(stack: Stack) -> None:
    """A method outside the proxy's list (TRACE) gets the app's own 405 and nothing goes
    upstream, while a listed one on any path is forwarded (the app's fast path for its
    requests keeps Starlette's answer for the others)."""
    with httpx.Client() as client:
        refused = client.request("TRACE", f"{stack.url}/v1/messages", headers=_ANTHROPIC)
        forwarded = client.request("GET", f"{stack.url}/v1/files/f1", headers=_ANTHROPIC)
    assert refused.status_code == 405
    assert forwarded.status_code == 200 and forwarded.json() == {"path": "/v1/files/f1"}
    assert [r.method for r in stack.upstream.received] == ["GET"]


@pytest.mark.parametrize("encoding", ["gzip", "zstd", "identity, gzip"])
def test_a_compressed_body_goes_upstream_as_sent_with_its_encoding(
    stack: Stack, encoding: str
) -> None:
    """A budgeted request whose body is compressed (Codex signed in with ChatGPT sends zstd) is
    passed through, its bytes and its Content-Encoding as sent, with an ``encoded body``
    passthrough event: the proxy never budgets bytes it did not decode."""
    import gzip

    plain = orjson.dumps({"model": "m", "input": [{"role": "user", "content": "hi"}]})
    # A zstd frame's magic number, then bytes the proxy must not read (it decodes nothing).
    body = b"\x28\xb5\x2f\xfd" + plain if encoding == "zstd" else gzip.compress(plain)
    headers = {"content-type": "application/json", "content-encoding": encoding}
    with structlog.testing.capture_logs() as events:
        answer = httpx.post(f"{stack.url}/v1/responses", content=body, headers=headers)
    [received] = stack.upstream.received
    assert answer.status_code == 400  # the stand-in reads no compressed body: its own answer
    assert received.body == body
    assert received.header("content-encoding") == encoding
    assert _passthroughs(events) == [("encoded body", None)]
