"""Character-based token estimation: no network, no model download, fast enough for every result.

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

Message structures (Anthropic or OpenAI shapes, dicts or lists of them) are estimated as the sum
of their texts plus fixed overheads for roles, blocks and tool-call framing; images count by an
estimate from their pixel size when it can be read cheaply, else a flat figure.
"""

from __future__ import annotations

import base64
import binascii
import importlib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple, Protocol, runtime_checkable

import orjson

__all__ = [
    "ANTHROPIC_PROFILE",
    "DEFAULT_PROFILE",
    "GOOGLE_PROFILE",
    "IMAGE_TOKENS_DEFAULT",
    "OPENAI_PROFILE",
    "TokenEstimator",
    "TokenizerProfile",
    "estimate_image_tokens",
    "estimate_text_tokens",
    "estimate_tokens",
    "text_class_counts",
    "text_units",
    "tiktoken_estimator",
    "tiktoken_text_tokens",
    "tokenizer_profile",
]


@runtime_checkable
class TokenEstimator(Protocol):
    """Anything that maps a text or a message structure to a token count.

    The built-in :func:`estimate_tokens` is one; an exact tokenizer can be plugged in instead.
    """

    def __call__(self, obj: Any, /) -> int:
        """Return the (estimated) number of tokens of ``obj``."""
        ...


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
    if not model:
        return DEFAULT_PROFILE
    name = model.lower()
    for marker, profile in _FAMILY_MARKERS:
        if marker in name:
            return profile
    if _OPENAI_REASONING.search(name):
        return OPENAI_PROFILE
    return DEFAULT_PROFILE


# --- images -------------------------------------------------------------------------------

IMAGE_TOKENS_DEFAULT: Final = 1600
"""Tokens charged for an image whose size is unknown: Anthropic's cost of a full-size image
(about 1.15 megapixels at 750 pixels a token), which is also near OpenAI's high-detail cost."""

_IMAGE_MAX_EDGE: Final = 1568  # Anthropic resizes larger images to fit this long edge
_PIXELS_PER_TOKEN: Final = 750
_OPENAI_LOW_DETAIL: Final = 85


def estimate_image_tokens(width: int | None, height: int | None) -> int:
    """Tokens of one image of the given pixel size (Anthropic's rule: pixels / 750 after the
    image is scaled to fit a 1568-pixel long edge); the flat default when the size is unknown."""
    if not width or not height or width <= 0 or height <= 0:
        return IMAGE_TOKENS_DEFAULT
    scale = min(1.0, _IMAGE_MAX_EDGE / max(width, height))
    w, h = width * scale, height * scale
    return min(IMAGE_TOKENS_DEFAULT, max(1, math.ceil(w * h / _PIXELS_PER_TOKEN)))


def _image_size(head: bytes) -> tuple[int, int] | None:
    """Read width and height from the first bytes of a PNG, GIF or JPEG file."""
    if head.startswith(b"\x89PNG\r\n\x1a\n") and len(head) >= 24:
        return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        return int.from_bytes(head[6:8], "little"), int.from_bytes(head[8:10], "little")
    if head.startswith(b"\xff\xd8"):
        i = 2
        while i + 9 < len(head):
            if head[i] != 0xFF:
                return None
            marker = head[i + 1]
            seg_len = int.from_bytes(head[i + 2 : i + 4], "big")
            # SOF0-SOF15 carry the frame size, except DHT (C4), JPG (C8) and DAC (CC).
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                return int.from_bytes(head[i + 7 : i + 9], "big"), int.from_bytes(
                    head[i + 5 : i + 7], "big"
                )
            i += 2 + seg_len
    return None


_HEAD_B64_CHARS: Final = 64 * 1024  # enough for JPEG headers with EXIF before the frame marker


def _base64_image_tokens(data: str) -> int:
    if data.startswith("data:"):
        data = data.partition(",")[2]
    chunk = data[: _HEAD_B64_CHARS - _HEAD_B64_CHARS % 4]
    try:
        head = base64.b64decode(chunk + "=" * (-len(chunk) % 4))
    except (binascii.Error, ValueError):
        return IMAGE_TOKENS_DEFAULT
    size = _image_size(head)
    return estimate_image_tokens(*size) if size else IMAGE_TOKENS_DEFAULT


