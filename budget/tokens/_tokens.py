"""Character-based token estimation: no network, no model download, fast enough for every result.

Texts are counted by character class with the model family's weights (``budget.tokens._textunits``).
Message structures (Anthropic or OpenAI shapes, dicts or lists of them) are estimated as the sum
of their texts plus fixed overheads for roles, blocks and tool-call framing; images count by an
estimate from their pixel size when it can be read cheaply, else a flat figure.
"""

from __future__ import annotations

import base64
import binascii
import importlib
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol, runtime_checkable

import orjson

from budget._errors import InputError
from budget.tokens._textunits import (
    ANTHROPIC_PROFILE,
    DEFAULT_PROFILE,
    GOOGLE_PROFILE,
    OPENAI_PROFILE,
    TokenizerProfile,
    estimate_text_tokens,
    text_class_counts,
    text_units,
    tokenizer_profile,
)

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
_KINDS_APART: Final = frozenset(
    {*_IMAGE_TYPES, "document", "redacted_thinking", *_TOOL_CALL_TYPES, *_TOOL_RESULT_TYPES}
)
"""Block types not counted by the generic walk (each has its own rule)."""


def _printed(value: Any, what: str) -> str:
    """``str(value)``. A value holding an integer past Python's digit limit is an InputError
    naming ``what`` holds it: no JSON encoder (the SDKs' included) can write it, so the request
    could not be sent as it is."""
    try:
        return str(value)
    except ValueError as exc:
        raise InputError(f"{what} cannot be sent as JSON: {exc}") from None


def _json_tokens(value: Any, text: _TextFn) -> int:
    """Tokens of a value sent as JSON (tool-call input): its compact serialization as text."""
    if isinstance(value, str):
        return text(value)
    try:
        dumped = orjson.dumps(value, default=str).decode()
    except TypeError:
        dumped = _printed(value, "a tool call's input")
    return text(dumped)


def _mapping_tokens(obj: Mapping[str, Any], text: _TextFn, fr: TokenizerProfile) -> int:
    kind = obj.get("type")
    if kind is not None and type(kind) is not str and not isinstance(kind, str):
        kind = ""  # a type of another kind (even an unhashable one): an unknown block
    # One membership test sends a message (no type) or a text block on to the generic walk;
    # the kinds counted apart are told apart only then (a few of these dicts per request).
    if kind is not None and kind in _KINDS_APART:
        if kind in _IMAGE_TYPES:
            return _image_block_tokens(obj) + fr.block
        if kind == "document":
            return _document_tokens(obj, text, fr)
        if kind == "redacted_thinking":
            return _REDACTED_THINKING
        if kind in _TOOL_CALL_TYPES:
            return _tool_call_block_tokens(obj, text, fr)
        total = fr.tool_result  # one of _TOOL_RESULT_TYPES
        for key, value in obj.items():
            if key not in _SKIP_KEYS and key != "is_error":
                # A result's text, most often: counted here rather than one call deeper.
                total += text(value) if type(value) is str else _value_tokens(value, text, fr)
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
        elif type(value) is str:
            total += text(value)  # _value_tokens' first case, without its call
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
    if fn is not None and isinstance(fn, Mapping):  # None (the usual) skips the ABC check
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
            # Content blocks, most often: the mapping counted without this function's checks.
            if type(item) is dict:
                total += _mapping_tokens(item, text, fr)
            else:
                total += _value_tokens(item, text, fr)
        return total
    if value is None or isinstance(value, bool):
        return 0
    if isinstance(value, str):
        return text(value)
    if isinstance(value, int | float):
        return text(_printed(value, "a message holds a number that"))
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
    if text is not None and not callable(text):
        raise InputError(f"text must be a callable counting a text's tokens, not {text!r:.80}")
    try:
        return _value_tokens(obj, profile.text_tokens if text is None else text, profile)
    except RecursionError:  # nested past Python's limit, or holding itself
        raise InputError(
            "messages nest too deeply to be budgeted (Python's recursion limit)"
        ) from None


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
