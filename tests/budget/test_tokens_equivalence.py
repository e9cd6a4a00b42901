"""The message walk of the token estimator, with its fast paths for the common blocks, counts
what the walk before them counted: the old walk is kept here, as it was, and both are run on
arbitrary message structures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from hypothesis import example, given, settings
from hypothesis import strategies as st

from budget.tokens._tokens import (
    _DOCUMENT_DEFAULT,
    _IMAGE_TYPES,
    _REDACTED_THINKING,
    _SKIP_KEYS,
    _TOOL_CALL_TYPES,
    _TOOL_RESULT_TYPES,
    ANTHROPIC_PROFILE,
    DEFAULT_PROFILE,
    GOOGLE_PROFILE,
    OPENAI_PROFILE,
    TokenizerProfile,
    _image_block_tokens,
    estimate_tokens,
)
from tests._lanes import examples

_TextFn = Any


def _old_json_tokens(value: Any, text: _TextFn) -> int:
    if isinstance(value, str):
        return int(text(value))
    try:
        dumped = orjson.dumps(value, default=str).decode()
    except TypeError:
        dumped = str(value)
    return int(text(dumped))


def _old_mapping_tokens(obj: Mapping[str, Any], text: _TextFn, fr: TokenizerProfile) -> int:
    kind = obj.get("type")
    if not isinstance(kind, str | None):
        kind = ""
    if kind in _IMAGE_TYPES:
        return _image_block_tokens(obj) + fr.block
    if kind == "document":
        return _old_document_tokens(obj, text, fr)
    if kind == "redacted_thinking":
        return _REDACTED_THINKING
    if kind in _TOOL_CALL_TYPES:
        return _old_tool_call_block_tokens(obj, text, fr)
    if kind in _TOOL_RESULT_TYPES:
        total = fr.tool_result
        for key, value in obj.items():
            if key not in _SKIP_KEYS and key != "is_error":
                total += _old_value_tokens(value, text, fr)
        return total
    total = fr.block if kind is not None else 0
    if "role" in obj:
        total += fr.message
        if obj["role"] == "tool":
            total += fr.tool_result
    for key, value in obj.items():
        if key in _SKIP_KEYS:
            continue
        if key in {"role", "name"}:
            total += text(value) if isinstance(value, str) else 0
        elif key == "tool_calls" and isinstance(value, Sequence) and not isinstance(value, str):
            for call in value:
                if isinstance(call, Mapping):
                    total += fr.tool_call + _old_call_tokens(call, text)
                else:
                    total += fr.tool_call + _old_value_tokens(call, text, fr)
        else:
            total += _old_value_tokens(value, text, fr)
    return total


def _old_document_tokens(obj: Mapping[str, Any], text: _TextFn, fr: TokenizerProfile) -> int:
    source = obj.get("source")
    if isinstance(source, Mapping) and isinstance(source.get("data"), str):
        if source.get("type") == "text":
            return int(text(source["data"])) + fr.block
        return _DOCUMENT_DEFAULT
    return _DOCUMENT_DEFAULT


def _old_tool_call_block_tokens(obj: Mapping[str, Any], text: _TextFn, fr: TokenizerProfile) -> int:
    total = fr.tool_call
    for key in ("id", "call_id", "name"):
        value = obj.get(key)
        if isinstance(value, str):
            total += text(value)
    for key in ("input", "arguments"):
        if key in obj:
            total += _old_json_tokens(obj[key], text)
    fn = obj.get("function")
    if isinstance(fn, Mapping):
        total += _old_mapping_tokens(fn, text, fr)
    return total


def _old_call_tokens(call: Mapping[str, Any], text: _TextFn) -> int:
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
            total += _old_json_tokens(args, text)
    return total


def _old_value_tokens(value: Any, text: _TextFn, fr: TokenizerProfile) -> int:
    cls = type(value)
    if cls is str:
        return int(text(value))
    if cls is dict:
        return _old_mapping_tokens(value, text, fr)
    if cls is list:
        return sum(_old_value_tokens(item, text, fr) for item in value)
    if value is None or isinstance(value, bool):
        return 0
    if isinstance(value, str):
        return int(text(value))
    if isinstance(value, int | float):
        return int(text(str(value)))
    if isinstance(value, Mapping):
        return _old_mapping_tokens(value, text, fr)
    if isinstance(value, Sequence | set | frozenset) and not isinstance(value, bytes | bytearray):
        return sum(_old_value_tokens(v, text, fr) for v in value)
    if isinstance(value, bytes | bytearray):
        return -(-len(value) // 4)
    return int(text(str(value)))


_KINDS = st.sampled_from(
    [*sorted(_IMAGE_TYPES | _TOOL_CALL_TYPES | _TOOL_RESULT_TYPES), "document", "text",
     "redacted_thinking", "thinking", ""]
)  # fmt: skip
_KEYS = st.sampled_from(
    ["type", "role", "content", "text", "id", "call_id", "name", "input", "arguments", "function",
     "tool_calls", "tool_use_id", "is_error", "source", "data", "cache_control", "signature",
     "width", "height", "detail", "image_url"]
)  # fmt: skip
_BLOCK_KEYS = ("role", "content", "text", "id", "name", "input", "function", "tool_calls", "source")
_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=40),
    _KINDS, st.sampled_from(["tool", "user", "assistant"]), st.binary(max_size=9),
)  # fmt: skip
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(_KEYS, inner, max_size=5)
        | st.fixed_dictionaries(
            {"type": st.one_of(_KINDS, _LEAVES)}, optional=dict.fromkeys(_BLOCK_KEYS, inner)
        ).map(dict)
    ),
    max_leaves=20,
)
_PROFILES = st.sampled_from([DEFAULT_PROFILE, ANTHROPIC_PROFILE, OPENAI_PROFILE, GOOGLE_PROFILE])


@settings(max_examples=examples(1_000), deadline=None)
@given(_VALUES, _PROFILES)
@example({"type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}, DEFAULT_PROFILE)
@example({"type": "tool_use", "id": "t", "name": "n", "input": {"k": [1]}}, OPENAI_PROFILE)
@example({"role": "tool", "tool_calls": [{"function": {"name": "f"}}, "x"]}, GOOGLE_PROFILE)
def test_the_walk_counts_what_the_walk_before_it_counted(value: Any, profile: Any) -> None:
    """Messages, blocks of every kind counted apart (images, documents, tool calls and results,
    redacted thinking), OpenAI tool_calls, a type that is no string, nested lists, tuples and
    bytes: the estimate is the old walk's, under every profile."""
    text = profile.text_tokens
    assert estimate_tokens(value, model=profile) == _old_value_tokens(value, text, profile)
