"""Per-session memo of text token estimates, so no text is estimated twice on the request path.

A session looks at the same big texts more than once: the last messages of the previous history
are scanned again on the next request (callers move ``cache_control`` markers there in place),
and a fresh result is weighed by the passes and again as a staleness candidate. The memo keys an
estimate by the identity of the ``str`` object and keeps a reference to it, so the key cannot be
reused by another object while the entry lives. Entries live for two requests (the one that made
them and the next), which is all the re-scanning needs; the memo never grows with the history.

Very large texts (an unbounded log, a whole file) are estimated from evenly spaced samples: the
full estimator reads about 200 MB/s, which would cost more than hashing and spilling the text.
The sample is deterministic, so the same text always gets the same figure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from budget._errors import ConfigError, InputError
from budget.tokens._estimates_cache import CACHE_MIN_CHARS, EstimateCache
from budget.tokens._tokens import DEFAULT_PROFILE, TokenizerProfile

__all__ = ["MEMO_MIN_CHARS", "SAMPLE_ABOVE_CHARS", "TextTokens", "sampled_text_tokens"]

MEMO_MIN_CHARS: Final = 1
"""Every non-empty text is memoized: even a short one costs several times a lookup to estimate."""
SAMPLE_ABOVE_CHARS: Final = 256 * 1024
"""Longer texts are estimated from samples."""
_SAMPLES: Final = 32
_SAMPLE_CHARS: Final = 2_048


def sampled_text_tokens(
    text: str, count: Callable[[str], int] = DEFAULT_PROFILE.text_tokens
) -> int:
    """Estimated tokens of ``text`` from 32 evenly spaced 2,048-character samples, scaled up.

    Exact for texts that fit in the samples; for longer ones within a few percent on text whose
    character mix does not change abruptly (logs, source, JSON), at a fixed cost of 64 K chars.
    """
    n = len(text)
    if n <= _SAMPLES * _SAMPLE_CHARS:
        return count(text)
    step = n // _SAMPLES
    sampled = sum(count(text[i * step : i * step + _SAMPLE_CHARS]) for i in range(_SAMPLES))
    return round(sampled * n / (_SAMPLES * _SAMPLE_CHARS))


class TextTokens:
    """A text token estimator that remembers its answers over two requests.

    It counts with ``profile``'s character weights, or with ``exact`` (a tokenizer's count of a
    text) when one is given. ``known`` remembers estimates by the hash of the text beyond the
    two requests, across a resume (:mod:`budget.tokens._estimates_cache`); texts not worth hashing
    (shorter than ``CACHE_MIN_CHARS``, or long enough to be sampled) are estimated without it.
    """

    __slots__ = ("_count", "_cur", "_known", "_prev")

    def __init__(
        self,
        profile: TokenizerProfile = DEFAULT_PROFILE,
        exact: Callable[[str], int] | None = None,
        known: EstimateCache | None = None,
    ) -> None:
        self._count = _checked(exact) if exact is not None else profile.text_tokens
        self._known = known
        self._cur: dict[int, tuple[str, int]] = {}
        self._prev: dict[int, tuple[str, int]] = {}

    @property
    def known(self) -> EstimateCache | None:
        """The estimates kept across requests and resumes by text hash, if any."""
        return self._known

    def __call__(self, text: str) -> int:
        """Estimated tokens of ``text`` (memoized by identity)."""
        if len(text) < MEMO_MIN_CHARS:
            return self._count(text)
        key = id(text)
        hit = self._cur.get(key)
        if hit is not None and hit[0] is text:
            return hit[1]
        hit = self._prev.get(key)
        if hit is None or hit[0] is not text:
            if len(text) > SAMPLE_ABOVE_CHARS:
                hit = (text, sampled_text_tokens(text, self._count))
            elif self._known is not None and len(text) >= CACHE_MIN_CHARS:
                hit = (text, self._known.tokens(text, self._count))
            else:
                hit = (text, self._count(text))
        self._cur[key] = hit
        return hit[1]

    def next_request(self) -> None:
        """Start a new request: forget entries not used by the one that just ended."""
        self._prev = self._cur
        self._cur = {}
        if self._known is not None:
            self._known.tick()

    def clear(self) -> None:
        """Forget everything (the session rebuilt its caches)."""
        self._cur = {}
        self._prev = {}


_MAX_TOKENS: Final = 2**53
"""The largest count a text may have (as for a usage: exact as a JSON number in the log)."""


def _checked(count: Callable[[str], int]) -> Callable[[str], int]:
    """``count`` refusing what is no token count: the caller's counter is code we do not own,
    and a string, a negative or a 65-bit number would corrupt every estimate and the log.
    A ``count`` that is not callable (an encoding's name) is refused at once, naming it."""
    if not callable(count):
        raise InputError(
            "text_tokens must be a callable taking a text and returning its token count "
            f"(budget.tiktoken_text_tokens('o200k_base')), not {count!r:.80}"
        )

    def checked(text: str) -> int:
        n = count(text)
        if type(n) is not int or not 0 <= n <= _MAX_TOKENS:
            raise ConfigError(
                f"text_tokens must return a whole number of tokens from 0 to 2**53, got {n!r}"
            )
        return n

    return checked
