"""Tests for the character-based token estimator."""

from __future__ import annotations

import base64
import struct
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from budget import InputError
from budget.tokens._tokens import (
    ANTHROPIC_PROFILE,
    DEFAULT_PROFILE,
    GOOGLE_PROFILE,
    IMAGE_TOKENS_DEFAULT,
    OPENAI_PROFILE,
    TokenEstimator,
    TokenizerProfile,
    estimate_image_tokens,
    estimate_text_tokens,
    estimate_tokens,
    text_class_counts,
    text_units,
    tiktoken_estimator,
    tiktoken_text_tokens,
    tokenizer_profile,
)

# Pinned estimates (Claude's profile). Weights are in 1/11 token per character: letter 3, digit 7, punctuation 7,
# space 1, newline 8; a 2-byte (Cyrillic...) character 8, CJK 14, U+2000-U+2FFF symbol 11, a
# 4-byte (emoji) character 28. The sum is rounded up once.
PINNED = [
    # 35 letters, 8 spaces, 1 period: (105 + 8 + 7) / 11 = 10.9 -> 11; one token a word or
    # so, as BPE vocabularies give (cl100k: 10).
    ("The quick brown fox jumps over the lazy dog.", 11),
    # Code: 16 letters, 5 punctuation, 9 spaces, 2 newlines: (48 + 35 + 9 + 16) / 11 = 9.8 -> 10.
    # Denser than prose per character (31 characters, 10 tokens), as code is.
    ("def add(a, b):\n    return a + b\n", 10),
    # JSON: 8 letters, 5 digits, 9 punctuation, 3 spaces: (24 + 35 + 63 + 3) / 11 = 11.4 -> 12.
    ('{"id": 12345, "ok": true}', 12),
    # CJK: 10 characters at 14/11 each: 12.7 -> 13, a bit over one token a character.
    ("日本語のテキストです", 13),
    # Two 4-byte emoji (28 each) and one U+2705 symbol (11): 67 / 11 = 6.1 -> 7.
    ("🚀🐳✅", 7),
    # Mixed: 6 Cyrillic (8 each), 5 letters, 3 digits, 2 punctuation, 2 spaces:
    # (48 + 15 + 21 + 14 + 2) / 11 = 9.1 -> 10.
    ("Привет, world! 123", 10),
]


@pytest.mark.parametrize(("text", "tokens"), PINNED)
def test_pinned_estimates(text: str, tokens: int) -> None:
    """Known strings get the estimate their character classes add up to."""
    assert estimate_text_tokens(text, ANTHROPIC_PROFILE) == tokens
    assert estimate_tokens(text, model="claude-sonnet-4-5") == tokens


def test_class_counts() -> None:
    """Characters are counted once each, by class, multi-byte ones at their lead byte."""
    counts = text_class_counts("aé日😀 1\n.")
    assert counts == {
        "letter": 1,
        "digit": 1,
        "punct": 1,
        "space": 1,
        "newline": 1,
        "latin2": 1,
        "other3": 0,
        "symbol3": 0,
        "cjk": 1,
        "wide4": 1,
    }


def test_empty_and_tiny_texts() -> None:
    """Empty text costs nothing and any non-empty text at least one token."""
    assert estimate_text_tokens("") == 0
    assert estimate_text_tokens("a") == 1
    assert estimate_text_tokens(" ") == 1


