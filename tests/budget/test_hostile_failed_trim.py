"""A staleness trim the store refuses (its quota), then a resume (a hostile review)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from budget import Budget

CONFIG = {"fsync": False, "protect_rounds": 1, "quota_bytes": 10_000}


def _log(tag: str, n: int) -> str:
    return "".join(f"{tag} line {i} of the build log as it was printed\n" for i in range(n))


def _round(call_id: str, text: str) -> list[dict[str, Any]]:
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": "grep", "arguments": json.dumps({"q": call_id})},
    }
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": text},
    ]


def _requests() -> list[list[dict[str, Any]]]:
    history = [
        {"role": "user", "content": "go"},
        *_round("call_big", _log("big", 350)),
    ]  # about 16,700 chars
    requests = [list(history)]
    for k in range(2):
        history += _round(f"call_{k}", _log(f"r{k}", 60))
        requests.append(list(history))
    return requests


def _copies(path: Path, reopen_at: int | None) -> list[Any]:
    session = Budget.open(path, CONFIG, format="openai_chat")
    out = []
    try:
        for i, messages in enumerate(_requests()):
            if i == reopen_at:
                session.close()
                session = Budget.open(path, CONFIG, format="openai_chat")
            usage = {"input_tokens": 1_000 + 3_000 * i, "output_tokens": 10}
            out.append(session.prepare(messages, usage=usage, now=10.0 * i))
    finally:
        session.close()
    return out


def test_a_resume_after_a_refused_trim_copies_as_the_session_that_went_on(tmp_path: Path) -> None:
    """Once a trim of call_big failed (kept_unspillable: frozen), a session reopened before the
    next request gives the copy the session that went on gives, which no longer retries it."""
    went_on = _copies(tmp_path / "went_on", None)
    first = went_on[1].report.decisions[0]
    assert (first.call_id, first.kind) == ("call_big", "kept_unspillable")
    assert "call_big" not in [d.call_id for d in went_on[2].report.decisions]
    reopened = _copies(tmp_path / "reopened", 2)
    assert [(d.call_id, d.kind) for d in reopened[2].report.decisions] == [
        (d.call_id, d.kind) for d in went_on[2].report.decisions
    ]
    assert reopened[2].messages == went_on[2].messages
