"""A request reuses the last request's last messages and their copies when neither changed since
(``budget.session._tail``): the same copies, reports and log as looking at them again, whatever
the caller did in place between requests (markers moved in its messages or in the copies it was
given, a result edited, a value replaced by an equal one or by one of another type, a message
replaced, a new list, a retry), whether the session went on or was reopened from its directory."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import Budget, BudgetConfig
from budget.session._tail import Tail
from tests._lanes import examples

Message = dict[str, Any]
MARK = {"type": "ephemeral"}


@contextmanager
def _never_reused() -> Iterator[None]:
    """Every request looks at the last messages again, as before the reuse."""
    with mock.patch.object(Tail, "holds", return_value=False):
        yield


def _text(r: int, chars: int) -> str:
    line = f"round {r:03d}: collected 12 items, 1 failed, TypeError in models.py\n"
    return (line * (chars // len(line) + 1))[:chars]


def _round(r: int, chars: int) -> list[Message]:
    call = {"type": "tool_use", "id": f"t{r}", "name": "bash", "input": {"command": f"run {r}"}}
    return [
        {"role": "assistant", "content": [{"type": "text", "text": f"Step {r}."}, call]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"t{r}", "content": _text(r, chars)}]},
    ]  # fmt: skip


def _blocks(message: Message) -> list[Any]:
    content = message["content"]
    return content if isinstance(content, list) else []


def _last_block(history: list[Message]) -> dict[str, Any]:
    """The last message's last block (a dummy for a text message)."""
    blocks = _blocks(history[-1])
    return blocks[-1] if blocks else {}


def _mark_last(history: list[Message], copy_sent: list[Any]) -> list[Message]:
    if _blocks(history[-1]):
        _last_block(history)["cache_control"] = dict(MARK)
    return history


def _unmark(history: list[Message], copy_sent: list[Any]) -> list[Message]:
    for message in history[-3:]:
        for block in _blocks(message):
            block.pop("cache_control", None)
    return history


def _edit_result(history: list[Message], copy_sent: list[Any]) -> list[Message]:
    block = _last_block(history)
    if block.get("type") == "tool_result":
        block["content"] = block["content"] + " (edited)"
    return history


def _equal_text(history: list[Message], copy_sent: list[Any]) -> list[Message]:
    block = _last_block(history)
    if block.get("type") == "tool_result":
        block["content"] = "".join(list(block["content"]))  # another str object, equal
    return history


def _retype(history: list[Message], copy_sent: list[Any]) -> list[Message]:
    block = _last_block(history)
    if block.get("type") == "tool_result":
        block["is_error"] = 0 if block.get("is_error") is False else False
    return history


def _mark_copy(history: list[Message], copy_sent: list[Any]) -> list[Message]:
    blocks = copy_sent[-1].get("content") if isinstance(copy_sent[-1], dict) else None
    if isinstance(blocks, list) and blocks and isinstance(blocks[-1], dict):
        blocks[-1]["cache_control"] = dict(MARK)
    return history


def _replace_message(history: list[Message], copy_sent: list[Any]) -> list[Message]:
    history[-2:-1] = copy.deepcopy(history[-2:-1])
    return history


def _new_list(history: list[Message], copy_sent: list[Any]) -> list[Message]:
    return list(history)


OPS: dict[str, Callable[[list[Message], list[Any]], list[Message]]] = {
    "append": lambda history, copy_sent: history,
    "mark_last": _mark_last,
    "unmark": _unmark,
    "edit_result": _edit_result,
    "equal_text": _equal_text,
    "retype": _retype,
    "mark_copy": _mark_copy,
    "replace_message": _replace_message,
    "new_list": _new_list,
}


def _run(
    path: Path, plan: list[tuple[int, str, bool]], restarts: set[int]
) -> tuple[list[bytes], list[Any]]:
    """The copies (as JSON) and reports of a session fed ``plan``: per step the characters of
    a new round's result (0: no new round, a retry), the op done in place before the request,
    and whether the op comes after the round was appended; reopened before ``restarts``."""
    config = BudgetConfig(fsync=False, preview_chars=600)
    session = Budget.open(path, config)
    history: list[Message] = [{"role": "user", "content": "Fix the tests."}]
    sent: list[Any] = [history[0]]
    copies, reports = [], []
    for i, (chars, op, after) in enumerate(plan):
        if not after:
            history = OPS[op](history, sent)
        if chars:
            history += _round(i, chars)
        if after:
            history = OPS[op](history, sent)
        if i in restarts:
            session.close()
            session = Budget.open(path, config)
        prepared = session.prepare(history, now=10.0 * i)
        sent = prepared.messages
        copies.append(orjson.dumps(sent))
        report = prepared.report.model_dump(exclude={"elapsed_s"})
        reports.append(report)
    session.close()
    return copies, reports


def _log(path: Path) -> list[dict[str, Any]]:
    (log,) = list(path.rglob("*.jsonl"))
    return [orjson.loads(line) for line in log.read_bytes().splitlines()]


steps = st.lists(
    st.tuples(
        st.sampled_from([0, 300, 3_000, 12_000]),
        st.sampled_from(sorted(OPS)),
        st.booleans(),
    ),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(plan=steps, data=st.data())
def test_reused_last_messages_give_what_looking_again_gives(
    tmp_path_factory: pytest.TempPathFactory, plan: list[tuple[int, str, bool]], data: Any
) -> None:
    """Requests with in-place changes between them: the session that reuses unchanged last
    messages sends the copies, reports and log of one that looks at them again every time,
    and so does one reopened at random requests."""
    base = tmp_path_factory.mktemp("t")
    restarts = data.draw(st.sets(st.integers(1, max(len(plan) - 1, 1))))
    with _never_reused():
        again = _run(base / "again", plan, set())
    reused = _run(base / "reused", plan, set())
    assert reused == again
    assert _log(base / "reused") == _log(base / "again")
    reopened = _run(base / "reopened", plan, restarts)
    assert reopened[0] == again[0]


def test_the_perf_history_reuses_its_last_messages() -> None:
    """An agent's one list, grown by a round a request: every request after the first reuses
    the last two messages (no estimate of them again) and gives the copy looking again gives."""
    histories: dict[str, list[bytes]] = {}
    holds: list[bool] = []
    real = Tail.holds

    def counted(self: Tail, messages: list[Any], outputs: list[Any]) -> bool:
        holds.append(real(self, messages, outputs))
        return holds[-1]

    for name in ("again", "reused"):
        session = Budget.in_memory({"preview_chars": 600})
        history: list[Message] = [{"role": "user", "content": "Fix the tests."}]
        histories[name] = []
        with _never_reused() if name == "again" else mock.patch.object(Tail, "holds", counted):
            for r in range(8):
                history += _round(r, 3_000)
                histories[name].append(orjson.dumps(session.prepare(history, now=r).messages))
    assert histories["reused"] == histories["again"]
    assert holds == [True] * 7
