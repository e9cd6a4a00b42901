"""Recorded sessions from ../shared/traces replayed through the proxy: for every request the
upstream receives exactly the bytes the library produces for the same session (a Claude Code
session with its subagent, each its own session; a Codex CLI rollout over the Responses API)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from budget import Budget
from budget.proxy import session_key
from tests._shared import SharedTraces
from tests.proxy._kit import BUDGET, Stack

pytestmark = pytest.mark.traces

_CODEX_OUTPUTS = frozenset(
    {"reasoning", "function_call", "custom_tool_call", "web_search_call", "local_shell_call"}
)
"""Responses items the model emits: a run of them after other items is one model call."""

TIGHT: Mapping[str, Any] = {**BUDGET, "window": 16_000}
"""A window these sessions outgrow, so the usage fed back (calibration, pressure) and the clock
(the cache's lifetime) decide the copies too, not only the caps."""


def _usage_of(field: str) -> Callable[[str, dict[str, Any]], dict[str, int]]:
    """A usage derived from what the upstream received, so the library's replay can compute the
    same one from its own copy: half the bytes, above the session's own estimate, so that the
    usage fed back moves its calibration and pressure (a proxy that dropped it fails both
    replays)."""

    def usage(api: str, body: Mapping[str, Any]) -> dict[str, int]:
        tokens = len(orjson.dumps(body.get(field))) // 2
        if api == "anthropic":
            return {"input_tokens": tokens, "cache_read_input_tokens": 0, "output_tokens": 7}
        return {"input_tokens": tokens, "output_tokens": 7, "total_tokens": tokens + 7}

    return usage


def _expected_bytes(body: dict[str, Any], field: str, copy: list[Any]) -> bytes:
    """The body the proxy forwards for the library's ``copy``: the agent's own bytes when the
    copy replaced nothing, else the body re-encoded with the copy in place."""
    history = body[field]
    if len(copy) == len(history) and all(a is b for a, b in zip(copy, history, strict=True)):
        return orjson.dumps(body)
    return orjson.dumps({**body, field: copy})


def _replay(
    tmp_path: Path, path: str, field: str, fmt: str, requests: list[tuple[dict[str, Any], float]]
) -> tuple[dict[str, list[bytes]], dict[str, list[bytes]]]:
    """The bodies the upstream received per session through the proxy, and the library's."""
    usage_for = _usage_of(field)
    times = iter([t for _, t in requests])
    root = tmp_path / "sessions"
    keys = [session_key(fmt, {}, body, body[field]) for body, _ in requests]
    # The library first, in the very directories the proxy will use (envelopes name the file).
    expected: dict[str, list[bytes]] = {}
    for key in dict.fromkeys(keys):
        mine = [body for (body, _), k in zip(requests, keys, strict=True) if k == key]
        ticks = iter([t for (_, t), k in zip(requests, keys, strict=True) if k == key])
        copies: list[list[Any]] = []
        settings = {**TIGHT, "model": mine[0]["model"]}
        with Budget.open(root / key, settings, format=fmt) as session:
            usage: Mapping[str, Any] | None = None
            for body in mine:
                # A history parsed from the bytes, as the proxy has it: no object shared with
                # the request before.
                history = orjson.loads(orjson.dumps(body[field]))
                copy = session.prepare(history, usage=usage, now=next(ticks)).messages
                copies.append(copy)
                usage = usage_for(_api(fmt), {field: copy})
        expected[key] = [_expected_bytes(b, field, c) for b, c in zip(mine, copies, strict=True)]
        shutil.rmtree(root / key)
    received: dict[str, list[bytes]] = {k: [] for k in expected}
    with (
        Stack(root, usage_for=usage_for, clock=lambda: next(times), budget=TIGHT) as stack,
        httpx.Client() as client,
    ):
        for (body, _), key in zip(requests, keys, strict=True):
            before = len(stack.upstream.received)
            answer = client.post(stack.url + path, content=orjson.dumps(body), headers=_HEADERS)
            assert answer.status_code == 200, answer.text
            received[key].append(stack.upstream.received[before].body)
    return received, expected


_HEADERS = {
    "content-type": "application/json",
    "x-api-key": "sk-ant-replay",
    "anthropic-version": "2023-06-01",
}


def _api(fmt: str) -> str:
    return {"anthropic": "anthropic", "openai_responses": "responses"}[fmt]


def test_a_claude_code_session_and_its_subagent_reach_the_upstream_as_the_library_copies_them(
    shared_trace_set: SharedTraces, tmp_path: Path
) -> None:
    """The recorded Claude Code session ef958aa1 and its subagent, interleaved by time, both
    carrying the session id in ``metadata.user_id`` as Claude Code sends it: two sessions, and
    every body the upstream receives is the library's request copy, byte for byte."""
    traces = {t.name: t for t in shared_trace_set[0]}
    main, sub = traces["claude-code/ef958aa1"], traces["claude-code/agent-a4ca7529"]
    user_id = json.dumps({"device_id": "d" * 64, "account_uuid": "", "session_id": "ef958aa1"})
    requests = []
    for trace, system in ((main, "You are Claude Code."), (sub, "You are a subagent.")):
        for i, request in enumerate(trace.requests):
            body = {
                "model": trace.model,
                "max_tokens": 32000,
                "system": [{"type": "text", "text": system}],
                "messages": trace.request_messages(i),
                "metadata": {"user_id": user_id},
                "stream": True,
            }
            requests.append((body, request.timestamp or 0.0))
    requests.sort(key=lambda r: r[1])
    received, expected = _replay(tmp_path, "/v1/messages", "messages", "anthropic", requests)
    assert len(received) == 2
    assert sorted(len(v) for v in received.values()) == sorted(
        [len(main.requests), len(sub.requests)]
    )
    for key in expected:
        assert received[key] == expected[key], key
    # Not a vacuous match: the small limits replaced results in the copies.
    assert any(b"[toolbudget]" in body for bodies in received.values() for body in bodies)


def _codex_requests(rollout: Path) -> list[tuple[dict[str, Any], float]]:
    """The Responses requests Codex made in ``rollout``: at each model call, every item so far."""
    instructions = ""
    items: list[Any] = []
    requests: list[tuple[dict[str, Any], float]] = []
    previous_was_output = False
    for line in rollout.read_text().splitlines():
        record = json.loads(line)
        payload = record.get("payload") or {}
        if record.get("type") == "session_meta":
            instructions = (payload.get("base_instructions") or {}).get("text", "")
        if record.get("type") != "response_item":
            continue
        kind = payload.get("type")
        output = kind in _CODEX_OUTPUTS or (
            kind == "message" and payload.get("role") == "assistant"
        )
        if output and not previous_was_output and items:
            body = {
                "model": "gpt-5.5",
                "instructions": instructions,
                "input": list(items),
                "tools": [],
                "stream": True,
                "store": False,
            }
            requests.append((body, 1_778_488_000.0 + 10.0 * len(requests)))
        previous_was_output = output
        items.append(payload)
    return requests


def test_a_codex_rollout_reaches_the_upstream_as_the_library_copies_it(
    shared_traces: Path, tmp_path: Path
) -> None:
    """The recorded Codex CLI rollout, each model call sent as Codex sends it (every item so far,
    reasoning included, to ``/v1/responses``): one session, and every body the upstream receives
    is the library's request copy, byte for byte."""
    [rollout] = sorted((shared_traces / "codex-cli").rglob("*.jsonl"))
    requests = _codex_requests(rollout)
    assert len(requests) > 20
    received, expected = _replay(tmp_path, "/v1/responses", "input", "openai_responses", requests)
    [key] = received
    assert received[key] == expected[key]
    assert sum(b"[toolbudget]" in body for body in received[key]) > 0