def _image_block_tokens(block: Mapping[str, Any]) -> int:
    """One image block: Anthropic ``image``, OpenAI ``image_url`` or Responses ``input_image``."""
    width, height = block.get("width"), block.get("height")
    if isinstance(width, int) and isinstance(height, int):
        return estimate_image_tokens(width, height)
    url: Any = block.get("image_url")
    detail = block.get("detail")
    if isinstance(url, Mapping):
        detail = url.get("detail", detail)
        url = url.get("url")
    if detail == "low":
        return _OPENAI_LOW_DETAIL
    if isinstance(url, str) and url.startswith("data:"):
        return _base64_image_tokens(url)
    source = block.get("source")
    if isinstance(source, Mapping) and source.get("type") == "base64":
        data = source.get("data")
        if isinstance(data, str):
            return _base64_image_tokens(data)
    return IMAGE_TOKENS_DEFAULT


_TextFn = Callable[[str], int]

# --- message structures ---------------------------------------------------------------------

_DOCUMENT_DEFAULT: Final = 1600
_REDACTED_THINKING: Final = 100

# Keys whose values are never sent as tokens (signatures, provider bookkeeping, cache control).
_SKIP_KEYS: Final = frozenset(
    {
        "type",
        "signature",
        "cache_control",
        "citations",
        "usage",
        "stop_reason",
        "stop_sequence",
        "model",
        "status",
        "annotations",
        "logprobs",
        "refusal",
        "encrypted_content",
    }
)
_IMAGE_TYPES: Final = frozenset({"image", "image_url", "input_image"})
_TOOL_CALL_TYPES: Final = frozenset(
    {"tool_use", "server_tool_use", "function_call", "custom_tool_call", "function"}
)
_TOOL_RESULT_TYPES: Final = frozenset(
    {"tool_result", "function_call_output", "custom_tool_call_output", "web_search_tool_result"}
)


def _json_tokens(value: Any, text: _TextFn) -> int:
    """Tokens of a value sent as JSON (tool-call input): its compact serialization as text."""
    if isinstance(value, str):
        return text(value)
    try:
        dumped = orjson.dumps(value, default=str).decode()
    except TypeError:
        dumped = str(value)
    return text(dumped)


def _mapping_tokens(obj: Mapping[str, Any], text: _TextFn, fr: TokenizerProfile) -> int:
    kind = obj.get("type")
    if not isinstance(kind, str | None):
        kind = ""  # a type of another kind (even an unhashable one): an unknown block
    if kind in _IMAGE_TYPES:
        return _image_block_tokens(obj) + fr.block
    if kind == "document":
        return _document_tokens(obj, text, fr)
    if kind == "redacted_thinking":
        return _REDACTED_THINKING
    if kind in _TOOL_CALL_TYPES:
        return _tool_call_block_tokens(obj, text, fr)
    if kind in _TOOL_RESULT_TYPES:
        total = fr.tool_result
        for key, value in obj.items():
            if key not in _SKIP_KEYS and key != "is_error":
                total += _value_tokens(value, text, fr)
        return total
    total = fr.block if kind is not None else 0
    if "role" in obj:
        total += fr.message
        if obj["role"] == "tool":  # an OpenAI Chat tool message is a tool result
            total += fr.tool_result
    for key, value in obj.items():
        if key in _SKIP_KEYS:
            continue
        if key in {"role", "name"}:
            total += text(value) if isinstance(value, str) else 0
        elif key == "tool_calls" and isinstance(value, Sequence) and not isinstance(value, str):
            for call in value:
                if isinstance(call, Mapping):
                    total += fr.tool_call + _call_tokens(call, text)
                else:
                    total += fr.tool_call + _value_tokens(call, text, fr)
        else:
            total += _value_tokens(value, text, fr)
    return total


def _document_tokens(obj: Mapping[str, Any], text: _TextFn, fr: TokenizerProfile) -> int:
    """A document block: its text when it carries plain text, else a fixed estimate."""
    source = obj.get("source")
    if isinstance(source, Mapping) and isinstance(source.get("data"), str):
        if source.get("type") == "text":
            return text(source["data"]) + fr.block
        return _DOCUMENT_DEFAULT
    return _DOCUMENT_DEFAULT


def _tool_call_block_tokens(obj: Mapping[str, Any], text: _TextFn, fr: TokenizerProfile) -> int:
    """A tool-call block or item: its ids, name and JSON input."""
    total = fr.tool_call
    for key in ("id", "call_id", "name"):
        value = obj.get(key)
        if isinstance(value, str):
            total += text(value)
    for key in ("input", "arguments"):
        if key in obj:
            total += _json_tokens(obj[key], text)
    fn = obj.get("function")
    if isinstance(fn, Mapping):
        total += _mapping_tokens(fn, text, fr)
    return total


