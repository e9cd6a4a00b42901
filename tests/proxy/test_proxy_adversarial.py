"""A hostile review of the proxy with real agents' requests: what the SDKs and Claude Code send
(query strings, bodiless requests, server-side conversation state) reaches the upstream framed
and budgeted as the contract says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import orjson
import structlog

from budget.proxy import SESSION_HEADER
from tests.proxy._kit import Stack, steady_clock
from tests.strategies import big

_ANTHROPIC = {"x-api-key": "k", "anthropic-version": "2023-06-01"}


def _framing(stack: Stack) -> tuple[str | None, str | None]:
    """The last request's framing headers as the upstream received them."""
    last = stack.upstream.received[-1]
    return last.header("transfer-encoding"), last.header("content-length")


def test_a_request_passed_through_keeps_its_framing(stack: Stack) -> None:
    """A GET or HEAD without a body goes upstream without one (not as an empty chunked body),
    and a POST with a Content-Length keeps it (not turned into a chunked upload)."""
    with httpx.Client(base_url=stack.url, headers=_ANTHROPIC) as client:
        assert client.get("/v1/models?beta=true").status_code == 200
        assert _framing(stack) == (None, None)
        assert client.head("/v1/models").status_code == 200
        assert _framing(stack) == (None, None)
        body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
        answer = client.post("/v1/messages/count_tokens?beta=true", content=body)
        assert answer.status_code == 200
        assert _framing(stack) == (None, str(len(body)))
        assert stack.upstream.received[-1].body == body

        def chunks() -> Any:
            yield body[:10]
            yield body[10:]

        # A body the agent itself sent chunked goes on chunked: its length is not known ahead.
        client.post("/v1/messages/count_tokens", content=chunks())
        assert _framing(stack) == ("chunked", None)
        assert stack.upstream.received[-1].body == body


def _passthroughs(events: list[Any]) -> list[Any]:
    return [e["reason"] for e in events if e["event"] == "toolbudget.proxy.passthrough"]


def test_a_responses_request_in_a_stored_conversation_is_passed_through(stack: Stack) -> None:
    """A Responses request naming a ``conversation`` carries only its new items (the rest is
    stored upstream, as with ``previous_response_id``): it goes upstream as sent, with its own
    passthrough reason, and opens no session for what is not the conversation's start."""
    import openai

    client = openai.OpenAI(base_url=f"{stack.url}/v1", api_key="sk-test", max_retries=0)
    turns: list[Any] = [
        [{"role": "user", "content": "List it."}],
        [{"type": "function_call_output", "call_id": "f1", "output": big(150, "conv")}],
    ]
    with structlog.testing.capture_logs() as events:
        for items in turns:
            done = client.responses.create(model="gpt-5", conversation="conv_1", input=items)
            assert done.output_text == "ok"
    assert [sent["input"] for sent in stack.sent("/v1/responses")] == turns
    assert _passthroughs(events) == ["conversation", "conversation"]
    assert not stack.root.exists() or not any(stack.root.iterdir())


def _same_start(tag: str, rounds: int) -> list[Any]:
    """A conversation opening as every run of one task does (the same first message), then
    going its own way: its own calls, its own outputs."""
    history: list[Any] = [{"role": "user", "content": "Fix the failing test."}]
    for i in range(rounds):
        call = {"type": "tool_use", "id": f"{tag}{i}", "name": "Bash", "input": {"command": tag}}
        out = {"type": "tool_result", "tool_use_id": f"{tag}{i}", "content": big(150 + 40 * i, tag)}
        history += [{"role": "assistant", "content": [call]}, {"role": "user", "content": [out]}]
    return history


def _copies(root: Path, tags: str, rounds: int, *, named: bool = True) -> dict[str, list[Any]]:
    """Each conversation's request copies when ``tags``' conversations run side by side, a
    round each in turn, through one proxy (paths in envelopes made root-free), each named by
    its own session header when ``named``."""
    with Stack(root, usage_for=lambda _api, _body: None, clock=steady_clock(step=0.0)) as stack:
        for i in range(1, rounds + 1):
            for tag in tags:
                body = orjson.dumps({"model": "m", "messages": _same_start(tag, i)})
                headers = {**_ANTHROPIC, **({SESSION_HEADER: f"run-{tag}"} if named else {})}
                httpx.post(f"{stack.url}/v1/messages", content=body, headers=headers)
        sent = [
            b.replace(str(root).encode(), b"ROOT") for b in stack.upstream.bodies("/v1/messages")
        ]
    return {
        tag: [orjson.loads(b)["messages"] for b in sent[k :: len(tags)]]
        for k, tag in enumerate(tags)
    }


def test_two_runs_of_one_task_side_by_side_named_by_header_are_budgeted_as_each_alone(
    tmp_path: Path,
) -> None:
    """Two runs of one task (pass@k: the same first message, then each its own calls) through
    one proxy, each named by its ``x-toolbudget-session`` header (the documented way), are two
    sessions and get the copies each gets alone; unnamed, their start names one session."""
    rounds = 16
    alone = _copies(tmp_path / "a", "a", rounds)["a"] + _copies(tmp_path / "b", "b", rounds)["b"]
    both = _copies(tmp_path / "ab", "ab", rounds)
    assert both["a"] + both["b"] == alone
    assert sorted(p.name for p in (tmp_path / "ab").iterdir()) == [
        "anthropic-h-run-a",
        "anthropic-h-run-b",
    ]
    _copies(tmp_path / "shared", "ab", 2, named=False)
    assert len(list((tmp_path / "shared").iterdir())) == 1
