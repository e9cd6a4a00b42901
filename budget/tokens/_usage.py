"""The usage anchor: token usage a provider reported, normalized, and the estimate built on it.

Providers report prompt usage in different shapes:

* Anthropic Messages: ``input_tokens`` counts only the uncached part of the prompt;
  ``cache_read_input_tokens`` and ``cache_creation_input_tokens`` come on top, the latter split
  by the entries' lifetime in ``cache_creation`` (``ephemeral_5m_input_tokens``,
  ``ephemeral_1h_input_tokens``).
* OpenAI Chat Completions: ``prompt_tokens`` is the whole prompt, of which
  ``prompt_tokens_details.cached_tokens`` were read from the cache (and, where reported,
  ``cache_write_tokens`` written to it); ``completion_tokens`` is the answer.
* OpenAI Responses: ``input_tokens`` is the whole prompt, of which
  ``input_tokens_details.cached_tokens`` were cached; ``output_tokens`` is the answer.
* Google Gemini ``usage_metadata``: ``prompt_token_count`` is the whole prompt, of which
  ``cached_content_token_count`` were cached; ``candidates_token_count`` plus
  ``thoughts_token_count`` is the answer.

Anthropic's and the Responses API's ``input_tokens`` mean different things; the detail fields
tell them apart (``input_tokens_details`` only exists in Responses, ``cache_*_input_tokens`` only
in Anthropic). Without either, both readings agree: nothing was cached.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final, TypeGuard

from pydantic import BaseModel, ConfigDict, Field

from budget._errors import InputError

__all__ = ["ProviderUsage", "anchored_estimate", "is_token_count", "normalize_usage"]


MAX_TOKENS: Final = 2**53
"""The largest token count a usage may report: far above any real one, and exact as a JSON number
everywhere (the decision log keeps the last usage; a count orjson cannot write would stop it)."""


class ProviderUsage(BaseModel):
    """Token usage one provider response reported, in one shape whatever the provider."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input_tokens: int = Field(ge=0, le=MAX_TOKENS)
    """Prompt tokens neither read from nor written to the cache (billed at the base price)."""
    cache_read_tokens: int = Field(default=0, ge=0, le=MAX_TOKENS)
    cache_write_tokens: int = Field(default=0, ge=0, le=MAX_TOKENS)
    output_tokens: int = Field(default=0, ge=0, le=MAX_TOKENS)
    """The answer's tokens, reasoning included."""
    cache_write_1h_tokens: int = Field(default=0, ge=0, le=MAX_TOKENS)
    """Of ``cache_write_tokens``, those written to entries that live an hour (Anthropic's
    ``cache_creation.ephemeral_1h_input_tokens``: billed 2x the base price, not 1.25x)."""

    @property
    def prompt_tokens(self) -> int:
        """All tokens of the prompt that was sent, however they were billed."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    @property
    def total(self) -> int:
        """Prompt plus answer: what the next request's prompt at least contains, since it
        repeats this prompt and appends the answer (counting reasoning errs high, on purpose)."""
        return self.prompt_tokens + self.output_tokens


def _fields(obj: object) -> Mapping[str, Any] | None:
    """The usage's fields as a mapping: itself, an SDK model's dump, or its attributes."""
    if isinstance(obj, Mapping):
        return obj
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        dumped = dump()
        if isinstance(dumped, Mapping):
            return dumped
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        # Slotted dataclasses have no __dict__.
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    attrs = getattr(obj, "__dict__", None)
    if isinstance(attrs, Mapping):
        return attrs
    return None


def is_token_count(value: object) -> TypeGuard[int]:
    """Whether ``value`` is a token count a provider could report: a whole number (an int, not
    a bool) from 0 to 2**53 (what JSON numbers carry exactly)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS


def _count(fields: Mapping[str, Any] | None, *keys: str) -> int:
    """The first of ``keys`` present in ``fields`` as a count (absent or null: 0)."""
    if fields is None:
        return 0
    for key in keys:
        value = fields.get(key)
        if value is None:
            continue
        if not is_token_count(value):
            raise InputError(
                f"usage field {key!r} is {value!r}, not a whole number of tokens from 0 to 2**53"
            )
        return value
    return 0


def _has(fields: Mapping[str, Any], *keys: str) -> bool:
    return any(fields.get(k) is not None for k in keys)


_ANTHROPIC_CACHE = ("cache_creation_input_tokens", "cache_read_input_tokens")
_GEMINI_PROMPT = ("prompt_token_count", "promptTokenCount")
_NESTED = ("usage", "usage_metadata", "usageMetadata")