def test_script_rates() -> None:
    """Per character, CJK costs more than other non-ASCII text, which costs more than ASCII."""
    n = 1000
    ascii_rate = estimate_text_tokens("word " * (n // 5)) / n
    cyrillic_rate = estimate_text_tokens("слово" * (n // 5)) / n
    cjk_rate = estimate_text_tokens("漢" * n) / n
    assert ascii_rate < cyrillic_rate < cjk_rate
    assert cjk_rate >= 1.0


def test_long_text_spanning_chunks() -> None:
    """Texts longer than one internal chunk are summed exactly, ASCII and not."""
    unit = "abc, 123\n"
    claude = ANTHROPIC_PROFILE
    assert estimate_text_tokens(unit * 20_000, claude) == -(
        -(3 * 3 + 7 + 1 + 3 * 7 + 8) * 20_000 // 11
    )
    wide = "日本" * 40_000
    assert estimate_text_tokens(wide) == -(-14 * 80_000 // 11)


@given(st.text(), st.text())
def test_appending_never_lowers_the_estimate(a: str, b: str) -> None:
    """Appending text never lowers the estimate, and the parts bound the whole (up to rounding)."""
    whole = estimate_text_tokens(a + b)
    assert whole >= estimate_text_tokens(a)
    assert whole >= estimate_text_tokens(b)
    assert whole <= estimate_text_tokens(a) + estimate_text_tokens(b) + 1


def test_lone_surrogates_do_not_fail() -> None:
    """A lone surrogate (from broken decoding) counts as the 3-byte character its bytes make.

    Encoded with surrogatepass, U+D800 is ED A0 80: a character of the U+3000-U+FFFF class
    (14/11). "ok \\ud800 ok": 4 letters (12) + 2 spaces (2) + 14 = 28 units -> 2.5 -> 3 tokens,
    exactly as "ok 가 ok" (U+AC00, the same class).
    """
    text = "ok \ud800 ok"
    assert text_class_counts(text)["cjk"] == 1
    assert estimate_text_tokens(text, ANTHROPIC_PROFILE) == 3
    assert text_units(text) == text_units("ok 가 ok")
    assert estimate_text_tokens(text) == estimate_text_tokens("ok 가 ok")
    message = {"role": "user", "content": text}
    assert estimate_tokens(message) == estimate_tokens({"role": "user", "content": "ok 가 ok"})


def _png(width: int, height: int) -> str:
    ihdr = struct.pack(">II", width, height) + b"\x08\x02\x00\x00\x00"
    raw = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + b"\x00" * 64
    return base64.b64encode(raw).decode()


def _jpeg(width: int, height: int) -> str:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00" + b"\x00" * 9
    sof0 = b"\xff\xc0" + struct.pack(">HBHH", 17, 8, height, width) + b"\x00" * 10
    return base64.b64encode(b"\xff\xd8" + app0 + sof0 + b"\x00" * 32).decode()


def test_image_blocks() -> None:
    """Images cost pixels/750 (capped), read from base64 headers; else the flat default."""

    def png(data: str) -> dict[str, Any]:
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": data},
        }

    small = png(_png(800, 600))
    # 800 x 600 / 750 = 640, plus 2 tokens of block framing.
    assert estimate_tokens(small) == 642
    huge = png(_png(6000, 4000))
    assert estimate_tokens(huge) == IMAGE_TOKENS_DEFAULT + 2
    jpeg = {"type": "image", "source": {"type": "base64", "data": _jpeg(300, 200)}}
    assert estimate_tokens(jpeg) == 80 + 2
    url = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    assert estimate_tokens(url) == IMAGE_TOKENS_DEFAULT + 2
    low = {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}}
    assert estimate_tokens(low) == 85 + 2
    data_url = {"type": "input_image", "image_url": "data:image/png;base64," + _png(150, 100)}
    assert estimate_tokens(data_url) == 20 + 2
    assert estimate_image_tokens(None, None) == IMAGE_TOKENS_DEFAULT


def test_base64_payload_is_never_counted_as_text() -> None:
    """A large image's base64 body does not add to its cost."""
    data = _png(100, 100) + "A" * 2_000_000
    block = {"type": "image", "source": {"type": "base64", "data": data}}
    assert estimate_tokens(block) == 14 + 2


def test_message_structure_overhead() -> None:
    """Messages add role and block framing; tool calls add their id, name and JSON input."""
    text = "hello there, how are you"
    t = estimate_text_tokens
    p = DEFAULT_PROFILE
    user = {"role": "user", "content": [{"type": "text", "text": text}]}
    assert estimate_tokens(user) == p.message + t("user") + p.block + t(text)
    call = {"type": "tool_use", "id": "toolu_01A", "name": "Bash", "input": {"command": "ls -la"}}
    json_input = orjson.dumps(call["input"]).decode()
    assert estimate_tokens(call) == p.tool_call + t("toolu_01A") + t("Bash") + t(json_input)
    result = {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "a\nb\n"}
    assert estimate_tokens(result) == p.tool_result + t("toolu_01A") + t("a\nb\n")
    assert estimate_tokens([user, user]) == 2 * estimate_tokens(user)


def test_openai_shapes() -> None:
    """OpenAI Chat tool calls and tool messages count their ids, names and arguments."""
    t = estimate_text_tokens
    p = DEFAULT_PROFILE
    msg = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "grep", "arguments": '{"q": "x"}'},
            }
        ],
    }
    call = p.tool_call + t("call_1") + t("grep") + t('{"q": "x"}')
    assert estimate_tokens(msg) == p.message + t("assistant") + call
    tool = {"role": "tool", "tool_call_id": "call_1", "content": "found"}
    framing = p.message + p.tool_result
    assert estimate_tokens(tool) == framing + t("tool") + t("call_1") + t("found")


