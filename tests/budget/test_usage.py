"""Tests for usage normalization and the anchored estimate."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from budget import Budget, BudgetConfig, estimate_tokens
from budget._errors import InputError
from budget.tokens._usage import (
    ProviderUsage,
    anchored_estimate,
    is_token_count,
    normalize_usage,
)


def test_anthropic_dict_keeps_cache_parts_separate() -> None:
    """Anthropic's input_tokens excludes cache reads and writes, which are added on top."""
    usage = normalize_usage(
        {
            "input_tokens": 12,
            "cache_creation_input_tokens": 300,
            "cache_read_input_tokens": 5000,
            "output_tokens": 40,
        }
    )
    assert usage == ProviderUsage(
        input_tokens=12, cache_read_tokens=5000, cache_write_tokens=300, output_tokens=40
    )
    assert usage.prompt_tokens == 5312
    assert usage.total == 5352


def test_anthropic_sdk_object() -> None:
    """An anthropic.types.Usage object normalizes like its dict."""
    from anthropic.types import Usage as AnthropicUsage

    sdk = AnthropicUsage(
        input_tokens=7,
        output_tokens=9,
        cache_read_input_tokens=100,
        cache_creation_input_tokens=None,
    )
    usage = normalize_usage(sdk)
    assert usage == ProviderUsage(input_tokens=7, cache_read_tokens=100, output_tokens=9)
    assert usage.total == 116


def test_openai_chat_shapes() -> None:
    """OpenAI Chat prompt_tokens includes cached tokens, which are split out."""
    from openai.types import CompletionUsage
    from openai.types.completion_usage import PromptTokensDetails

    as_dict = {
        "prompt_tokens": 1000,
        "completion_tokens": 50,
        "total_tokens": 1050,
        "prompt_tokens_details": {"cached_tokens": 800},
    }
    sdk = CompletionUsage(
        prompt_tokens=1000,
        completion_tokens=50,
        total_tokens=1050,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=800),
    )
    expected = ProviderUsage(input_tokens=200, cache_read_tokens=800, output_tokens=50)
    assert normalize_usage(as_dict) == expected
    assert normalize_usage(sdk) == expected
    assert expected.total == 1050


def test_openai_responses_shapes() -> None:
    """OpenAI Responses input_tokens includes the cached and cache-written tokens it details."""
    from openai.types.responses import ResponseUsage
    from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

    sdk = ResponseUsage(
        input_tokens=3000,
        input_tokens_details=InputTokensDetails(cached_tokens=2048, cache_write_tokens=500),
        output_tokens=120,
        output_tokens_details=OutputTokensDetails(reasoning_tokens=64),
        total_tokens=3120,
    )
    expected = ProviderUsage(
        input_tokens=452, cache_read_tokens=2048, cache_write_tokens=500, output_tokens=120
    )
    assert normalize_usage(sdk) == expected
    assert normalize_usage(sdk.model_dump()) == expected


def test_uncached_input_tokens_and_nested_usage() -> None:
    """A bare input/output pair means nothing was cached; a whole response is searched for usage."""
    assert normalize_usage({"input_tokens": 5, "output_tokens": 2}) == ProviderUsage(
        input_tokens=5, output_tokens=2
    )
    response = {"id": "msg_1", "usage": {"prompt_tokens": 10, "completion_tokens": 1}}
    assert normalize_usage(response) == ProviderUsage(input_tokens=10, output_tokens=1)


def test_gemini_usage_metadata() -> None:
    """Gemini's prompt count includes cached content; thoughts count as output."""
    usage = normalize_usage(
        {
            "usageMetadata": {
                "promptTokenCount": 900,
                "cachedContentTokenCount": 600,
                "candidatesTokenCount": 30,
                "thoughtsTokenCount": 70,
            }
        }
    )
    assert usage == ProviderUsage(input_tokens=300, cache_read_tokens=600, output_tokens=100)


def test_unrecognized_and_invalid_usage() -> None:
    """None and a response without usage give None; a negative count is an InputError naming
    the field."""
    assert normalize_usage(None) is None
    assert normalize_usage({"id": "msg_1", "usage": None}) is None
    with pytest.raises(InputError, match="output_tokens"):
        normalize_usage({"input_tokens": 1, "output_tokens": -3})


