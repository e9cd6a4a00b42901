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
Python-level loop over characters: one ``bytes.translate`` maps each byte to its weight, and
``zlib.adler32`` sums the weights of each 2,729-byte chunk (its low half is one plus the sum of the
bytes modulo 65,521, which a chunk's weights never reach; see :func:`text_units`). A non-ASCII
character is classified by its UTF-8 lead byte, its weight split between the lead byte and its
continuation bytes. Measured in CPU time on the development machine: about 1 GB/s on ASCII text
(8 kB in 8 us; the popcount of a big integer this replaced took 18 us), 400 MB/s on text with
non-ASCII characters.
"""

from __future__ import annotations

import re
import zlib
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

# Weights are integers in units of 1/_UNITS_PER_TOKEN token, carried by the UTF-8 bytes, at most
# _MAX_BYTE_UNITS a byte: a chunk of _CHUNK_BYTES bytes sums to less than Adler-32's modulus.
_UNITS_PER_TOKEN: Final = 11
_MAX_BYTE_UNITS: Final = 24
_ADLER_MOD: Final = 65_521
_CHUNK_BYTES: Final = (_ADLER_MOD - 2) // _MAX_BYTE_UNITS
"""Bytes whose weights one ``zlib.adler32`` sums: one plus their sum stays under the modulus."""

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
    weights: bytes
    """Each byte's weight in units (0 to :data:`_MAX_BYTE_UNITS`)."""


def _build_tables(overrides: Mapping[str, int]) -> _Tables:
    unknown = set(overrides) - set(_CHAR_UNITS)
    if unknown:
        raise ValueError(f"unknown character classes {sorted(unknown)}")
    units = {**_CHAR_UNITS, **overrides}
    weights = bytearray(256)
    for b in range(256):
        weight = _byte_units(b, units)
        if not 0 <= weight <= _MAX_BYTE_UNITS:
            raise ValueError(f"byte 0x{b:02x} weighs {weight} units, outside 0..{_MAX_BYTE_UNITS}")
        weights[b] = weight
    return _Tables(bytes(weights))


_TABLES: Final = _build_tables({})
_CLASS_NAMES: Final = (*_CHAR_UNITS, "cont")
# Maps each byte to the index of its class, for counting classes (diagnostics, fitting).
_CLASS_TABLE: Final = bytes(_CLASS_NAMES.index(_byte_class(b)) for b in range(256))


def text_class_counts(text: str) -> dict[str, int]:
    """Count the characters of ``text`` per class (the estimator's input; for diagnostics)."""
    classes = text.encode("utf-8", "surrogatepass").translate(_CLASS_TABLE)
    return {name: classes.count(i) for i, name in enumerate(_CLASS_NAMES) if name != "cont"}


def text_units(text: str, tables: _Tables = _TABLES) -> int:
    """The summed per-byte weights of ``text``, in units of 1/11 of a Claude token."""
    data = text.encode("utf-8", "surrogatepass").translate(tables.weights)
    # Adler-32's low 16 bits are 1 + the sum of the bytes, modulo 65,521: exact for a chunk
    # whose weights sum below it (it is C code, and much faster than summing in Python).
    if len(data) <= _CHUNK_BYTES:
        return (zlib.adler32(data) & 0xFFFF) - 1
    view = memoryview(data)
    units = 0
    for start in range(0, len(data), _CHUNK_BYTES):
        units += zlib.adler32(view[start : start + _CHUNK_BYTES]) & 0xFFFF
    return units - -(-len(data) // _CHUNK_BYTES)


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
