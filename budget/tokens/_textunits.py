"""Text to tokens by character class, and the tokenizer family of a model.

Text is counted by character class, not by length alone, because providers' byte-level BPE
tokenizers are much denser on some classes than others:

* ASCII letters merge into word pieces (about 4-5 letters a token, the space before a word
  merging into it); digits split into short groups; punctuation and newlines mostly stand alone
  or pair up, so code and JSON cost far more tokens per character than prose.
* CJK ideographs, kana and Hangul are about one token each (often more on older vocabularies).
* Other non-ASCII text (Cyrillic, Greek, accented Latin, Indic...) sits in between, and emoji and
  other 4-byte characters cost two or more tokens each.

The estimate is a weighted sum over the UTF-8 bytes of the text, computed in C with no
Python-level loop over characters: one ``bytes.translate`` maps each byte to a code whose set bits
encode its weight, and ``int.bit_count`` on the result sums them (see :func:`estimate_text_tokens`).
A non-ASCII character is classified by its UTF-8 lead byte, its weight split between the lead byte
and its continuation bytes. Measured in CPU time on the development machine: about 230-270 MB/s
on ASCII text, 130-240 MB/s on text with non-ASCII characters.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from budget._errors import InputError

__all__ = [
    "ANTHROPIC_PROFILE",
    "DEFAULT_PROFILE",
    "GOOGLE_PROFILE",
    "OPENAI_PROFILE",
    "TokenizerProfile",
    "estimate_text_tokens",
    "text_class_counts",
    "text_units",
    "tokenizer_profile",
]


# --- character classes ----------------------------------------------------------------------

# Weights are integers in units of 1/_UNITS_PER_TOKEN token, carried by the UTF-8 bytes.
# ASCII text (the common case, and the one that must be fastest) uses one table whose codes hold
# up to 8 set bits, so one popcount sums it. Text with non-ASCII characters uses a second table
# whose codes hold ``lo`` set bits in the low nibble (1 unit each) and ``hi`` in the high nibble
# (5 units each): popcount(all) + 4 * popcount(high nibbles) sums up to 24 units a byte.
_UNITS_PER_TOKEN: Final = 11
_MAX_ASCII_UNITS: Final = 8
_MAX_BYTE_UNITS: Final = 24

# Tokens per character of each class, in units (1/11 token). Set from how byte-level BPE
# vocabularies split text, then scaled to the growth of prompt tokens recorded in real traces
# (``python -m benchmarks.tokens``): code and tool output run about 1.3 times denser in Claude's
# tokenizer than in OpenAI's o200k, and the default follows the denser one, since an
# underestimate is the costly error (the prompt overflows) and an overestimate only trims early.
_CHAR_UNITS: Final[dict[str, int]] = {
    "letter": 3,  # 0.27: a word of 4-5 letters (plus its leading space) is about one token
    "digit": 7,  # 0.64: digits split into groups of 1-3 (Gemini and Llama: one each)
    "punct": 7,  # 0.64: brackets, quotes, operators mostly stand alone or pair up
    "space": 1,  # 0.09: a space merges into the next word; indentation runs merge too
    "newline": 8,  # 0.73: a newline often carries the next line's indentation with it
    "latin2": 8,  # 0.73: accented Latin, Greek, Cyrillic, Hebrew, Arabic (2-byte UTF-8)
    "other3": 11,  # 1.0: U+0800-U+1FFF: Indic, Thai, Georgian, Vietnamese precomposed
    "symbol3": 11,  # 1.0: U+2000-U+2FFF: typographic punctuation, arrows, box drawing, math
    "cjk": 14,  # 1.27: U+3000-U+FFFF: CJK ideographs, kana, Hangul, fullwidth forms
    "wide4": 28,  # 2.55: 4-byte characters: emoji (often 2-3 byte-level tokens), rare CJK
}
# Units carried by each UTF-8 continuation byte; the lead byte carries the rest of the character.
_CONT_UNITS: Final = 4


@dataclass(frozen=True, slots=True)
class TokenizerProfile:
    """How one family of models counts a prompt: its text density and its message framing.

    Vocabularies differ in density (Claude's splits code and tool output into about 1.2 times
    as many tokens as OpenAI's o200k or Gemini's), and chat templates differ in what a message,
    a tool call and a tool result add around their text.
    """

    name: str
    units_per_token: int
    """Character weight units (1/11 of a Claude token each) per token of this family."""
    message: int
    """Tokens a message adds around its content (role markers, separators)."""
    block: int
    """Tokens a content block adds (a text or image part inside a message)."""
    tool_call: int
    """Tokens a tool call adds around its id, name and JSON input."""
    tool_result: int
    """Tokens a tool result adds around its id and content."""
    class_units: tuple[tuple[str, int], ...] = ()
    """Per-class weights (in units) that differ from the default ones, e.g. ``(("digit", 12),)``."""
    _tables: _Tables = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_tables", _build_tables(dict(self.class_units)))

    def text_tokens(self, text: str) -> int:
        """Estimated tokens of plain ``text`` for this family."""
        return estimate_text_tokens(text, self)


def _lead_byte_class(b: int) -> tuple[str, int]:
    """The class and byte length of the character a UTF-8 lead byte (>= 0xC0) starts."""
    if b < 0xE0:
        return "latin2", 2
    if b < 0xE2:
        return "other3", 3
    if b == 0xE2:
        return "symbol3", 3
    if b < 0xF0:
        # U+3000-U+FFFF, also private use U+E000-U+F8FF, which the lead byte cannot tell apart
        # from fullwidth forms; it is rare, and counting it as CJK errs high.
        return "cjk", 3
    return "wide4", 4


def _byte_class(b: int) -> str:
    if b >= 0xC0:
        return _lead_byte_class(b)[0]
    if b >= 0x80:
        return "cont"
    c = chr(b)
    if c.isalpha():
        return "letter"
    if c.isdigit():
        return "digit"
    if c == "\n":
        return "newline"
    if c in " \t\r\f\v":
        return "space"
    return "punct"


def _byte_units(b: int, units: Mapping[str, int]) -> int:
    if b >= 0xC0:
        cls, length = _lead_byte_class(b)
        return units[cls] - (length - 1) * _CONT_UNITS
    if b >= 0x80:
        return _CONT_UNITS
    return units[_byte_class(b)]


class _Tables(NamedTuple):
    ascii: bytes | None
    """Codes of up to 8 set bits per ASCII byte; None when an ASCII class weighs more."""
    wide: bytes
    """Codes of ``lo`` bits (1 unit each) in the low nibble and ``hi`` (5 each) in the high."""


def _build_tables(overrides: Mapping[str, int]) -> _Tables:
    unknown = set(overrides) - set(_CHAR_UNITS)
    if unknown:
        raise ValueError(f"unknown character classes {sorted(unknown)}")
    units = {**_CHAR_UNITS, **overrides}
    ascii_table, wide_table = bytearray(256), bytearray(256)
    ascii_fits = True
    for b in range(256):
        weight = _byte_units(b, units)
        if not 0 <= weight <= _MAX_BYTE_UNITS:
            raise ValueError(f"byte 0x{b:02x} weighs {weight} units, outside 0..{_MAX_BYTE_UNITS}")
        if b < 0x80:
            if weight > _MAX_ASCII_UNITS:
                ascii_fits = False
            else:
                ascii_table[b] = (1 << weight) - 1
        hi, lo = divmod(weight, 5)
        wide_table[b] = ((1 << hi) - 1) << 4 | ((1 << lo) - 1)
    return _Tables(bytes(ascii_table) if ascii_fits else None, bytes(wide_table))


_TABLES: Final = _build_tables({})
_CLASS_NAMES: Final = (*_CHAR_UNITS, "cont")
# Maps each byte to the index of its class, for counting classes (diagnostics, fitting).
_CLASS_TABLE: Final = bytes(_CLASS_NAMES.index(_byte_class(b)) for b in range(256))
# Chunks small enough that the translated copy and its integer stay in the CPU cache.
_CHUNK: Final = 1 << 15
# A chunk of _CHUNK characters is at most 4 * _CHUNK bytes of UTF-8.
_HIGH_NIBBLES: Final = int.from_bytes(b"\xf0" * (4 * _CHUNK), "little")


def text_class_counts(text: str) -> dict[str, int]:
    """Count the characters of ``text`` per class (the estimator's input; for diagnostics)."""
    classes = text.encode("utf-8", "surrogatepass").translate(_CLASS_TABLE)
    return {name: classes.count(i) for i, name in enumerate(_CLASS_NAMES) if name != "cont"}


def text_units(text: str, tables: _Tables = _TABLES) -> int:
    """The summed per-byte weights of ``text``, in units of 1/11 of a Claude token."""
    ascii_table = tables.ascii
    if ascii_table is not None and text.isascii():
        if len(text) <= _CHUNK:  # the common case, without the loop's slicing
            codes = text.encode("ascii").translate(ascii_table)
            units = int.from_bytes(codes, "little").bit_count()
        else:
            units = 0
            for start in range(0, len(text), _CHUNK):
                codes = text[start : start + _CHUNK].encode("ascii").translate(ascii_table)
                units += int.from_bytes(codes, "little").bit_count()
    else:
        units = 0
        wide_table = tables.wide
        for start in range(0, len(text), _CHUNK):
            chunk = text[start : start + _CHUNK].encode("utf-8", "surrogatepass")
            value = int.from_bytes(chunk.translate(wide_table), "little")
            units += value.bit_count() + 4 * (value & _HIGH_NIBBLES).bit_count()
    return units


def estimate_text_tokens(text: str, profile: TokenizerProfile | None = None) -> int:
    """Estimate the tokens of plain text from its per-class character counts.

    Empty text is 0; any non-empty text is at least 1. The estimate is a sum of non-negative
    per-byte weights rounded up once, so appending text never lowers it. ``profile`` picks the
    tokenizer family's weights (default: :data:`DEFAULT_PROFILE`, the costliest of each class).
    """
    if not text:
        return 0
    if profile is None:
        profile = DEFAULT_PROFILE
    return max(1, -(-text_units(text, profile._tables) // profile.units_per_token))


ANTHROPIC_PROFILE: Final = TokenizerProfile(
    "anthropic", units_per_token=_UNITS_PER_TOKEN, message=4, block=2, tool_call=16, tool_result=20
)
OPENAI_PROFILE: Final = TokenizerProfile(
    "openai", units_per_token=13, message=4, block=2, tool_call=16, tool_result=20
)
# Gemini's SentencePiece vocabulary (shared with Gemma) splits every digit into its own token and
# keeps each newline a token of its own.
GOOGLE_PROFILE: Final = TokenizerProfile(
    "google",
    units_per_token=12,
    message=2,
    block=0,
    tool_call=8,
    tool_result=8,
    class_units=(("digit", 12), ("newline", 12)),
)
DEFAULT_PROFILE: Final = TokenizerProfile(
    "unknown",
    units_per_token=_UNITS_PER_TOKEN,
    message=4,
    block=2,
    tool_call=16,
    tool_result=20,
    class_units=(("digit", 11), ("newline", 11)),
)
"""For a model of unknown family: each class at its costliest among the known families (Claude's
density, digits and newlines a token each as in Gemini, Qwen and DeepSeek), and the heaviest
framing, since an underestimate is the costly error (the prompt overflows) and an overestimate
only trims early."""

# Substrings of a model name (lowercased) that tell its tokenizer family, tried in order.
_FAMILY_MARKERS: Final[tuple[tuple[str, TokenizerProfile], ...]] = (
    ("claude", ANTHROPIC_PROFILE),
    ("gemini", GOOGLE_PROFILE),
    ("gemma", GOOGLE_PROFILE),
    ("gpt", OPENAI_PROFILE),
    ("codex", OPENAI_PROFILE),
    # Llama 3 and 4 use tiktoken-style byte-level BPE vocabularies of 128k-202k entries, close
    # to o200k in density.
    ("llama", OPENAI_PROFILE),
)
_OPENAI_REASONING: Final = re.compile(r"(?:^|[/:])o\d(?:$|[-_.])")


def tokenizer_profile(model: str | None) -> TokenizerProfile:
    """The profile of ``model``'s family, from its name; :data:`DEFAULT_PROFILE` if unknown.

    Names are matched loosely, so provider prefixes and dates do not matter
    (``openrouter/google/gemini-3-pro-preview``, ``claude-sonnet-4-5-20250929``, ``o3-mini``).
    """
    if model is None or model == "":
        return DEFAULT_PROFILE
    if not isinstance(model, str):
        raise InputError(f"model must be a model name (a string), not {model!r:.80}")
    name = model.lower()
    for marker, profile in _FAMILY_MARKERS:
        if marker in name:
            return profile
    if _OPENAI_REASONING.search(name):
        return OPENAI_PROFILE
    return DEFAULT_PROFILE
