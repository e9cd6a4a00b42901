"""A trimmed result whose text is edited (new dict, new list), then a resume (a hostile review)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from budget import Budget

TRACEBACK = (
    "Traceback (most recent call last):\n" + "  File x.py, line 3\n" * 300 + "ValueError: boom\n"
)
CONFIG = {"fsync": False, "protect_rounds": 1}


def _log(n: int) -> str:
    return f"{n}\n" + "a line of the build log, as it was printed\n" * 140


def _round(call_id: str, text: str) -> list[dict[str, Any]]:
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": "read", "arguments": json.dumps({"cmd": call_id})},
    }
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": text},
    ]


def _requests() -> list[list[dict[str, Any]]]:
    history = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "Task 0"},
        *_round("call_tb", TRACEBACK),
    ]
    requests = [list(history)]
    for k in range(3):
        history += _round(f"call_{k}", _log(k))
        requests.append(list(history))
    edited = list(history)  # by now call_tb is trimmed; the agent edits its text, as the docs say
    edited[3] = {
        "role": "tool",
        "tool_call_id": "call_tb",
        "content": TRACEBACK.replace("boom", "BOOM"),
    }
    requests.append(list(edited))
    requests.append([*edited, *_round("call_9", _log(9))])
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
            out.append(session.prepare(messages, usage=usage, now=10.0 * i).messages)
    finally:
        session.close()
    return out


def test_a_resume_after_a_trimmed_result_was_edited_copies_as_the_session_that_went_on(
    tmp_path: Path,
) -> None:
    """A session reopened before the last request gives the copy the session that went on gives, after a trimmed result's text was edited and decided again."""
    went_on = _copies(tmp_path / "went_on", None)
    reopened = _copies(tmp_path / "reopened", len(went_on) - 1)
    assert went_on[-2][3]["content"].startswith("Traceback")  # decided again: shown whole
    assert reopened[-1][3] == went_on[-1][3]
    assert reopened[-1] == went_on[-1]
