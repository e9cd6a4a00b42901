"""Never break the agent: what the proxy cannot budget goes upstream as it came, with an event;
upstream errors come back as sent (a prompt-too-long is the session's overflow); other paths
pass through; an unreachable upstream is a 502 in the API's own error shape."""

from __future__ import annotations

import subprocess
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import structlog

from spill._readonly import ReadOnlyStore
from tests.proxy._kit import Stack, anthropic_history

_ANTHROPIC = {"content-type": "application/json", "x-api-key": "k", "anthropic-version": "v"}
_OPENAI = {"content-type": "application/json", "authorization": "Bearer k"}


def _passthroughs(events: list[MutableMapping[str, Any]]) -> list[str]:
    return [e["reason"] for e in events if e["event"] == "toolbudget.proxy.passthrough"]


@pytest.mark.parametrize(
    ("path", "body", "reason"),
    [
        ("/v1/messages", b'{"model": "m", "messages": [', "body is not JSON"),
        ("/v1/messages", b"\xff\xfe not even text", "body is not JSON"),
        ("/v1/messages", b'[{"role": "user"}]', "no messages list"),
        ("/v1/chat/completions", b'{"model": "m", "messages": "hi"}', "no messages list"),
        ("/v1/responses", b'{"model": "m", "input": "a plain string"}', "no input list"),
        (
            "/v1/responses",
            b'{"model": "m", "previous_response_id": "r1", "input": []}',
            "previous_response_id",
        ),
        (
            "/v1/messages",
            b'{"model": "m", "messages": [{"role": "user", "content": [{"type": "tool_result",'
            b' "tool_use_id": 5, "content": 7}]}]}',
            "prepare failed",
        ),
    ],
    ids=["cut", "binary", "list", "chat-string", "responses-string", "stored", "refused"],
)
def test_a_body_the_proxy_cannot_budget_goes_upstream_byte_for_byte(
    stack: Stack, path: str, body: bytes, reason: str
) -> None:
    """The upstream receives the very bytes the agent sent, the agent gets the upstream's answer,
    and one passthrough event names the reason."""
    headers = _ANTHROPIC if path == "/v1/messages" else _OPENAI
    with structlog.testing.capture_logs() as events:
        answer = httpx.post(stack.url + path, content=body, headers=headers)
    assert stack.upstream.bodies(path) == [body]
    assert answer.status_code in (200, 400)
    assert _passthroughs(events) == [reason]


def test_an_upstream_error_comes_back_as_sent_and_an_overflow_is_recorded(stack: Stack) -> None:
    """A 429 and a 400 prompt-too-long reach the agent with the upstream's status and bytes; the
    prompt-too-long is logged as the session's overflow, the 429 is not."""
    body = orjson.dumps({"model": "claude-sonnet-4-5", "messages": anthropic_history(1)})
    with httpx.Client() as client:
        limited = client.post(
            f"{stack.url}/v1/messages",
            content=body,
            headers={**_ANTHROPIC, "x-standin-status": "429"},
        )
        direct = client.post(
            f"{stack.upstream_url}/v1/messages", content=body, headers={"x-standin-status": "429"}
        )
        too_long = client.post(
            f"{stack.url}/v1/messages",
            content=body,
            headers={**_ANTHROPIC, "x-standin-status": "400"},
        )
    assert (limited.status_code, limited.content) == (429, direct.content)
    assert too_long.status_code == 400 and b"prompt is too long" in too_long.content
    [session] = [p for p in stack.root.iterdir() if p.is_dir()]
    with ReadOnlyStore(session) as store:
        overflows = [r for r in store.read_log() if r.get("t") == "ovf"]
    assert [r["count"] for r in overflows] == [1]


def test_other_paths_and_methods_pass_through_untouched(stack: Stack) -> None:
    """A GET with a query and a POST to another endpoint reach the upstream as sent (path, query,
    body) and their answers come back unchanged; no session is opened."""
    with httpx.Client() as client:
        models = client.get(f"{stack.url}/v1/models?limit=2", headers=_ANTHROPIC)
        counted = client.post(
            f"{stack.url}/v1/messages/count_tokens", content=b'{"messages": []}', headers=_ANTHROPIC
        )
    assert models.json() == {"path": "/v1/models"} and counted.json() == {
        "path": "/v1/messages/count_tokens"
    }
    got = stack.upstream.received
    assert [(r.method, r.path) for r in got] == [
        ("GET", "/v1/models"),
        ("POST", "/v1/messages/count_tokens"),
    ]
    assert got[1].body == b'{"messages": []}'
    assert not any(p.is_dir() for p in stack.root.iterdir())


