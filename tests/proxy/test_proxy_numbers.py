"""Numbers orjson would write otherwise (an integer beyond 64 bits, ``1E5``, ``-0``,
``1.0e400``) reach the upstream as the agent wrote them: the parts of a body the proxy did not
replace are the agent's bytes, and a body it cannot re-encode exactly goes up unchanged."""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from typing import Any

import httpx
import orjson
import pytest
import structlog

from tests.proxy._kit import Stack, anthropic_history

_HEADERS = {"content-type": "application/json", "x-api-key": "k", "anthropic-version": "v"}
_LITERALS = {
    '"@big"': "123456789012345678901234567890",
    '"@huge"': "18446744073709551617",
    '"@exp"': "1E5",
    '"@zero"': "-0",
    '"@tiny"': "1e-400",
    '"@long"': "0.10000000000000000555",
}
"""Placeholders and the literals put in their place: each parses to a value orjson writes back
otherwise (a float, ``100000.0``, ``0``, ``0.0``, ``0.1``)."""


def _written(value: Any) -> bytes:
    """``value`` as a Python SDK sends it (``json.dumps``), each placeholder replaced by its
    literal."""
    text = json.dumps(value)
    for placeholder, literal in _LITERALS.items():
        text = text.replace(placeholder, literal)
    return text.encode()


def _passthroughs(events: list[MutableMapping[str, Any]]) -> list[str]:
    return [e["reason"] for e in events if e["event"] == "toolbudget.proxy.passthrough"]


def test_numbers_in_the_parts_the_proxy_keeps_reach_the_upstream_as_written(stack: Stack) -> None:
    """A spaced body whose other fields and kept messages hold such literals: the upstream gets
    the agent's bytes with only the spilled result's message swapped for its envelope."""
    history = anthropic_history(1)
    call = history[1]["content"][0]
    call["input"] = {"id": "@big", "seed": "@huge", "limit": "@exp", "offset": "@zero"}
    body = {
        "model": "claude-sonnet-4-5",
        "temperature": "@exp",
        "metadata": {"trace": ["@huge", "@tiny", "@long", "@zero"]},
        "messages": history,
        "stop_sequences": ["@big"],
    }
    raw = _written(body)
    with structlog.testing.capture_logs() as events:
        answer = httpx.post(f"{stack.url}/v1/messages", content=raw, headers=_HEADERS)
    assert answer.status_code == 200
    [got] = stack.upstream.bodies("/v1/messages")
    envelope = orjson.loads(got)["messages"][2]
    assert envelope["content"][0]["content"].startswith("[toolbudget] Output of Bash")
    spilled = json.dumps(history[2]).encode()
    at = raw.index(spilled)
    assert got == raw[:at] + orjson.dumps(envelope) + raw[at + len(spilled) :]
    assert _passthroughs(events) == []


@pytest.mark.parametrize(
    ("literal", "reason"),
    [("1E5", "number not re-encodable"), ("1.0e400", "body is not JSON")],
    ids=["in-the-replaced-message", "beyond-a-double"],
)
def test_a_body_whose_numbers_cannot_be_kept_goes_upstream_unchanged(
    stack: Stack, literal: str, reason: str
) -> None:
    """A number orjson would rewrite inside the very message the proxy replaces, or one beyond
    a double's range anywhere: the body goes upstream byte for byte, with a passthrough event."""
    history = anthropic_history(1)
    history[2]["content"][0]["elapsed_ms"] = "@n"
    raw = (
        json.dumps({"model": "m", "messages": history}).encode().replace(b'"@n"', literal.encode())
    )
    with structlog.testing.capture_logs() as events:
        answer = httpx.post(f"{stack.url}/v1/messages", content=raw, headers=_HEADERS)
    assert stack.upstream.bodies("/v1/messages") == [raw]
    assert answer.status_code in (200, 400)  # the stand-in's own JSON parser refuses 1.0e400
    assert _passthroughs(events) == [reason]
