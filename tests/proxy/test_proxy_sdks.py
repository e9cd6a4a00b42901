"""The real ``anthropic`` and ``openai`` SDK clients through the proxy to a recording stand-in:
all three APIs, plain and streamed; what reaches the upstream is the request copy, what reaches
the client is the upstream's answer, and the usage it reported reaches the session."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.proxy._kit import Stack, anthropic_history, eventually
from tests.strategies import big

_FILE = re.compile(r"^File: (.+)$", re.MULTILINE)


def _spilled(text: str) -> Path:
    """The file an envelope names."""
    found = _FILE.search(text)
    assert found is not None, f"no file named in {text[:300]!r}"
    return Path(found.group(1))


def _sessions(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir())


def _meta_usage(session: Path) -> Any:
    """The usage the proxy saved in the session's usage sidecar, once it has."""

    from budget.proxy._pool import _decode_usage

    def saved() -> Any:
        path = session / "proxy_usage.json"
        return _decode_usage(path.read_bytes()) if path.exists() else None

    return eventually(saved)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_anthropic_sdk_sends_the_request_copy_and_reads_the_answer(
    stack: Stack, stream: bool
) -> None:
    """An Anthropic client's big tool results reach the upstream as envelopes naming a file that
    holds them exactly; the client reads the stand-in's answer and usage, which the session keeps."""
    import anthropic

    client = anthropic.Anthropic(base_url=stack.url, api_key="sk-ant-test", max_retries=0)
    history = anthropic_history(2)
    kwargs: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": history}
    if stream:
        with client.messages.stream(**kwargs) as events:
            answer = events.get_final_message()
    else:
        answer = client.messages.create(**kwargs)
    assert [b.text for b in answer.content if b.type == "text"] == ["ok"]
    [sent] = stack.sent("/v1/messages")
    assert sent["model"] == "claude-sonnet-4-5" and sent["max_tokens"] == 64
    assert sent["messages"][:2] == history[:2]
    for i in (2, 4):
        shown = sent["messages"][i]["content"][0]["content"]
        assert shown.startswith("[toolbudget] Output of Bash was too large")
        path = _spilled(shown)
        assert stack.root in path.parents
        assert path.read_text() == history[i]["content"][0]["content"]
    [session] = _sessions(stack.root)
    reported = answer.usage.model_dump(exclude_none=True)
    assert _meta_usage(session) == reported
    assert reported["input_tokens"] > 0


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_openai_chat_sdk_sends_the_request_copy_and_reads_the_answer(
    stack: Stack, stream: bool
) -> None:
    """A Chat Completions client's big tool message reaches the upstream as an envelope; the
    client reads the answer; the usage (the stream's last chunk with include_usage) is kept."""
    import openai

    client = openai.OpenAI(base_url=f"{stack.url}/v1", api_key="sk-test", max_retries=0)
    call = {"id": "c1", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
    history: Any = [
        {"role": "system", "content": "You run commands."},
        {"role": "user", "content": "List it."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": big(150, "chat")},
    ]
    if stream:
        chunks = list(
            client.chat.completions.create(
                model="gpt-4o",
                messages=history,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        usage = chunks[-1].usage
    else:
        done = client.chat.completions.create(model="gpt-4o", messages=history)
        text, usage = done.choices[0].message.content or "", done.usage
    assert text == "ok" and usage is not None
    [sent] = stack.sent("/v1/chat/completions")
    assert sent["messages"][:3] == history[:3]
    shown = sent["messages"][3]["content"]
    assert shown.startswith("[toolbudget] Output of sh was too large")
    assert _spilled(shown).read_text() == history[3]["content"]
    [session] = _sessions(stack.root)
    assert _meta_usage(session) == usage.model_dump(exclude_none=True)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_openai_responses_sdk_sends_the_request_copy_and_reads_the_answer(
    stack: Stack, stream: bool
) -> None:
    """A Responses client's big function_call_output reaches the upstream as an envelope; the
    client reads the answer; the usage (``response.completed`` when streamed) is kept."""
    import openai

    client = openai.OpenAI(base_url=f"{stack.url}/v1", api_key="sk-test", max_retries=0)
    items: Any = [
        {"role": "user", "content": "List it."},
        {"type": "function_call", "call_id": "f1", "name": "shell", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "f1", "output": big(150, "resp")},
    ]
    if stream:
        with client.responses.stream(model="gpt-5", input=items) as events:
            done: Any = events.get_final_response()
    else:
        done = client.responses.create(model="gpt-5", input=items)
    assert done.output_text == "ok" and done.usage is not None
    [sent] = stack.sent("/v1/responses")
    assert sent["input"][:2] == items[:2]
    shown = sent["input"][2]["output"]
    assert shown.startswith("[toolbudget] Output of shell was too large")
    assert _spilled(shown).read_text() == items[2]["output"]
    [session] = _sessions(stack.root)
    assert _meta_usage(session) == done.usage.model_dump(exclude_none=True)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/messages", {"model": "m", "max_tokens": 8, "stream": True}),
        ("/v1/chat/completions", {"model": "m", "stream": True}),
        ("/v1/responses", {"model": "m", "stream": True}),
    ],
    ids=["anthropic", "chat", "responses"],
)
def test_a_streamed_answer_comes_back_byte_for_byte(
    stack: Stack, path: str, body: dict[str, Any]
) -> None:
    """The event stream a client reads through the proxy is, byte for byte, the one the upstream
    sends (same status and content type), for a request the proxy budgeted."""
    field = "input" if path.endswith("responses") else "messages"
    payload = orjson.dumps({**body, field: anthropic_history(1) if field == "messages" else []})
    if path.endswith("completions"):
        payload = orjson.dumps({**body, "messages": [{"role": "user", "content": "hi"}]})
    headers = {"content-type": "application/json", "x-api-key": "k", "anthropic-version": "v"}
    proxied = httpx.post(stack.url + path, content=payload, headers=headers)
    # The same request copy sent straight to the stand-in (whose answer depends on the body).
    [copy] = stack.upstream.bodies(path)
    direct = httpx.post(stack.upstream_url + path, content=copy, headers=headers)
    assert proxied.status_code == direct.status_code == 200
    assert proxied.headers["content-type"] == direct.headers["content-type"]
    assert proxied.headers["content-type"].startswith("text/event-stream")
    assert proxied.content == direct.content
    assert proxied.content.count(b"\n\n") >= 3


def test_the_sdks_passed_through_paths_get_their_apis_error_when_the_upstream_is_down(
    tmp_path: Path,
) -> None:
    """With nothing listening upstream, the Anthropic SDK's ``count_tokens`` and the OpenAI
    SDK's ``models.list`` (paths passed through) each get a 502 in their own API's error shape,
    as a budgeted path does: Anthropic's SDK got OpenAI's there; it names the upstream."""
    import anthropic
    import openai

    from benchmarks.standin import Served
    from budget.proxy import ProxySettings, create_app

    dead = "http://127.0.0.1:9"  # the discard port: nothing serves HTTP there
    settings = ProxySettings(root=tmp_path / "s", anthropic_upstream=dead, openai_upstream=dead)
    with Served(create_app(settings)) as proxy:
        claude = anthropic.Anthropic(base_url=proxy.url, api_key="k", max_retries=0)
        with pytest.raises(anthropic.InternalServerError) as refused:
            claude.messages.count_tokens(model="m", messages=[{"role": "user", "content": "hi"}])
        gpt = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="k", max_retries=0)
        with pytest.raises(openai.InternalServerError) as refused_openai:
            gpt.models.list()
    assert refused.value.status_code == refused_openai.value.status_code == 502
    assert refused.value.body == {
        "type": "error",
        "error": {
            "type": "api_error",
            "message": (
                "toolbudget proxy: the upstream http://127.0.0.1:9 could not be reached "
                "(ConnectError)"
            ),
        },
    }
    assert refused_openai.value.code is None
    assert "the upstream http://127.0.0.1:9 could not be reached" in refused_openai.value.message


def test_an_sdk_timing_out_on_a_slow_upstream_ends_the_upstream_request(tmp_path: Path) -> None:
    """The Anthropic SDK gives up on an upstream that has not answered within its timeout and
    closes its connection: the proxy drops its upstream request then (it kept it, and the
    upstream working, for up to ten minutes), and every retry of the SDK's is dropped as well."""
    import anthropic
    from starlette.types import Receive, Scope, Send

    from benchmarks.standin import Served
    from budget.proxy import ProxySettings, create_app
    from tests.proxy._kit import BUDGET

    started: list[str] = []
    dropped: list[str] = []

    async def silent(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        started.append(scope["path"])
        while (await receive())["type"] != "http.disconnect":
            pass
        dropped.append(scope["path"])

    with Served(silent) as up:
        settings = ProxySettings(
            root=tmp_path / "s", anthropic_upstream=up.url, openai_upstream=up.url, budget=BUDGET
        )
        with Served(create_app(settings)) as proxy:
            client = anthropic.Anthropic(
                base_url=proxy.url, api_key="k", timeout=0.5, max_retries=1
            )
            history: Any = anthropic_history(2)
            with pytest.raises(anthropic.APITimeoutError):
                client.messages.create(model="m", max_tokens=8, messages=history)
            assert eventually(lambda: len(dropped) == 2, 5.0)
    assert started == dropped == ["/v1/messages", "/v1/messages"]