def _call_tokens(call: Mapping[str, Any], text: _TextFn) -> int:
    """An OpenAI Chat ``tool_calls`` entry: id, function name and JSON arguments."""
    total = 0
    cid = call.get("id")
    if isinstance(cid, str):
        total += text(cid)
    fn = call.get("function")
    if isinstance(fn, Mapping):
        name, args = fn.get("name"), fn.get("arguments")
        if isinstance(name, str):
            total += text(name)
        if args is not None:
            total += _json_tokens(args, text)
    return total


def _value_tokens(value: Any, text: _TextFn, fr: TokenizerProfile) -> int:
    # Exact built-in types first: the ABC checks below cost about ten times more.
    cls = type(value)
    if cls is str:
        return text(value)
    if cls is dict:
        return _mapping_tokens(value, text, fr)
    if cls is list:
        total = 0
        for item in value:
            total += _value_tokens(item, text, fr)
        return total
    if value is None or isinstance(value, bool):
        return 0
    if isinstance(value, str):
        return text(value)
    if isinstance(value, int | float):
        return text(str(value))
    if isinstance(value, Mapping):
        return _mapping_tokens(value, text, fr)
    if isinstance(value, Sequence | set | frozenset) and not isinstance(value, bytes | bytearray):
        return sum(_value_tokens(v, text, fr) for v in value)
    if isinstance(value, bytes | bytearray):
        return math.ceil(len(value) / 4)
    dump: Callable[..., Any] | None = getattr(value, "model_dump", None)
    if callable(dump):
        return _value_tokens(dump(exclude_none=True), text, fr)
    return text(str(value))


def estimate_tokens(
    obj: Any,
    *,
    model: str | TokenizerProfile | None = None,
    text: Callable[[str], int] | None = None,
) -> int:
    """Estimate the tokens ``obj`` costs in a prompt.

    ``obj`` may be a text, one message or content block (a mapping in Anthropic or OpenAI
    shape), a sequence of them, or an SDK object with ``model_dump()``. Texts count by character
    class (:func:`estimate_text_tokens`); structures add per-message, per-block and tool-call
    framing, count tool-call ids, names and JSON input, and count images by pixel size when the
    base64 header reveals it (else :data:`IMAGE_TOKENS_DEFAULT`). Bookkeeping fields that are
    never sent (``signature``, ``cache_control``, ``usage``...) are ignored.

    ``model`` (a model name or a :class:`TokenizerProfile`) picks the tokenizer family's text
    density and framing (:func:`tokenizer_profile`); without it, the densest family's are used.
    ``text`` replaces the text estimator, e.g. with an exact tokenizer, keeping the framing.
    """
    profile = model if isinstance(model, TokenizerProfile) else tokenizer_profile(model)
    return _value_tokens(obj, profile.text_tokens if text is None else text, profile)


def tiktoken_text_tokens(encoding: str = "o200k_base") -> Callable[[str], int] | None:
    """An exact count of a text's tokens by ``tiktoken``, or ``None`` when it cannot be had
    offline: tiktoken not installed, or the encoding's file neither cached nor fetchable.

    Give it to a session (``Budget.open(path, text_tokens=...)``) for an OpenAI model. tiktoken
    fetches an encoding's file on first use unless it is in its local cache
    (``TIKTOKEN_CACHE_DIR``); toolbudget never calls this on its own.
    """
    try:
        tiktoken = importlib.import_module("tiktoken")  # optional, so not a top-level import
    except ImportError:
        return None
    try:
        enc = tiktoken.get_encoding(encoding)
    except Exception:  # tiktoken raises plain exceptions for missing or unfetchable files
        return None

    def exact_text(text: str) -> int:
        return len(enc.encode(text, disallowed_special=()))

    return exact_text


def tiktoken_estimator(encoding: str = "o200k_base") -> TokenEstimator | None:
    """An exact-tokenizer estimator backed by ``tiktoken``, or ``None`` when it is not available
    offline (see :func:`tiktoken_text_tokens`).

    Texts are tokenized exactly; structures keep :func:`estimate_tokens`' OpenAI framing.
    """
    exact_text = tiktoken_text_tokens(encoding)
    if exact_text is None:
        return None

    def exact(obj: Any, /) -> int:
        return estimate_tokens(obj, model=OPENAI_PROFILE, text=exact_text)

    return exact
