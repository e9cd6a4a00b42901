"""Recognizing a provider's "prompt is too long" error, and the limit it states.

Works on whatever the caller caught or received: an SDK exception (``anthropic.BadRequestError``,
``openai.BadRequestError``, wrappers that chain them), an error body as a dict or JSON text, or a
plain message. The error text is gathered from the exception's message, its ``body``,
``code``/``type`` attributes and its chained causes, then matched against the phrasings providers
use. No SDK is imported: the shapes are read duck-typed.

Recognized (case-insensitive):

* Anthropic: ``invalid_request_error`` "prompt is too long: 208310 tokens > 200000 maximum";
  "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000"; HTTP 413
  ``request_too_large``.
* OpenAI (Chat and Responses), and OpenAI-compatible servers (vLLM, DeepSeek, OpenRouter):
  code ``context_length_exceeded``; "This model's maximum context length is 128000 tokens";
  "Your input exceeds the context window of this model".
* Google Gemini: "The input token count (1200000) exceeds the maximum number of tokens allowed
  (1048576)".
* Others: Mistral "too large for model with 131072 maximum context length", Bedrock "Input is
  too long for requested model", LiteLLM's ``ContextWindowExceededError``.

Rate-limit errors (HTTP 429) mention tokens too but are never overflows.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

import orjson

__all__ = ["is_context_overflow", "overflow_limit"]

_OVERFLOW: Final = re.compile(
    r"prompt is too long"
    r"|prompt too long"
    r"|context_length_exceeded"
    r"|context[ _-]?length[ _-]?exceeded"
    r"|context[ _-]?window[ _-]?exceeded"
    r"|maximum context length"
    r"|exceeds? (?:the )?context (?:window|limit|length)"
    r"|exceeds? the maximum number of tokens"
    r"|input is too long"
    r"|reduce the length of the (?:messages|input|prompt)"
    r"|request_too_large"
    r"|too large for model with \d+ maximum context length",
    re.IGNORECASE,
)

# Each states the limit in its first group.
_LIMITS: Final = (
    re.compile(r"\d[\d,_]* tokens? > (\d[\d,_]*) maximum", re.IGNORECASE),
    re.compile(r"exceed context limit: \d[\d,_]* \+ \d[\d,_]* > (\d[\d,_]*)", re.IGNORECASE),
    re.compile(r"maximum context length is (\d[\d,_]*)", re.IGNORECASE),
    re.compile(r"maximum number of tokens allowed \((\d[\d,_]*)\)", re.IGNORECASE),
    re.compile(r"context (?:window|limit|length) of (\d[\d,_]*)", re.IGNORECASE),
    re.compile(r"with (\d[\d,_]*) maximum context length", re.IGNORECASE),
)
_OVERFLOW_CLASS_NAMES: Final = frozenset(
    {"ContextWindowExceededError", "ContextLengthExceededError", "ContextOverflowError"}
)
_RATE_LIMITED: Final = 429
_MAX_CHAIN: Final = 8  # causes followed, bounding cycles and deep wrapper chains


def _status(error: object) -> int | None:
    status = getattr(error, "status_code", None)
    if isinstance(status, int):
        return status
    if isinstance(error, Mapping):
        for key in ("status", "status_code", "code"):
            value = error.get(key)
            if isinstance(value, int):
                return value
    return None


def _body_text(body: Any) -> str:
    if body is None:
        return ""
    if isinstance(body, str):
        return body
    if isinstance(body, bytes | bytearray):
        return bytes(body).decode("utf-8", "replace")
    try:
        return orjson.dumps(body, default=str).decode()
    except TypeError:
        return str(body)


def _texts(error: object) -> Iterator[str]:
    """Every piece of text the error carries, its chained causes included."""
    seen: set[int] = set()
    current: object = error
    for _ in range(_MAX_CHAIN):
        if current is None or id(current) in seen:
            return
        seen.add(id(current))
        if isinstance(current, BaseException):
            yield type(current).__name__
            yield str(current)
            for attr in ("body", "code", "type", "error_code", "message"):
                value = getattr(current, attr, None)
                if value is not None and not callable(value):
                    yield _body_text(value)
            current = current.__cause__ or current.__context__
        else:
            yield _body_text(current)
            return


def _is_rate_limit(error: object) -> bool:
    current: object = error
    for _ in range(_MAX_CHAIN):
        if current is None:
            return False
        if _status(current) == _RATE_LIMITED:
            return True
        current = (
            (current.__cause__ or current.__context__)
            if isinstance(current, BaseException)
            else None
        )
    return False


def is_context_overflow(error: object) -> bool:
    """Whether ``error`` is a provider refusing the prompt as longer than the context window.

    ``error`` may be an exception (its message, ``body``, ``code`` and chained causes are read),
    an error body (dict) or its JSON text, or a plain message. Rate-limit (429) errors are
    never overflows, whatever they say about tokens.
    """
    if error is None or _is_rate_limit(error):
        return False
    return any(t in _OVERFLOW_CLASS_NAMES or _OVERFLOW.search(t) for t in _texts(error))


def overflow_limit(error: object) -> int | None:
    """The maximum prompt tokens an overflow error states, or ``None``.

    ``None`` when ``error`` is not an overflow (see :func:`is_context_overflow`) or does not
    state the limit (OpenAI's Responses API, for one, does not).
    """
    if not is_context_overflow(error):
        return None
    for text in _texts(error):
        for pattern in _LIMITS:
            match = pattern.search(text)
            if match:
                return int(re.sub(r"[,_]", "", match.group(1)))
    return None
