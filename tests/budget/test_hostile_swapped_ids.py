"""Repeated call ids whose results swap places and swap back, then a resume (a hostile review)."""

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


def _calls(n: int) -> dict[str, Any]:
    """An assistant message making ``n`` calls, every one named call_0 (as some servers do)."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_0",
                "type": "function",
                "function": {"name": "read", "arguments": json.dumps({"cmd": f"c{k}"})},
            }
            for k in range(n)
        ],
    }


def _tool(text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": "call_0", "content": text}


def _requests() -> list[list[dict[str, Any]]]:
    history = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "Task 0"},
        _calls(2),
        _tool("ok 5"),
        _tool(TRACEBACK),
    ]
    requests = [list(history)]
    for k in range(3):
        history += [_calls(1), _tool(_log(k))]
        requests.append(list(history))
    swapped = list(history)
    swapped[3], swapped[4] = swapped[4], swapped[3]  # the two results of call_0 change places
    requests += [swapped, list(history)]  # ... and change back
    history += [_calls(1), _tool(_log(9))]
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
            out.append(session.prepare(messages, usage=usage, now=10.0 * i).messages)
    finally:
        session.close()
    return out


def test_a_resume_after_results_of_a_repeated_id_swapped_back_copies_as_the_session_that_went_on(
    tmp_path: Path,
) -> None:
    """A session reopened before the last request gives the copy the session that went on gives, after two results of a repeated call id swapped places and back."""
    went_on = _copies(tmp_path / "went_on", None)
    reopened = _copies(tmp_path / "reopened", len(went_on) - 1)
    assert reopened[-1] == went_on[-1]