def test_an_unreachable_upstream_is_a_502_in_the_apis_error_shape(kit: Any, tmp_path: Path) -> None:
    """With nothing listening upstream, an Anthropic request gets a 502 with an Anthropic error
    body and an OpenAI one an OpenAI error body (their SDKs retry a 502), on a budgeted path as on
    one passed through (count_tokens, models: an Anthropic one got OpenAI's shape)."""
    from benchmarks.standin import Served
    from budget.proxy import ProxySettings, create_app

    dead = "http://127.0.0.1:9"  # the discard port: nothing serves HTTP there
    settings = ProxySettings(root=tmp_path / "s", anthropic_upstream=dead, openai_upstream=dead)
    with Served(create_app(settings)) as proxy, httpx.Client() as client:
        body = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        answers = [
            client.post(f"{proxy.url}/v1/messages", content=body, headers=_ANTHROPIC),
            client.post(f"{proxy.url}/v1/messages/count_tokens", content=body, headers=_ANTHROPIC),
            client.get(f"{proxy.url}/v1/models", headers=_ANTHROPIC),
            client.post(f"{proxy.url}/v1/chat/completions", content=body, headers=_OPENAI),
            client.get(f"{proxy.url}/v1/models", headers=_OPENAI),
        ]
    assert [a.status_code for a in answers] == [502] * 5
    for answer in answers[:3]:
        assert answer.json()["type"] == "error" and answer.json()["error"]["type"] == "api_error"
    for answer in answers[3:]:
        assert "type" not in answer.json() and "message" in answer.json()["error"]


def test_toolbudget_read_reads_a_spilled_output_beside_the_running_proxy(
    stack: Stack, structlog_restored: None
) -> None:
    """While the proxy holds the session open, ``toolbudget read SESSION REF`` prints the output an
    envelope replaced, exactly."""
    from typer.testing import CliRunner

    from budget.cli import app

    history = anthropic_history(1)
    body = orjson.dumps({"model": "m", "messages": history})
    httpx.post(f"{stack.url}/v1/messages", content=body, headers=_ANTHROPIC).raise_for_status()
    [sent] = stack.sent("/v1/messages")
    envelope = sent["messages"][2]["content"][0]["content"]
    ref = envelope.split(" as ref ", 1)[1].split(".", 1)[0]
    [session] = [p for p in stack.root.iterdir() if p.is_dir()]
    printed = CliRunner().invoke(app, ["read", str(session), ref])
    assert printed.exit_code == 0, printed.output
    assert printed.stdout == history[2]["content"][0]["content"]


def test_a_session_another_process_holds_passes_through(stack: Stack) -> None:
    """While another opener holds the conversation's session directory, its request goes
    upstream as the agent sent it, with a passthrough event naming SessionLocked."""
    from budget import Budget
    from budget.proxy import session_key

    history = anthropic_history(1)
    body = orjson.dumps({"model": "m", "messages": history})
    key = session_key("anthropic", {}, {}, history)
    with Budget.open(stack.root / key), structlog.testing.capture_logs() as events:
        httpx.post(f"{stack.url}/v1/messages", content=body, headers=_ANTHROPIC).raise_for_status()
    assert stack.upstream.bodies("/v1/messages") == [body]
    [event] = [e for e in events if e["event"] == "toolbudget.proxy.passthrough"]
    assert (event["reason"], event["error"]) == ("session unavailable", "SessionLocked")


def test_a_client_that_hangs_up_mid_stream_leaves_the_session_usable(
    kit: Any, tmp_path: Path
) -> None:
    """The agent drops a streamed answer after its first bytes: the proxy lets the session go
    (nothing left busy) and the conversation's next request is budgeted as usual."""
    from benchmarks.standin import Served, StandIn
    from budget.proxy import ProxySettings, create_app
    from tests.proxy._kit import BUDGET, eventually

    standin = StandIn(chunk_delay_s=0.2)
    with Served(standin.app()) as up:
        settings = ProxySettings(
            root=tmp_path / "s", anthropic_upstream=up.url, openai_upstream=up.url, budget=BUDGET
        )
        app = create_app(settings)
        with Served(app) as proxy:
            history = anthropic_history(2)
            streamed = orjson.dumps({"model": "m", "messages": history[:3], "stream": True})
            with (
                httpx.Client() as client,
                client.stream(
                    "POST", f"{proxy.url}/v1/messages", content=streamed, headers=_ANTHROPIC
                ) as answer,
            ):
                next(answer.iter_raw())
            pool = app.state.proxy.pool
            assert len(pool) == 1
            assert eventually(lambda: all(s.busy == 0 for s in pool._slots.values()))
            body = orjson.dumps({"model": "m", "messages": history})
            done = httpx.post(f"{proxy.url}/v1/messages", content=body, headers=_ANTHROPIC)
    assert done.status_code == 200
    last = orjson.loads(standin.bodies("/v1/messages")[-1])["messages"]
    assert last[4]["content"][0]["content"].startswith("[toolbudget] Output of Bash")