def test_bookkeeping_is_ignored() -> None:
    """Signatures, cache_control and usage are not sent as tokens and are not counted."""
    t = estimate_text_tokens
    block = DEFAULT_PROFILE.block
    thinking = {"type": "thinking", "thinking": "step one", "signature": "S" * 5000}
    assert estimate_tokens(thinking) == block + t("step one")
    marked = {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}
    assert estimate_tokens(marked) == block + t("hi")


def test_sdk_objects_are_dumped() -> None:
    """SDK objects with model_dump() are estimated like their dict form."""
    from anthropic.types import TextBlock

    block = TextBlock(type="text", text="some answer text", citations=None)
    assert estimate_tokens(block) == estimate_tokens({"type": "text", "text": "some answer text"})


def test_exact_text_estimator_can_be_plugged_in() -> None:
    """A text estimator passed in replaces the character estimate and keeps the framing."""
    msg = {"role": "user", "content": "abcdef"}
    framing = DEFAULT_PROFILE.message
    assert estimate_tokens(msg, text=len) == framing + len("user") + len("abcdef")


def test_estimator_protocol_and_missing_tiktoken() -> None:
    """estimate_tokens satisfies the protocol and tiktoken_estimator is None without tiktoken."""
    assert isinstance(estimate_tokens, TokenEstimator)
    assert tiktoken_estimator() is None
    assert tiktoken_text_tokens() is None


@pytest.mark.parametrize(
    ("model", "profile"),
    [
        ("claude-sonnet-4-5-20250929", ANTHROPIC_PROFILE),
        ("anthropic/claude-opus-4-7", ANTHROPIC_PROFILE),
        ("gpt-5.5", OPENAI_PROFILE),
        ("openai/gpt-5-ca", OPENAI_PROFILE),
        ("o3-mini", OPENAI_PROFILE),
        ("openai/o4-mini", OPENAI_PROFILE),
        ("codex-mini-latest", OPENAI_PROFILE),
        ("openrouter/google/gemini-3-pro-preview", GOOGLE_PROFILE),
        ("gemma-3-27b-it", GOOGLE_PROFILE),
        ("openai/openrouter-llama-4-maverick", OPENAI_PROFILE),
        ("deepseek-chat", DEFAULT_PROFILE),
        ("solo-model", DEFAULT_PROFILE),
        (None, DEFAULT_PROFILE),
        ("", DEFAULT_PROFILE),
    ],
)
def test_tokenizer_profile_from_model_name(model: str | None, profile: TokenizerProfile) -> None:
    """A model name picks its tokenizer family whatever its provider prefix or date suffix."""
    assert tokenizer_profile(model) is profile


@pytest.mark.parametrize("model", [5, b"gpt-5", ["gpt-5"]])
def test_a_model_that_is_not_a_name_is_an_input_error(model: Any) -> None:
    """tokenizer_profile and estimate_tokens(model=...) refuse a model that is no string, and
    estimate_tokens(text=...) a text counter that is not callable, with an InputError."""
    with pytest.raises(InputError, match=r"^model must be a model name"):
        tokenizer_profile(model)
    with pytest.raises(InputError, match=r"^model must be a model name"):
        estimate_tokens("x", model=model)
    with pytest.raises(InputError, match=r"^text must be a callable"):
        estimate_tokens("x", text="o200k_base")  # type: ignore[arg-type]


