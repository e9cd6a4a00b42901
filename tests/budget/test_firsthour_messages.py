"""A first hour's mistakes, said in words that tell what is wrong and what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from budget import Budget, BudgetConfig, ToolPolicy
from budget._errors import ConfigError, SessionLocked


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (
            lambda: BudgetConfig(result_cpa=3),
            "invalid toolbudget setting: result_cpa: no such setting (did you mean result_cap?)",
        ),
        (
            lambda: Budget.in_memory({"result_cpa": 3}),
            "invalid toolbudget setting: result_cpa: no such setting (did you mean result_cap?)",
        ),
        (
            lambda: ToolPolicy(capp=3),
            "invalid toolbudget setting: capp: no such setting (did you mean cap?)",
        ),
        (
            lambda: BudgetConfig(tools={"bash": {"exmept": True}}),
            "invalid toolbudget setting: tools.bash: exmept: no such setting (did you mean exempt?)",
        ),
        (
            lambda: BudgetConfig(zzzzzz=1),
            "invalid toolbudget setting: zzzzzz: no such setting",
        ),
    ],
)
def test_a_misspelt_setting_is_named_with_the_closest_one(build: object, expected: str) -> None:
    """A misspelt setting is named with its closest setting, not as pydantic's "extra input"."""
    with pytest.raises(ConfigError) as info:
        build()  # type: ignore[operator]
    assert str(info.value) == expected


def test_a_session_left_open_in_this_process_is_said_to_be_so(tmp_path: Path) -> None:
    """Reopening a session this process left open says so and how to close it."""
    first = Budget.open(tmp_path / "s")
    try:
        with pytest.raises(SessionLocked) as info:
            Budget.open(tmp_path / "s")
        message = str(info.value)
        assert "already open in this process" in message
        assert "close()" in message
        assert "LocalStore" not in message
    finally:
        first.close()
    Budget.open(tmp_path / "s").close()


def test_the_request_copy_passed_back_as_the_history_is_said_to_be_so() -> None:
    """A history holding the envelope the session sent says so in ``decision_stale``."""
    from structlog.testing import capture_logs

    big = "x\n" * 40_000
    chat: list[dict[str, object]] = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "cat", "arguments": "{}"}},
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": big},
    ]  # fmt: skip
    with Budget.in_memory(format="openai_chat") as session:
        sent = session.prepare(chat).messages
        with capture_logs() as events:
            session.prepare([*sent, {"role": "user", "content": "go on"}])
            session.prepare([*chat[:2], {**chat[2], "content": "edited"}])
    stale = [e for e in events if e["event"] == "toolbudget.session.decision_stale"]
    assert [e["sent_copy"] for e in stale] == [True, False]


def test_a_session_opened_with_async_with_is_closed_when_the_block_ends(tmp_path: Path) -> None:
    """``async with Budget.open(path)`` works as ``with`` does (it was a TypeError that left the
    session locked): the block gets the session, and its end releases the directory."""
    import asyncio

    messages = [{"role": "user", "content": "hi"}]

    async def run() -> int:
        async with Budget.open(tmp_path / "s", {"fsync": False}) as session:
            prepared = await session.aprepare(messages)
        return len(prepared.messages)

    assert asyncio.run(run()) == 1
    with Budget.open(tmp_path / "s", {"fsync": False}) as again:  # not SessionLocked
        assert again.prepare(messages).messages == messages
