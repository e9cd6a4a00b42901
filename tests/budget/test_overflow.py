"""Tests for recognizing prompt-too-long errors, on real SDK exception objects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2
import pytest

from budget.tokens._overflow import is_context_overflow, overflow_limit

if TYPE_CHECKING:  # the tests import the SDKs themselves, so collecting this module imports none
    import anthropic
    import openai

ANTHROPIC_BODY = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": "prompt is too long: 208310 tokens > 200000 maximum",
    },
}
OPENAI_CHAT_BODY = {
    "error": {
        "message": (
            "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 131072 tokens. Please reduce the length of the messages."
        ),
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
OPENAI_RESPONSES_BODY = {
    "error": {
        "message": "Your input exceeds the context window of this model. Please adjust your "
        "input and try again.",
        "type": "invalid_request_error",
        "param": "input",
        "code": "context_length_exceeded",
    }
}


def _anthropic_error(status: int, body: dict[str, Any]) -> anthropic.APIStatusError:
    """Build the exception the anthropic client raises for this HTTP error response.

    Both SDKs are built on httpx2 (the successor of httpx), so the response is an httpx2 one.
    """
    import anthropic

    client = anthropic.Anthropic(api_key="test-key", base_url="http://localhost:9")
    request = httpx2.Request("POST", "http://localhost:9/v1/messages")
    response = httpx2.Response(status, json=body, request=request)
    return client._make_status_error_from_response(response)


def _openai_error(status: int, body: dict[str, Any]) -> openai.APIStatusError:
    """Build the exception the openai client raises for this HTTP error response."""
    import openai

    client = openai.OpenAI(api_key="test-key", base_url="http://localhost:9/v1")
    request = httpx2.Request("POST", "http://localhost:9/v1/chat/completions")
    response = httpx2.Response(status, json=body, request=request)
    return client._make_status_error_from_response(response)


def test_anthropic_sdk_prompt_too_long() -> None:
    """anthropic.BadRequestError for a too-long prompt is an overflow stating its maximum."""
    import anthropic

    error = _anthropic_error(400, ANTHROPIC_BODY)
    assert isinstance(error, anthropic.BadRequestError)
    assert is_context_overflow(error)
    assert overflow_limit(error) == 200_000


def test_anthropic_max_tokens_variant_and_413() -> None:
    """Input plus max_tokens over the limit, and a 413 request_too_large, are overflows."""
    body = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "input length and `max_tokens` exceed context limit: 188240 + 21333 > "
            "200000, decrease input length or `max_tokens` and try again",
        },
    }
    error = _anthropic_error(400, body)
    assert is_context_overflow(error)
    assert overflow_limit(error) == 200_000
    too_large = _anthropic_error(
        413,
        {
            "type": "error",
            "error": {"type": "request_too_large", "message": "Request exceeds the maximum size"},
        },
    )
    assert is_context_overflow(too_large)
    assert overflow_limit(too_large) is None


def test_openai_sdk_context_length_exceeded() -> None:
    """openai.BadRequestError with code context_length_exceeded is an overflow with its limit."""
    import openai

    error = _openai_error(400, OPENAI_CHAT_BODY)
    assert isinstance(error, openai.BadRequestError)
    assert error.code == "context_length_exceeded"
    assert is_context_overflow(error)
    assert overflow_limit(error) == 128_000
    responses = _openai_error(400, OPENAI_RESPONSES_BODY)
    assert is_context_overflow(responses)
    assert overflow_limit(responses) is None


def test_other_sdk_errors_are_not_overflows() -> None:
    """Other 400s, auth errors and token rate limits are not overflows."""
    import anthropic

    bad_param = _anthropic_error(
        400,
        {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "max_tokens: Field required"},
        },
    )
    assert not is_context_overflow(bad_param)
    rate = _anthropic_error(
        429,
        {
            "type": "error",
            "error": {
                "type": "rate_limit_error",
                "message": "This request would exceed the rate limit of 30,000 input tokens per "
                "minute; the prompt is too long for your remaining quota",
            },
        },
    )
    assert isinstance(rate, anthropic.RateLimitError)
    assert not is_context_overflow(rate)
    assert overflow_limit(rate) is None
    auth = _openai_error(401, {"error": {"message": "Incorrect API key", "code": "invalid_key"}})
    assert not is_context_overflow(auth)


def test_chained_wrapper_exception() -> None:
    """An overflow wrapped by a framework's own exception is found through the cause chain."""
    inner = _openai_error(400, OPENAI_CHAT_BODY)
    outer = RuntimeError("agent step failed")
    outer.__cause__ = inner  # what ``raise RuntimeError(...) from inner`` records
    assert is_context_overflow(outer)
    assert overflow_limit(outer) == 128_000


@pytest.mark.parametrize(
    ("error", "limit"),
    [
        (ANTHROPIC_BODY, 200_000),
        (json.dumps(OPENAI_CHAT_BODY), 128_000),
        ("prompt is too long: 1,050,001 tokens > 1,000,000 maximum", 1_000_000),
        (
            "The input token count (1200000) exceeds the maximum number of tokens allowed "
            "(1048576).",
            1_048_576,
        ),
        (
            "Prompt contains 140000 tokens and 0 draft tokens, too large for model with 131072 "
            "maximum context length",
            131_072,
        ),
        ("Input is too long for requested model.", None),
        ({"error": {"code": "context_length_exceeded"}}, None),
    ],
)
def test_bodies_and_plain_messages(error: object, limit: int | None) -> None:
    """Dict bodies, JSON text and plain messages from several providers are recognized."""
    assert is_context_overflow(error)
    assert overflow_limit(error) == limit


@pytest.mark.parametrize(
    "error",
    [None, "", "connection reset by peer", {"error": {"code": "server_error"}}, ValueError("x")],
)
def test_non_overflows(error: object) -> None:
    """Unrelated errors and empty values are not overflows and state no limit."""
    assert not is_context_overflow(error)
    assert overflow_limit(error) is None


def test_the_overflow_event_carries_the_stated_limit_and_class_never_the_text(
    tmp_path: Path,
) -> None:
    """``on_overflow`` with an SDK error quoting a secret emits ``context_overflow`` with the
    count, the limit the error states and its class, and the session believes that limit; the
    error's text is in no event."""
    import structlog

    from budget import Budget

    marker = "sk-ant-api03-ECHOEDSECRET"
    message = f"prompt is too long: 180000 tokens > 150000 maximum; request: {marker}"
    error = _anthropic_error(400, {"type": "error", "error": {"type": "x", "message": message}})
    assert marker in str(error)  # the SDK's message quotes the whole body
    with (
        structlog.testing.capture_logs() as events,
        Budget.open(tmp_path / "s", {"model": "claude-sonnet-4-5"}) as session,
    ):
        assert session.on_overflow(error)
        window = session.window()
    [event] = [e for e in events if e["event"] == "toolbudget.session.context_overflow"]
    assert (event["count"], event["limit"], event["error"]) == (1, 150_000, "BadRequestError")
    assert window == 150_000
    assert marker not in repr(events)