def test_unknown_family_gets_the_densest_profile() -> None:
    """The default profile counts at least as many tokens as any family, so it errs high."""
    text = "def add(a, b):\n    return a + b  # 日本語 🚀\n" * 50
    message = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t", "content": text}],
    }
    for profile in (ANTHROPIC_PROFILE, OPENAI_PROFILE, GOOGLE_PROFILE):
        assert estimate_text_tokens(text, DEFAULT_PROFILE) >= estimate_text_tokens(text, profile)
        assert estimate_tokens(message) >= estimate_tokens(message, model=profile)
    for field in ("message", "block", "tool_call", "tool_result"):
        heaviest = max(
            getattr(p, field) for p in (ANTHROPIC_PROFILE, OPENAI_PROFILE, GOOGLE_PROFILE)
        )
        assert getattr(DEFAULT_PROFILE, field) == heaviest


def test_profile_density_divides_the_same_units() -> None:
    """A family's text estimate is the same character weights over its units per token."""
    text = "x = compute(alpha, beta) + value\n" * 20
    units = text_units(text)
    for profile in (ANTHROPIC_PROFILE, OPENAI_PROFILE):
        assert estimate_text_tokens(text, profile) == -(-units // profile.units_per_token)
        assert profile.text_tokens(text) == estimate_text_tokens(text, profile)
    assert estimate_tokens(text, model="gpt-5") == estimate_text_tokens(text, OPENAI_PROFILE)


def test_gemini_counts_each_digit_and_newline_as_a_token() -> None:
    """Gemini's vocabulary splits digits and keeps newlines apart: one token each."""
    assert estimate_text_tokens("1234567890", GOOGLE_PROFILE) == 10
    assert estimate_text_tokens("\n" * 12, GOOGLE_PROFILE) == 12
    assert estimate_text_tokens("1234567890", ANTHROPIC_PROFILE) < 10
    # The same weights whether the text is ASCII or not (Gemini's digits overflow the ASCII table).
    line = "line 42 of 1000\n"
    mixed = line * 30 + "é"
    assert estimate_tokens(mixed, model="gemini-2.5-pro") == estimate_text_tokens(
        mixed, GOOGLE_PROFILE
    )
    assert estimate_text_tokens(line * 30, GOOGLE_PROFILE) <= estimate_text_tokens(
        mixed, GOOGLE_PROFILE
    )


def test_a_profile_with_an_unknown_class_or_overweight_byte_is_refused() -> None:
    """Profiles are checked when built: unknown classes and weights past the tables' range fail."""
    with pytest.raises(ValueError, match="unknown character classes"):
        TokenizerProfile("x", 11, 4, 2, 8, 6, class_units=(("vowel", 3),))
    with pytest.raises(ValueError, match="outside"):
        TokenizerProfile("x", 11, 4, 2, 8, 6, class_units=(("digit", 40),))


def test_a_tool_input_no_json_encoder_can_write_is_an_input_error() -> None:
    """A tool call's input holding a 5,000-digit integer is an InputError, not a bare ValueError."""
    call = {"type": "tool_use", "id": "t1", "name": "cat", "input": {"n": 10**5000}}
    with pytest.raises(InputError, match="input"):
        estimate_tokens([{"role": "assistant", "content": [call]}])


def test_a_structure_nested_past_the_recursion_limit_is_an_input_error() -> None:
    """A message nested 5,000 deep, or holding itself, is an InputError from estimate_tokens,
    as it is from prepare, not a bare RecursionError."""
    deep: dict[str, Any] = {}
    inner = deep
    for _ in range(5_000):
        inner["a"] = {}
        inner = inner["a"]
    looped: dict[str, Any] = {"role": "user", "content": "x"}
    looped["self"] = looped
    nested = {"role": "user", "content": [{"type": "text", "text": "x", "meta": deep}]}
    for message in (nested, looped):
        with pytest.raises(InputError, match="nest too deeply"):
            estimate_tokens([message])