def test_blocks_toolbudget_does_not_know_reach_the_upstream_unchanged(stack: Stack) -> None:
    """Server-tool blocks, thinking blocks and fields of the API's future sit beside a big tool
    result: the result is spilled and every other block and field goes upstream as sent."""
    history = anthropic_history(1)
    history[1]["content"] = [
        {"type": "thinking", "thinking": "hmm", "signature": "c2ln"},
        {"type": "server_tool_use", "id": "srv1", "name": "web_search", "input": {"query": "x"}},
        {
            "type": "web_search_tool_result",
            "tool_use_id": "srv1",
            "content": [{"type": "web_search_result", "url": "u"}],
        },
        *history[1]["content"],
    ]
    history[2]["content"][0]["future_field"] = {"kept": True}
    body = orjson.dumps({"model": "m", "messages": history, "context_management": {"edits": []}})
    httpx.post(f"{stack.url}/v1/messages", content=body, headers=_ANTHROPIC).raise_for_status()
    [sent] = stack.sent("/v1/messages")
    assert sent["context_management"] == {"edits": []}
    assert sent["messages"][:2] == history[:2]
    result = sent["messages"][2]["content"][0]
    assert result["future_field"] == {"kept": True}
    assert result["content"].startswith("[toolbudget] Output of Bash")


def test_a_stream_is_relayed_as_it_comes_not_buffered(stack: Stack) -> None:
    """With the stand-in spacing its 7 events 0.3 s apart, the first event reaches the client
    through the proxy long before the stream ends (a buffering proxy would send all at once)."""
    import time

    body = orjson.dumps({"model": "m", "messages": anthropic_history(1), "stream": True})
    headers = {**_ANTHROPIC, "x-standin-delay": "0.3"}
    started = time.perf_counter()
    with (
        httpx.Client() as client,
        client.stream("POST", f"{stack.url}/v1/messages", content=body, headers=headers) as answer,
    ):
        arrivals = [time.perf_counter() - started for _ in answer.iter_raw()]
    assert len(arrivals) >= 2
    assert arrivals[-1] >= 1.8  # six gaps of 0.3 s
    assert arrivals[0] < arrivals[-1] - 1.2


