"""Parsing a body against the conversation's last one, and encoding its copy from the agent's own
bytes: always exactly what orjson gives for the whole body and the whole copy."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget.proxy import SESSION_HEADER, session_key
from budget.proxy._encode import NumberRewritten, encode
from budget.proxy._incremental import Bodies, Parsed
from tests.proxy._kit import Stack, anthropic_history, library_copies

_ERROR = "not JSON"
_LEAF = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.integers(2**64, 2**66)  # orjson.loads reads it as a float: its bytes are not orjson's
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(['"', "\\", "\n", "\u2028", "é", "\x00", "]", "},{"])
)
_VALUE = st.recursive(
    _LEAF,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
_MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system"]), "content": _VALUE},
    optional={"cache_control": st.just({"type": "ephemeral"}), "x": _VALUE},
)
_KEY = st.sampled_from(
    ["model", "system", "tools", "metadata", "stream", "messages", "m\u00e9ssages"]
)
_ENCODERS: list[Callable[[Any], bytes]] = [
    orjson.dumps,
    lambda v: json.dumps(v, ensure_ascii=False, separators=(",", ":")).encode(),
    lambda v: json.dumps(v).encode(),
    lambda v: json.dumps(v, indent=2).encode(),
]
"""How agents encode: orjson's bytes, Python SDKs' compact json, spaced and indented json."""


def _encoded(encode_as: Callable[[Any], bytes], value: Any) -> bytes:
    """``encode_as(value)``; compact json where orjson cannot write it (an integer beyond 64
    bits, which agents in other languages do write)."""
    try:
        return encode_as(value)
    except orjson.JSONEncodeError:
        return json.dumps(value, separators=(",", ":")).encode()


def _loads(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _ERROR


def _parse(bodies: Bodies, raw: bytes) -> Parsed | str:
    try:
        return bodies.parse("messages", raw)[0]
    except orjson.JSONDecodeError:
        return _ERROR


def _assert_as_orjson(bodies: Bodies, raw: bytes) -> Parsed | None:
    """``raw`` parses to what orjson.loads gives (keys in the same order), or fails as it does."""
    want, got = _loads(raw), _parse(bodies, raw)
    if isinstance(got, str):
        assert want == _ERROR
        return None
    assert got.body == want
    if isinstance(want, dict):
        assert list(got.body) == list(want)
        if got.history is not None:
            assert got.history is got.body["messages"]
    return got


@st.composite
def _body(draw: st.DrawFn) -> dict[str, Any]:
    head = draw(st.dictionaries(_KEY.filter(lambda k: k != "messages"), _VALUE, max_size=2))
    tail = draw(st.dictionaries(_KEY.filter(lambda k: k != "messages"), _VALUE, max_size=2))
    messages = draw(st.lists(_MESSAGE, max_size=6))
    return {**head, "messages": messages, **tail}


@st.composite
def _edit(draw: st.DrawFn, body: dict[str, Any]) -> dict[str, Any]:
    """The body an agent sends next: messages added, the last ones edited (markers moved), an
    earlier one changed, the history cut, another key changed or added."""
    given = body.get("messages")
    messages = list(given) if isinstance(given, list) else []
    kind = draw(st.sampled_from(["append", "last", "earlier", "cut", "key", "same"]))
    if kind == "append":
        messages += draw(st.lists(_MESSAGE, min_size=1, max_size=3))
    elif kind == "last" and messages:
        i = len(messages) - draw(st.integers(1, min(2, len(messages))))
        if isinstance(messages[i], dict):
            messages[i] = {**messages[i], "cache_control": {"type": "ephemeral"}}
        messages.append(draw(_MESSAGE))
    elif kind == "earlier" and messages:
        messages[draw(st.integers(0, len(messages) - 1))] = draw(_MESSAGE)
    elif kind == "cut":
        messages = messages[: draw(st.integers(0, len(messages)))]
    elif kind == "key":
        return {**body, draw(_KEY): draw(_VALUE), "messages": messages}
    return {**body, "messages": messages}


@st.composite
def _mutated(draw: st.DrawFn, raw: bytes) -> bytes:
    """``raw`` with a byte replaced, inserted or removed (mostly not JSON any more)."""
    if not raw:
        return raw
    at = draw(st.integers(0, len(raw) - 1))
    byte = bytes([draw(st.sampled_from(list(b' ",:[]{}0a\\\n')))])
    how = draw(st.sampled_from(["replace", "insert", "remove"]))
    if how == "replace":
        return raw[:at] + byte + raw[at + 1 :]
    if how == "insert":
        return raw[:at] + byte + raw[at:]
    return raw[:at] + raw[at + 1 :]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_body_parses_as_orjson_loads_it_whatever_the_edit(data: st.DataObject) -> None:
    """Over a conversation's successive bodies (any encoding; messages added, edited, cut; other
    keys changed; bytes broken), each parse equals orjson.loads of the whole body."""
    encode_as = data.draw(st.sampled_from(_ENCODERS))
    bodies = Bodies()
    body = data.draw(_body())
    for _ in range(data.draw(st.integers(1, 6))):
        raw = _encoded(encode_as, body)
        damage = data.draw(st.integers(0, 7))
        if damage == 0:
            raw = data.draw(_mutated(raw))
        elif damage == 1 and raw.rstrip().endswith(b"}"):
            # The history's key once more at the end: orjson keeps the last one.
            again = _encoded(encode_as, data.draw(st.lists(_MESSAGE, max_size=2)))
            raw = raw.rstrip()[:-1] + b', "messages": ' + again + b"}"
        _assert_as_orjson(bodies, raw)
        body = data.draw(_edit(body))


def _numbers_as_orjson_writes(raw: bytes) -> bool:
    """Whether every number literal of ``raw`` (JSON) is what orjson writes for the value it
    reads from it: the literals found by the json module's own parser."""
    literals: list[str] = []

    def keep(literal: str) -> None:
        literals.append(literal)

    json.loads(raw, parse_int=keep, parse_float=keep)
    return all(orjson.dumps(orjson.loads(t)).decode() == t for t in literals)


