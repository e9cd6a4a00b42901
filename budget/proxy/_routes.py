"""What the proxy budgets and forwards: the three APIs by path, the headers it never forwards,
and its own error answer in each API's shape."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from starlette.responses import JSONResponse, Response

from budget.proxy._keys import SESSION_HEADER

__all__ = [
    "ANTHROPIC",
    "CHAT",
    "HOP_BY_HOP",
    "METHODS",
    "NOT_FORWARDED",
    "NOT_FORWARDED_UNTOUCHED",
    "OVERFLOW_STATUSES",
    "RESPONSES",
    "Api",
    "budgeted_api",
    "forwarded",
    "gateway_error",
]

HOP_BY_HOP: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
"""Headers that concern one connection, not the message (RFC 9110 §7.6.1): never forwarded."""
NOT_FORWARDED: Final = HOP_BY_HOP | {"host", "content-length", SESSION_HEADER}
"""Request headers the proxy does not pass on with a budgeted body: httpx sets host and length for
the upstream, and the session header is the proxy's own."""
NOT_FORWARDED_UNTOUCHED: Final = NOT_FORWARDED - {"content-length"}
"""Those it does not pass on with a body it streams untouched: its length is the agent's (without
it, httpx sends the stream chunked, and a GET with no body goes up with an empty chunked one)."""
OVERFLOW_STATUSES: Final = frozenset({400, 413})
"""Statuses a prompt-too-long comes with: Anthropic's ``invalid_request_error`` (400, "prompt is
too long") and OpenAI's ``context_length_exceeded`` (400); 413 is Anthropic's request_too_large.
A 429 or 5xx is never an overflow, whatever its message says."""
METHODS: Final = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"]


@dataclass(frozen=True, slots=True)
class Api:
    """A budgeted endpoint: its provider, the session's format, the field holding the history."""

    provider: str
    format: str
    field: str


ANTHROPIC: Final = Api("anthropic", "anthropic", "messages")
CHAT: Final = Api("openai", "openai_chat", "messages")
RESPONSES: Final = Api("openai", "openai_responses", "input")


def budgeted_api(method: str, path: str) -> Api | None:
    """The API a request is budgeted as, or None: it is forwarded untouched.

    By path suffix, so a base URL with a prefix works (``/v1/responses``, and Codex's
    ``/backend-api/codex/responses`` when signed in with ChatGPT).
    """
    if method != "POST":
        return None
    path = path.rstrip("/")
    if path.endswith("/v1/messages"):
        return ANTHROPIC
    if path.endswith("/chat/completions"):
        return CHAT
    if path.endswith("/responses"):
        return RESPONSES
    return None


def forwarded(
    raw: Sequence[tuple[bytes, bytes]], dropped: frozenset[str]
) -> list[tuple[bytes, bytes]]:
    """``raw`` headers without those named in ``dropped`` (lower case), nor those the message's
    ``Connection`` header names: they concern its connection only (RFC 9110 §7.6.1), as the
    fixed hop-by-hop ones do. ``dropped`` must hold ``connection``.

    Each header stays the bytes it came as (a value with a non-ASCII byte goes on unchanged).
    Connection's options are parsed only where the message has one: most have none.
    """
    kept: list[tuple[bytes, bytes]] = []
    options: list[bytes] = []
    for name, value in raw:
        lower = name.decode("latin-1").lower()
        if lower not in dropped:
            kept.append((name, value))
        elif lower == "connection":
            options.append(value)
    if not options:
        return kept
    # Case-insensitive comma-separated tokens, several Connection lines joined as one.
    named = {o.strip() for v in options for o in v.decode("latin-1").lower().split(",")}
    return [(k, v) for k, v in kept if k.decode("latin-1").lower() not in named]


def gateway_error(provider: str, error: str, url: str = "") -> Response:
    """A 502 in the provider's own error shape (on every path, budgeted or not: count_tokens,
    models), so the agent's SDK reports (and retries) it; it names the upstream ``url`` went to
    (its scheme and host only: no credentials, no query)."""
    parts = urlsplit(url)
    where = f" {parts.scheme}://{parts.netloc.rpartition('@')[2]}" if parts.netloc else ""
    message = f"toolbudget proxy: the upstream{where} could not be reached ({error})"
    if provider == "anthropic":
        body: dict[str, Any] = {
            "type": "error",
            "error": {"type": "api_error", "message": message},
        }
    else:
        body = {"error": {"message": message, "type": "api_error", "code": None}}
    return JSONResponse(body, status_code=502)
