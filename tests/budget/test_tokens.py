"""Tests for the character-based token estimator."""

from __future__ import annotations

from budget._tokens import (
    IMAGE_TOKENS_DEFAULT,
    TokenEstimator,
    estimate_text_tokens,
    estimate_tokens,
    tiktoken_estimator,
)


def test_empty_and_tiny_texts() -> None:
    """Empty text costs nothing and any non-empty text at least one token."""
    assert estimate_text_tokens("") == 0
    assert estimate_text_tokens("a") == 1
    assert estimate_text_tokens(" ") == 1


def test_cjk_costs_more_per_character_than_ascii() -> None:
    """CJK text is estimated near one token a character, ASCII prose far below."""
    cjk = "日本語のテキストです" * 10
    prose = "the quick brown fox " * 5
    assert estimate_text_tokens(cjk) >= len(cjk)
    assert estimate_text_tokens(prose) < len(prose) / 3


def test_structures_add_overhead_and_images() -> None:
    """A message costs its text plus framing, and an image block its flat estimate."""
    text = "hello there, how are you"
    msg = {"role": "user", "content": [{"type": "text", "text": text}]}
    assert estimate_tokens(msg) > estimate_text_tokens(text)
    img = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    assert estimate_tokens(img) >= IMAGE_TOKENS_DEFAULT


def test_estimator_protocol_and_missing_tiktoken() -> None:
    """estimate_tokens satisfies the protocol and tiktoken_estimator is None without tiktoken."""
    assert isinstance(estimate_tokens, TokenEstimator)
    assert tiktoken_estimator() is None