def test_usage_that_is_no_usage_shape_is_refused(tmp_path: Path) -> None:
    """usage=123, a string or a dict with no token counts is an InputError, not silently ignored
    (also through prepare)."""
    for bad, says in ((123, "not int"), ("100 tokens", "not str"), ({"foo": 1}, "fields: foo")):
        with pytest.raises(InputError, match=says):
            normalize_usage(bad)
    messages = [{"role": "user", "content": "hi"}]
    with Budget.open(tmp_path / "s") as session, pytest.raises(InputError, match="usage"):
        session.prepare(messages, usage=123)


def test_usage_from_a_slotted_dataclass() -> None:
    """A dataclass with slots (no __dict__) is read by its fields, like an SDK object."""

    @dataclasses.dataclass(frozen=True, slots=True)
    class Counts:
        input_tokens: int
        output_tokens: int

    assert normalize_usage(Counts(10, 2)) == ProviderUsage(input_tokens=10, output_tokens=2)


def test_anchored_estimate_is_pessimistic() -> None:
    """The anchored estimate is the larger of the full estimate and anchor plus added tokens."""
    assert anchored_estimate(1000, None, 50) == 1000
    assert anchored_estimate(1000, 1200, 50) == 1250
    assert anchored_estimate(5000, 1200, 50) == 5000


def _reply_round(reply: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Summarize the log."},
        {"role": "assistant", "content": [{"type": "text", "text": reply}]},
        {"role": "user", "content": "And what failed?"},
    ]


def test_a_stream_start_output_count_does_not_shrink_the_anchor() -> None:
    """A reply counts at no less than its estimate when the usage reports a token or so for it."""
    reply = "The build failed in step three because the linker ran out of memory. " * 40
    msgs = _reply_round(reply)
    added = estimate_tokens(msgs[1]) + estimate_tokens(msgs[2])
    b = Budget.in_memory()
    b.prepare(msgs[:1], now=0)
    # message_start of an Anthropic stream reports output_tokens=1; the reply is ~600 tokens.
    start = b.prepare(msgs, usage={"input_tokens": 20_000, "output_tokens": 1}, now=1)
    assert start.report.tokens_after >= 20_000 + added
    b = Budget.in_memory()
    b.prepare(msgs[:1], now=0)
    # A reported count larger than the visible text (thinking included) is kept as reported.
    full = b.prepare(msgs, usage={"input_tokens": 20_000, "output_tokens": 5_000}, now=1)
    assert full.report.tokens_after >= 20_000 + 5_000 + estimate_tokens(msgs[2])
    assert full.report.tokens_after > start.report.tokens_after


def test_the_configured_models_family_sets_the_estimates() -> None:
    """A session for an OpenAI model counts a history lower than one for Claude, and one with no
    model counts it highest."""
    msgs = _reply_round("for i in range(10):\n    total += values[i] * weights[i]\n" * 50)
    counts: dict[str | None, int] = {}
    for model in ("claude-sonnet-4-5", "gpt-5", None):
        b = Budget.in_memory(BudgetConfig(model=model))
        counts[model] = b.prepare(msgs, now=0).report.tokens_before
        assert counts[model] == estimate_tokens(msgs, model=model)
    assert counts["gpt-5"] < counts["claude-sonnet-4-5"] <= counts[None]


def test_an_exact_text_counter_replaces_the_character_weights_in_a_session() -> None:
    """A session given a text counter counts every text with it and keeps the framing."""
    msgs = _reply_round("exact counts come from the tokenizer, framing from the profile " * 20)
    b = Budget.in_memory(BudgetConfig(model="gpt-5"), text_tokens=len)
    report = b.prepare(msgs, now=0).report
    assert report.tokens_before == estimate_tokens(msgs, model="gpt-5", text=len)
    assert report.tokens_before > estimate_tokens(msgs, model="gpt-5")


@pytest.mark.parametrize("value", [0, 7, 2**53, -1, 2**53 + 1, True, 3.0, "5", None])
def test_the_library_and_the_bench_importers_refuse_the_same_token_counts(value: Any) -> None:
    """One predicate (``is_token_count``) serves both: a usage the library refuses is one the
    bench's importers skip, and the other way round."""
    from benchmarks.importers._check import _bad_usage
    from benchmarks.trace import Usage

    ok = is_token_count(value)
    assert ok is (type(value) is int and 0 <= value <= 2**53)
    library_ok = True
    try:
        normalize_usage({"input_tokens": value, "output_tokens": 1})
    except InputError:
        library_ok = False
    assert library_ok is ok
    assert (_bad_usage(Usage(input_tokens=value)) is None) is ok