def test_an_openai_context_length_error_is_recorded_as_the_sessions_overflow(
    stack: Stack,
) -> None:
    """A Chat Completions 400 ``context_length_exceeded`` comes back as sent and is logged as the
    session's overflow."""
    call = {"id": "c1", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
    history = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    body = orjson.dumps({"model": "gpt-4o", "messages": history})
    headers = {**_OPENAI, "x-standin-status": "400"}
    refused = httpx.post(f"{stack.url}/v1/chat/completions", content=body, headers=headers)
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "context_length_exceeded"
    [session] = [p for p in stack.root.iterdir() if p.is_dir()]
    with ReadOnlyStore(session) as store:
        [overflow] = [r for r in store.read_log() if r.get("t") == "ovf"]
    assert overflow["count"] == 1


def test_prepare_runs_in_the_event_loop_only_while_nothing_else_is_in_flight(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alone, a request is prepared in the event loop's thread (no hop); while another answer
    streams, in a worker thread, so the event loop goes on relaying that stream meanwhile."""
    import asyncio

    from budget.proxy import _app, _request

    in_loop: list[bool] = []
    real = _request.copy_body

    def copy(*args: Any) -> Any:
        try:
            in_loop.append(asyncio.get_running_loop() is not None)
        except RuntimeError:  # a worker thread runs no event loop
            in_loop.append(False)
        return real(*args)

    monkeypatch.setattr(_app, "copy_body", copy)
    alone = orjson.dumps({"model": "m", "messages": anthropic_history(1, tag="a")})
    streamed = orjson.dumps(
        {"model": "m", "messages": anthropic_history(1, tag="s"), "stream": True}
    )
    with httpx.Client(timeout=30) as client:
        client.post(f"{stack.url}/v1/messages", content=alone, headers=_ANTHROPIC)
        headers = {**_ANTHROPIC, "x-standin-delay": "0.3"}
        with client.stream(
            "POST", f"{stack.url}/v1/messages", content=streamed, headers=headers
        ) as answer:
            chunks = answer.iter_raw()
            next(chunks)  # streaming: the proxy relays it from now on
            with httpx.Client(timeout=30) as other:
                beside = orjson.dumps({"model": "m", "messages": anthropic_history(1, tag="b")})
                other.post(f"{stack.url}/v1/messages", content=beside, headers=_ANTHROPIC)
            for _ in chunks:
                pass
    # The first two were alone (the streamed one too, before its answer came); the third not.
    assert in_loop == [True, True, False]


def test_a_port_in_use_or_a_host_that_does_not_resolve_is_one_error_line(tmp_path: Path) -> None:
    """``toolbudget proxy`` on a port another socket holds, or on a host no name resolves,
    exits 2 with one ``error:`` line naming the address, not uvicorn's SystemExit traceback."""
    import socket

    from typer.testing import CliRunner

    from budget.cli import app

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        busy = CliRunner().invoke(app, ["proxy", "--root", str(tmp_path), "--port", str(port)])
    nowhere = CliRunner().invoke(
        app, ["proxy", "--root", str(tmp_path), "--host", "no-such-host.invalid", "--port", "0"]
    )
    for result, address in ((busy, f"127.0.0.1:{port}"), (nowhere, "no-such-host.invalid:0")):
        assert result.exit_code == 2, result.output
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
        assert address in result.stderr and "Traceback" not in result.output


def test_a_root_the_proxy_cannot_write_is_one_error_line(tmp_path: Path) -> None:
    """``toolbudget proxy`` on a root it may not write in exits 2 with one ``error:`` line, rather
    than serving and passing every request through unbudgeted."""
    import os
    import shutil

    from tests._entry import entry_point

    root = tmp_path / "sessions"
    root.mkdir(mode=0o500)
    command = [str(entry_point()), "proxy", "--root", str(root), "--port", "0"]
    if os.geteuid() == 0:
        # Root ignores mode bits: dropping every capability (CAP_DAC_OVERRIDE among them) makes
        # the kernel check them as for any user.
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv(1): cannot drop CAP_DAC_OVERRIDE")
        command = [setpriv, "--bounding-set=-all", "--inh-caps=-all", *command]
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env) as proxy:
        stderr = _exited(proxy, "the proxy served a session root it cannot write in")
    assert proxy.returncode == 2, stderr
    assert stderr == (
        f"error: cannot use {root} as the proxy's session root: no permission to write in it\n"
    )


def _exited(proc: subprocess.Popen[str], failure: str) -> str:
    """``proc``'s stderr once it exits by itself within 30 s; the test fails with ``failure``
    (and the process is killed) if it is still running then."""
    try:
        return proc.communicate(timeout=30)[1]
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(failure)


def test_a_second_proxy_on_a_served_root_is_one_error_line(tmp_path: Path) -> None:
    """A second ``toolbudget proxy`` on the root another one serves exits 2 with one ``error:``
    line, rather than serving and passing through every conversation the first holds."""
    import os
    import signal

    from tests._entry import entry_point

    command = [str(entry_point()), "proxy", "--root", str(tmp_path), "--port", "0"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env) as first:
        try:
            assert first.stderr is not None
            assert first.stderr.readline().startswith("toolbudget proxy on http://127.0.0.1:")
            with subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env) as second:
                stderr = _exited(second, "a second proxy served the root the first one serves")
        finally:
            first.send_signal(signal.SIGTERM)
            first.communicate(timeout=30)
    assert second.returncode == 2, stderr
    assert stderr == (
        f"error: another toolbudget proxy serves {tmp_path}: stop it, or give this one another "
        "--root\n"
    )


def test_connections_the_proxys_listener_accepts_send_without_delay() -> None:
    """asyncio sets TCP_NODELAY on a connection the proxy's own listener accepts (its socket
    says IPPROTO_TCP): without it an answer written in two parts waited 40 ms for the agent's
    delayed ACK, every request."""
    import asyncio
    import socket

    from budget.proxy._serve import _listen

    async def accepted_nodelay() -> int:
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                sock = transport.get_extra_info("socket")
                seen.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        (listener,) = _listen("127.0.0.1", 0)
        server = await asyncio.get_running_loop().create_server(Probe, sock=listener)
        async with server:
            _, writer = await asyncio.open_connection(*listener.getsockname()[:2])
            value = await asyncio.wait_for(seen, 10)
            writer.close()
        return value

    assert asyncio.run(accepted_nodelay()) != 0


def test_a_host_naming_two_addresses_is_listened_on_at_both(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A host that resolves to 127.0.0.1 and ::1 (``localhost`` on many machines) gets a TCP
    listener on each, as uvicorn's own bind made: an agent reaching either one connects."""
    import socket

    from budget.proxy._serve import _listen

    real = socket.getaddrinfo
    both = [
        *real("127.0.0.1", 0, type=socket.SOCK_STREAM),
        *real("::1", 0, type=socket.SOCK_STREAM),
    ]
    monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: both)
    listeners = _listen("localhost", 0)
    monkeypatch.undo()  # the connections below resolve their own addresses
    try:
        assert [s.family for s in listeners] == [socket.AF_INET, socket.AF_INET6]
        assert all(s.proto == socket.IPPROTO_TCP for s in listeners)
        for s in listeners:
            with socket.create_connection(s.getsockname()[:2], timeout=10):
                pass
    finally:
        for s in listeners:
            s.close()
