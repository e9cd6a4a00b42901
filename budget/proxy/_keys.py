"""Which toolbudget session a request belongs to: one session per conversation.

In order (issue 33, item 3):

1. an explicit ``x-toolbudget-session`` header, taken as the caller's own name for the session;
2. the client's own session id where the API carries one: Claude Code sends it in
   ``metadata.user_id``, as ``user_<hash>_account_<uuid>_session_<uuid>`` before v2.1.78 and as
   a JSON string ``{"device_id": ..., "account_uuid": ..., "session_id": ...}`` since
   (ding113/claude-code-hub#939 documents both shapes). Claude Code's subagents and its side
   requests (titles, summaries) carry the main session's id, so the id is qualified by a hash of
   the conversation's first message: each subagent is a session of its own.
   On the OpenAI APIs, the ``prompt_cache_key`` a client names its conversation's cache with is
   its session id the same way (Codex CLI sends its conversation's id there, ``prompt_cache_key:
   Some(conversation_id)`` in ``codex-rs/core/src/client.rs``; every Codex conversation in one
   repository opens with the same instructions message, so the start alone cannot tell them
   apart), qualified by the first message too: an application that names one key for all its
   conversations gets one session per first message, as without the key;
3. else a stable hash of the conversation's start: the system prompt, the tools and the first
   message, with ``cache_control`` markers removed (clients move them from turn to turn).

The key is a directory name under the proxy's root: the API's name, the kind, and the id when it
is a plain lowercase name, else its hash, so no header can name a path outside the root. Every
name is lowercase ASCII, so a case-insensitive filesystem (macOS's, Windows') sees two names as
one only when they are equal: an id with capitals is written lowercase with a hash of the id as
sent (``MyTask`` is ``h-mytask~<hash>``, ``mytask`` is ``h-mytask``), where earlier proxies used
it as it was and ``MyTask`` and ``mytask`` shared one directory on those filesystems.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson
import xxhash

__all__ = ["SESSION_HEADER", "session_key"]

SESSION_HEADER: Final = "x-toolbudget-session"
_PLAIN: Final = re.compile(r"[a-z0-9_-][a-z0-9._-]{0,99}")
"""An id used as it is in a directory name: lowercase, no separator, no leading dot, at most 100
chars (the names earlier proxies gave these ids, kept)."""
_CASED: Final = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}")
"""An id plain but for its capitals: lowercased, with a hash of it as sent after a ``~``, a
character no plain id holds."""
_LEGACY_SESSION: Final = re.compile(r"_session_([A-Za-z0-9_-]{1,100})$")


def _digest(value: object) -> str:
    """A 128-bit hex hash of ``value``'s canonical JSON (sorted keys; non-JSON values by str)."""
    data = orjson.dumps(value, option=orjson.OPT_SORT_KEYS, default=str)
    return xxhash.xxh3_128_hexdigest(data)


def _unmarked(value: Any) -> Any:
    """``value`` without ``cache_control`` keys at any depth: they move, the conversation stays."""
    if isinstance(value, Mapping):
        return {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list | tuple):
        return [_unmarked(v) for v in value]
    return value


def _named(kind: str, ident: str) -> str:
    if _PLAIN.fullmatch(ident):
        return f"{kind}-{ident}"
    if _CASED.fullmatch(ident):
        return f"{kind}-{ident.lower()}~{_digest(ident)[:16]}"
    return f"{kind}-{_digest(ident)[:32]}"


def claude_code_session(metadata: object) -> str | None:
    """The session id Claude Code put in ``metadata.user_id`` (either shape), or None."""
    if not isinstance(metadata, Mapping):
        return None
    user_id = metadata.get("user_id")
    if not isinstance(user_id, str) or not user_id:
        return None
    if user_id.startswith("{"):
        try:
            parsed = orjson.loads(user_id)
        except orjson.JSONDecodeError:
            return None
        sid = parsed.get("session_id") if isinstance(parsed, dict) else None
        return sid if isinstance(sid, str) and sid else None
    m = _LEGACY_SESSION.search(user_id)
    return m.group(1) if m else None


def _first(messages: Sequence[Any]) -> Any:
    """The conversation's first message after any system or developer messages."""
    at = lead_of(messages)
    return messages[at] if at < len(messages) else None


def lead_of(messages: Sequence[Any]) -> int:
    """The index of :func:`_first`'s message (``len(messages)`` if none): the key depends on the
    messages up to it, and on no later one."""
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, Mapping) else None
        if role not in ("system", "developer"):
            return i
    return len(messages)


def session_key(
    api: str, headers: Mapping[str, str], body: Mapping[str, Any], messages: Sequence[Any]
) -> str:
    """The directory name of the session this request belongs to (see the module's rules)."""
    explicit = headers.get(SESSION_HEADER)
    if explicit:
        return f"{api}-{_named('h', explicit)}"
    first = _unmarked(_first(messages))
    client = claude_code_session(body.get("metadata"))
    if client is not None:
        return f"{api}-{_named('cc', client)}-{_digest(first)[:12]}"
    cache_key = body.get("prompt_cache_key")
    if api != "anthropic" and isinstance(cache_key, str) and cache_key:
        return f"{api}-{_named('pk', cache_key)}-{_digest(first)[:12]}"
    start = {
        "system": _unmarked(body.get("system", body.get("instructions"))),
        "tools": _unmarked(body.get("tools")),
        "lead": [_unmarked(m) for m in messages[:1]] if first is not None else [],
        "first": first,
    }
    return f"{api}-c-{_digest(start)[:32]}"
