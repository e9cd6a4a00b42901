"""Open finding of a hostile review: a Codex conversation's session key across its compaction."""

from __future__ import annotations

from typing import Any

import pytest

from tests.proxy.test_proxy_units import _proxy

_PERMISSIONS = {
    "type": "message",
    "role": "developer",
    "content": [{"type": "input_text", "text": "<permissions instructions>..."}],
}
_AGENTS = {
    "type": "message",
    "role": "user",
    "content": [{"type": "input_text", "text": "# AGENTS.md instructions for /repo\n..."}],
}
_ENV = {
    "type": "message",
    "role": "user",
    "content": [{"type": "input_text", "text": "<environment_context>...</environment_context>"}],
}


def _user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


@pytest.mark.xfail(strict=True, reason="open: the first message moves at Codex's compaction")
def test_a_codex_conversation_keeps_its_session_across_a_remote_compaction() -> None:
    """Codex CLI on OpenAI compacts remotely (``should_use_remote_compact_task``: the provider is
    OpenAI) and rebuilds the history in ``process_compacted_history`` (codex-rs/core/src/
    compact.rs) as the user messages kept, then its initial context inserted above the last real
    user message, then the compaction item: the first message after the developer ones is no
    longer the AGENTS.md message but the user's first prompt, and the ``prompt_cache_key``-named
    key (qualified by that message) names a new, empty session mid-conversation."""
    key = _proxy().session_key
    body = {"instructions": "You are Codex.", "prompt_cache_key": "0199aa-conversation"}
    call = {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "x" * 100}
    before = [_PERMISSIONS, _AGENTS, _ENV, _user("Fix the failing test."), call, output]
    compaction = {"type": "compaction", "encrypted_content": "gAAAA..."}
    after = [
        _user("Fix the failing test."),
        _PERMISSIONS,
        _AGENTS,
        _ENV,
        _user("Go on."),
        compaction,
    ]
    assert key("openai_responses", {}, body, after) == key("openai_responses", {}, body, before)