def _spliced(parsed: Parsed, copy: list[Any]) -> bytes | None:
    """The agent's bytes with each message ``copy`` replaced swapped for orjson's bytes of its
    replacement, or None if a replaced message holds a number orjson would write otherwise (or
    the body cannot be spliced and holds one anywhere)."""
    assert parsed.history is not None
    history, raw = parsed.history, parsed.raw
    if not parsed.indexed:
        whole = orjson.dumps({**parsed.body, "messages": copy})
        return whole if _numbers_as_orjson_writes(raw) else None
    out, at = b"", 0
    for i, (kept, message) in enumerate(zip(history, copy, strict=True)):
        start, end = parsed.starts[i], parsed.ends[i]
        assert orjson.loads(raw[start:end]) == kept  # the message's bytes are where it says
        if message is not kept:
            if not _numbers_as_orjson_writes(raw[start:end]):
                return None
            out, at = out + raw[at:start] + orjson.dumps(message), end
    return out + raw[at:]


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_a_copy_is_the_agents_bytes_with_the_replaced_messages_swapped(data: st.DataObject) -> None:
    """The copy's encoding is the agent's bytes with each replaced message swapped for orjson's
    bytes of its replacement, whichever messages it replaced or replaced anew, request after
    request (the replaced ones cached); a replaced message holding a number orjson writes otherwise refuses
    the copy."""
    encode_as = data.draw(st.sampled_from(_ENCODERS))
    bodies = Bodies()
    body = data.draw(_body())
    replaced: dict[int, Any] = {}
    for _ in range(data.draw(st.integers(1, 5))):
        raw = _encoded(encode_as, body)
        if data.draw(st.integers(0, 4)) == 0:
            # The history's key written escaped: the same body, which the index cannot map.
            raw = raw.replace(b'"messages"', b'"\\u006dessages"', 1)
        parsed = _assert_as_orjson(bodies, raw)
        if parsed is not None and parsed.history is not None:
            history = parsed.history
            for i in data.draw(st.sets(st.integers(0, max(len(history) - 1, 0)), max_size=3)):
                if i < len(history) and (i not in replaced or data.draw(st.booleans())):
                    # A new replacement, or one re-made (another object, as after a compaction).
                    replaced[i] = data.draw(_MESSAGE.filter(_orjson_writes))
            copy = [replaced.get(i, m) for i, m in enumerate(history)]
            want = _spliced(parsed, copy)
            if want is None:
                with pytest.raises(NumberRewritten):
                    encode(parsed, copy)
            else:
                got = encode(parsed, copy)
                assert got == want
                assert orjson.loads(got) == {**parsed.body, "messages": copy}
        body = data.draw(_edit(body))


