"""A session reopened after a result was decided anew copies as the one that went on (from a
hostile run): a trim the store refused, a trimmed result edited, repeated call ids swapped back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from budget import Budget, Prepared

TRACEBACK = (
    "Traceback (most recent call last):\n" + "  File x.py, line 3\n" * 300 + "ValueError: boom\n"
)
START = [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Task 0"}]


def _log(tag: str, lines: int = 140) -> str:
    return "".join(f"{tag} line {i} of the build log as it was printed\n" for i in range(lines))


def _calls(*calls: tuple[str, str]) -> dict[str, Any]:
    """An assistant message making the calls (id, argument) given."""
    made = [
        {"id": cid, "type": "function", "function": {"name": "read", "arguments": json.dumps(arg)}}
        for cid, arg in calls
    ]
    return {"role": "assistant", "content": None, "tool_calls": made}


def _tool(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def _round(call_id: str, text: str) -> list[dict[str, Any]]:
    return [_calls((call_id, call_id)), _tool(call_id, text)]


def _prepared(
    path: Path, requests: list[list[dict[str, Any]]], config: dict[str, Any], reopen_at: int | None
) -> list[Prepared]:
    """Every request prepared in order with usage that never reads a cache, the session closed
    and opened again before request ``reopen_at``."""
    session = Budget.open(path, config, format="openai_chat")
    out = []
    try:
        for i, messages in enumerate(requests):
            if i == reopen_at:
                session.close()
                session = Budget.open(path, config, format="openai_chat")
            usage = {"input_tokens": 1_000 + 3_000 * i, "output_tokens": 10}
            out.append(session.prepare(messages, usage=usage, now=10.0 * i))
    finally:
        session.close()
    return out


def _went_on_and_reopened(
    tmp_path: Path, requests: list[list[dict[str, Any]]], config: dict[str, Any]
) -> tuple[list[Prepared], Prepared]:
    """Every request of a session that went on, and the last one of a session reopened before
    it."""
    went_on = _prepared(tmp_path / "went_on", requests, config, None)
    reopened = _prepared(tmp_path / "reopened", requests, config, len(requests) - 1)
    return went_on, reopened[-1]


def test_a_trim_the_store_refused_is_not_retried_and_copies_alike_reopened(tmp_path: Path) -> None:
    """Once a trim of call_big failed (kept_unspillable: frozen), the session that went on no
    longer retries it, and one reopened before the next request gives the same copy."""
    history = [*START, *_round("call_big", _log("big", 350))]  # about 16,700 characters
    requests = [list(history)]
    for k in range(2):
        history += _round(f"call_{k}", _log(f"r{k}", 60))
        requests.append(list(history))
    config = {"fsync": False, "protect_rounds": 1, "quota_bytes": 10_000}
    went_on, reopened = _went_on_and_reopened(tmp_path, requests, config)
    first = went_on[1].report.decisions[0]
    assert (first.call_id, first.kind) == ("call_big", "kept_unspillable")
    assert "call_big" not in [d.call_id for d in went_on[2].report.decisions]
    kinds = [(d.call_id, d.kind) for d in went_on[2].report.decisions]
    assert [(d.call_id, d.kind) for d in reopened.report.decisions] == kinds
    assert reopened.messages == went_on[2].messages


def test_a_trimmed_result_edited_and_decided_again_copies_alike_reopened(tmp_path: Path) -> None:
    """A trimmed result whose text the caller edits is decided again and shown whole; on the
    next request a reopened session gives the copy the session that went on gives."""
    history = [*START, *_round("call_tb", TRACEBACK)]
    requests = [list(history)]
    for k in range(3):
        history += _round(f"call_{k}", _log(str(k)))
        requests.append(list(history))
    edited = list(history)  # by now call_tb is trimmed; the caller edits its text (a new dict)
    edited[3] = _tool("call_tb", TRACEBACK.replace("boom", "BOOM"))
    requests += [list(edited), [*edited, *_round("call_9", _log("9"))]]
    went_on, reopened = _went_on_and_reopened(
        tmp_path, requests, {"fsync": False, "protect_rounds": 1}
    )
    assert went_on[-2].messages[3]["content"].startswith("Traceback")  # decided again: whole
    assert reopened.messages == went_on[-1].messages


def test_results_of_a_repeated_id_swapped_back_copy_alike_reopened(tmp_path: Path) -> None:
    """Two results of a call id some servers repeat (every call call_0) change places and back;
    on the next request a reopened session gives the copy the session that went on gives."""
    history = [*START, _calls(("call_0", "c0"), ("call_0", "c1")), _tool("call_0", "ok 5")]
    history.append(_tool("call_0", TRACEBACK))
    requests = [list(history)]
    for k in range(3):
        history += [_calls(("call_0", f"r{k}")), _tool("call_0", _log(str(k)))]
        requests.append(list(history))
    swapped = list(history)
    swapped[3], swapped[4] = swapped[4], swapped[3]  # the two results of call_0 change places
    requests += [swapped, list(history)]  # ... and change back
    history += [_calls(("call_0", "r9")), _tool("call_0", _log("9"))]
    requests.append(list(history))
    went_on, reopened = _went_on_and_reopened(
        tmp_path, requests, {"fsync": False, "protect_rounds": 1}
    )
    assert reopened.messages == went_on[-1].messages