def normalize_usage(usage: Mapping[str, Any] | object | None) -> ProviderUsage | None:
    """Normalize a provider's usage report (a dict or an SDK object) to :class:`ProviderUsage`.

    Accepts, as a mapping or an object with those attributes (a pydantic model, an SDK object):

    * the Anthropic, OpenAI Chat, OpenAI Responses and Gemini usage shapes (module docstring);
    * LangChain's ``usage_metadata`` and pydantic-ai's ``RequestUsage`` (``input_tokens``...);
    * a whole response carrying one of them under ``usage``, ``usage_metadata`` or
      ``usageMetadata``.

    Returns ``None`` for ``None`` and for a response whose usage is ``None`` (nothing reported).
    Raises :class:`~budget.InputError` for anything else: a value that is no mapping or object
    (``usage=123``), one with none of the fields above, or a count that is not a non-negative
    integer.
    """
    if usage is None:
        return None
    fields = _fields(usage)
    if fields is None or isinstance(usage, str | bytes):
        raise InputError(
            f"usage must be a provider's usage report (a dict or SDK object with token counts) "
            f"or None, not {type(usage).__name__}"
        )
    if _has(fields, "prompt_tokens"):  # OpenAI Chat Completions
        prompt = _count(fields, "prompt_tokens")
        details = _fields(fields.get("prompt_tokens_details"))
        return _split(
            prompt,
            _count(details, "cached_tokens"),
            _count(details, "cache_write_tokens"),
            _count(fields, "completion_tokens"),
        )
    if _has(fields, "input_tokens"):
        if _has(fields, *_ANTHROPIC_CACHE):  # Anthropic: input excludes the cached parts
            return _anthropic(fields)
        details = _fields(fields.get("input_tokens_details"))  # Responses: input includes them
        return _split(
            _count(fields, "input_tokens"),
            _count(details, "cached_tokens"),
            _count(details, "cache_write_tokens"),
            _count(fields, "output_tokens"),
        )
    if _has(fields, *_GEMINI_PROMPT):
        return _split(
            _count(fields, *_GEMINI_PROMPT),
            _count(fields, "cached_content_token_count", "cachedContentTokenCount"),
            0,
            _count(fields, "candidates_token_count", "candidatesTokenCount")
            + _count(fields, "thoughts_token_count", "thoughtsTokenCount"),
        )
    for key in _NESTED:
        if key in fields:
            return normalize_usage(fields[key])
    known = ", ".join(("input_tokens", "prompt_tokens", "prompt_token_count", *_NESTED))
    raise InputError(
        f"usage has no token counts this library knows (expected one of {known}); "
        f"its fields: {', '.join(sorted(map(str, fields))[:8]) or 'none'}"
    )


def _anthropic(fields: Mapping[str, Any]) -> ProviderUsage:
    """An Anthropic usage: ``input_tokens`` without the cache's reads and writes, the writes
    split by their entries' lifetime in ``cache_creation``."""
    written = _count(fields, "cache_creation_input_tokens")
    by_ttl = _fields(fields.get("cache_creation"))
    return ProviderUsage(
        input_tokens=_count(fields, "input_tokens"),
        cache_read_tokens=_count(fields, "cache_read_input_tokens"),
        cache_write_tokens=written,
        output_tokens=_count(fields, "output_tokens"),
        cache_write_1h_tokens=min(_count(by_ttl, "ephemeral_1h_input_tokens"), written),
    )


def _split(prompt: int, cached: int, written: int, output: int) -> ProviderUsage:
    """A usage from a whole-prompt count that includes its cached and cache-written parts."""
    cached = min(cached, prompt)
    written = min(written, prompt - cached)
    return ProviderUsage(
        input_tokens=prompt - cached - written,
        cache_read_tokens=cached,
        cache_write_tokens=written,
        output_tokens=output,
    )


def anchored_estimate(full_estimate: int, usage_total: int | None, added_since: int) -> int:
    """The prompt-size estimate the budget acts on: pessimistic, never below either reading.

    ``usage_total`` is :attr:`ProviderUsage.total` of the last response (``None`` before the first
    one); ``added_since`` is the estimated tokens of the messages appended since that request
    (the answer's own message included: it is already in ``usage_total`` as output, so counting
    it again errs high, which is the safe side). The anchor corrects the character estimate's
    bias on what the provider has already counted; the full estimate still wins when the history
    grew by more than the anchor knows (for example after messages were replaced).
    """
    if usage_total is None:
        return full_estimate
    return max(full_estimate, usage_total + added_since)