def _orjson_writes(message: Any) -> bool:
    """Whether orjson can encode ``message`` (a replacement is the session's, never beyond 64
    bits)."""
    try:
        orjson.dumps(message)
    except orjson.JSONEncodeError:
        return False
    return True


def test_a_resent_conversation_reuses_its_parsed_messages() -> None:
    """The same conversation with a message more (its last one re-marked) is the very same
    message objects but the edited one, and only the tail is parsed anew."""
    history = anthropic_history(40)
    bodies = Bodies()
    first, _ = bodies.parse("messages", orjson.dumps({"model": "m", "messages": history}))
    history[-1] = {**history[-1], "cache_control": {"type": "ephemeral"}}
    again = {"model": "m", "messages": [*history, {"role": "assistant", "content": "ok"}]}
    second, prev = bodies.parse("messages", orjson.dumps(again))
    assert prev is first
    assert second.reused == len(history) - 1
    assert second.history is not None and first.history is not None
    kept = second.history[: second.reused]
    assert all(a is b for a, b in zip(kept, first.history[:-1], strict=True))
    assert second.history[-2] is not first.history[-1]
    assert second.body == again


def test_spaced_json_through_the_proxy_reaches_the_upstream_as_the_agent_wrote_it(
    tmp_path: Path,
) -> None:
    """An agent sending indented JSON (its bytes never orjson's): the upstream receives the
    agent's bytes, each message the library's copy replaced swapped for orjson's bytes of it."""
    history = anthropic_history(6)
    bodies: list[dict[str, Any]] = [
        {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": history[:n]}
        for n in range(1, len(history) + 1, 2)
    ]
    headers = {"content-type": "application/json", "x-api-key": "k", "anthropic-version": "v"}
    headers[SESSION_HEADER] = "spaced"
    root = tmp_path / "sessions"
    key = session_key("anthropic", headers, bodies[0], history[:1])
    # The library first, in the very directory the proxy will use (envelopes name the file).
    copies = library_copies(
        root / key,
        [orjson.loads(orjson.dumps(b["messages"])) for b in bodies],
        fmt="anthropic",
        model="claude-sonnet-4-5",
    )
    shutil.rmtree(root / key)
    with (
        Stack(root, usage_for=lambda api, body: None) as stack,
        httpx.Client() as client,
    ):
        for body in bodies:
            sent = json.dumps(body, indent=2).encode()
            client.post(
                stack.url + "/v1/messages", content=sent, headers=headers
            ).raise_for_status()
        received = stack.upstream.bodies("/v1/messages")
    assert any(c != b["messages"] for b, c in zip(bodies, copies, strict=True))
    for body, copy, got in zip(bodies, copies, received, strict=True):
        want = json.dumps(body, indent=2)
        for message, sent in zip(body["messages"], copy, strict=True):
            if sent != message:  # an element of the body's array: indented two levels deep
                indented = json.dumps(message, indent=2).replace("\n", "\n    ")
                assert want.count(indented) == 1
                want = want.replace(indented, orjson.dumps(sent).decode())
        assert got == want.encode()


def test_kept_bodies_are_bounded_in_number_and_dropped_when_idle() -> None:
    """At most ``max_states`` bodies are kept (the least recently used dropped first), and a
    conversation idle for ``idle_s`` is forgotten at the next body kept."""
    now = [0.0]
    bodies = Bodies(max_states=2, idle_s=60.0, clock=lambda: now[0])
    raws = [
        orjson.dumps({"model": "m", "messages": anthropic_history(3, tag=tag)})
        for tag in ("a", "b", "c")
    ]
    for raw in raws:
        bodies.parse("messages", raw)
    assert len(bodies) == 2
    assert bodies.parse("messages", raws[0])[1] is None  # dropped: parsed whole again
    assert bodies.parse("messages", raws[0])[1] is not None  # kept again
    now[0] = 61.0
    bodies.parse("messages", raws[1])
    assert len(bodies) == 1
