"""The summarizers: the SDK adapters' real requests over a mocked HTTP transport, and the extractive one.

Both official SDKs send through ``httpx2`` (their ``_base_client`` imports it), so the clients are
built with an ``httpx2.Client`` whose ``MockTransport`` records the request and answers it.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
import pytest

from budget import InputError, summarizers
from budget.compaction._compaction import render_transcript
from tests.compaction import anthropic_reply
from tests.strategies import assistant, chat_assistant, chat_tool, results

HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": "Fix the failing test in src/app.py. Never edit tests/."},
    assistant(("toolu_1", "bash")),
    results(("toolu_1", "FAILED tests/test_app.py::test_sum - AssertionError")),
    {"role": "assistant", "content": [{"type": "text", "text": "The sum is off by one."}]},
]

ANTHROPIC_REPLY = anthropic_reply("## Goal\nFix the test.")

OPENAI_REPLY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "gpt-5",
    "choices": [
        {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": "## Goal\nFix the test."},
        }
    ],
}


class Recorder:
    """A mock transport handler that keeps each request and answers with one JSON body."""

    def __init__(self, reply: dict[str, Any]) -> None:
        self.reply = reply
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        return httpx2.Response(200, json=self.reply)

    def body(self) -> dict[str, Any]:
        assert len(self.requests) == 1
        sent: dict[str, Any] = json.loads(self.requests[0].content)
        return sent


def test_anthropic_adapter_sends_the_prompt_and_transcript_without_tools() -> None:
    """The Anthropic adapter posts to /v1/messages with the model, system prompt, transcript, no tools."""
    import anthropic as anthropic_sdk

    rec = Recorder(ANTHROPIC_REPLY)
    client = anthropic_sdk.Anthropic(
        api_key="test", http_client=httpx2.Client(transport=httpx2.MockTransport(rec))
    )
    summary = summarizers.anthropic(client, model="claude-sonnet-4-5", max_tokens=1000)(HISTORY)
    assert summary == "## Goal\nFix the test."
    assert rec.requests[0].url.path == "/v1/messages"
    sent = rec.body()
    assert sent == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1000,
        "system": summarizers.PROMPT,
        "messages": [{"role": "user", "content": render_transcript(HISTORY)}],
    }
    assert "tools" not in sent
    assert "Never edit tests/." in sent["messages"][0]["content"]


def test_openai_adapter_sends_the_prompt_and_transcript_without_tools() -> None:
    """The OpenAI adapter posts to /chat/completions with the model, system prompt, transcript, no tools."""
    import openai as openai_sdk

    rec = Recorder(OPENAI_REPLY)
    client = openai_sdk.OpenAI(
        api_key="test", http_client=httpx2.Client(transport=httpx2.MockTransport(rec))
    )
    chat = [
        {"role": "user", "content": "Fix it."},
        chat_assistant(("call_1", "bash")),
        chat_tool("call_1", "ok"),
    ]
    summary = summarizers.openai(client, model="gpt-5", max_tokens=500)(chat)
    assert summary == "## Goal\nFix the test."
    assert rec.requests[0].url.path.endswith("/chat/completions")
    sent = rec.body()
    assert sent == {
        "model": "gpt-5",
        "max_completion_tokens": 500,
        "messages": [
            {"role": "system", "content": summarizers.PROMPT},
            {"role": "user", "content": render_transcript(chat)},
        ],
    }
    assert "[tool call call_1] bash({})" in sent["messages"][1]["content"]


def test_async_anthropic_client_gives_an_async_summarizer() -> None:
    """An AsyncAnthropic client makes a coroutine summarizer sending the same request."""
    import anthropic as anthropic_sdk

    rec = Recorder(ANTHROPIC_REPLY)

    async def handler(request: httpx2.Request) -> httpx2.Response:
        return rec(request)

    client = anthropic_sdk.AsyncAnthropic(
        api_key="test", http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    )
    summarize = summarizers.anthropic(client, model="claude-haiku-4-5")

    async def run() -> str:
        out = summarize(HISTORY)
        assert not isinstance(out, str)
        return await out

    summary = asyncio.run(run())
    assert summary == "## Goal\nFix the test."
    assert rec.body()["model"] == "claude-haiku-4-5"


def test_adapter_refuses_an_object_that_is_not_a_client() -> None:
    """A value without the SDK's create method is refused when the summarizer is built."""
    with pytest.raises(InputError, match="anthropic SDK client"):
        summarizers.anthropic(object(), model="m")
    with pytest.raises(InputError, match="openai SDK client"):
        summarizers.openai(object(), model="m")


def test_the_transcript_shows_calls_and_results_in_each_format() -> None:
    """Calls and results render the same way from Anthropic, Chat and Responses messages."""
    responses = [
        {"role": "user", "content": "Fix it."},
        {"type": "function_call", "call_id": "c1", "name": "bash", "arguments": '{"cmd":"ls"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "a.py"},
    ]
    chat = [
        {"role": "user", "content": "Fix it."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"cmd":"ls"}'},
                }
            ],
        },
        chat_tool("c1", "a.py"),
    ]
    anth = [
        {"role": "user", "content": "Fix it."},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c1", "name": "bash", "input": {"cmd": "ls"}}],
        },
        results(("c1", "a.py")),
    ]
    want = '[user] Fix it.\n[tool call c1] bash({"cmd":"ls"})\n[tool result c1] a.py'
    assert render_transcript(responses) == want
    assert render_transcript(chat) == want
    assert render_transcript(anth) == want


def test_extractive_summary_is_deterministic_and_structured() -> None:
    """The extractive summarizer gives the same bytes twice, with the goal, files and errors."""
    summarize = summarizers.extractive()
    first = summarize(HISTORY)
    assert first == summarize([dict(m) for m in HISTORY])
    assert isinstance(first, str)
    assert "## Goal\n- [user] Fix the failing test in src/app.py. Never edit tests/." in first
    assert "- src/app.py" in first
    assert "- tests/test_app.py" in first
    assert "AssertionError" in first
    assert "## Current work\n- [assistant] The sum is off by one." in first


def test_extractive_summary_respects_its_size_limit() -> None:
    """A long history's extractive summary is cut to max_chars."""
    long = [{"role": "user", "content": "error " * 5_000}] * 20
    out = summarizers.extractive(max_chars=500)(long)
    assert isinstance(out, str)
    assert len(out) <= 500
    with pytest.raises(InputError):
        summarizers.extractive(max_chars=10)


def test_a_call_input_nested_past_the_recursion_limit_still_gets_a_summary() -> None:
    """The extractive summary of a call whose input nests 5,000 deep (or holds a 5,000-digit
    number) is written, the input shown as a placeholder, where RecursionError escaped."""
    deep: list[Any] = []
    inner = deep
    for _ in range(5_000):
        inner.append([])
        inner = inner[0]
    for value in (deep, 10**5000):
        call = {"type": "tool_use", "id": "toolu_9", "name": "bash", "input": {"v": value}}
        summary = summarizers.extractive()([*HISTORY, {"role": "assistant", "content": [call]}])
        assert isinstance(summary, str) and summary.startswith("## Goal")
