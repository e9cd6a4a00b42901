"""LangChain v1: the middleware inside a real ``create_agent`` loop, with a model that reads."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from structlog.testing import capture_logs

from budget import Budget, ConfigError, FormatError
from tests.integrations._agentkit import (
    PAGE_LIMIT,
    PAGE_OFFSET,
    envelope_ref,
    expected_rows,
    page_rows,
    write_big_file,
)

pytestmark = pytest.mark.usefixtures("needs_langchain")


def test_agent_sees_envelope_and_reads_back(big_file: tuple[Path, str], tmp_path: Path) -> None:
    """In a sync agent run the model gets an envelope, reads exact lines back; state keeps all."""
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from budget.integrations.langchain import ToolBudgetMiddleware
    from tests.integrations._langchain_kit import ReadingModel, check_run, read_file

    path, text = big_file
    with Budget.open(tmp_path / "session") as session:
        model = ReadingModel(paths=[str(path)])
        middleware = ToolBudgetMiddleware(session)
        agent = create_agent(model, tools=[read_file], middleware=[middleware])
        state = agent.invoke({"messages": [HumanMessage("What went wrong in the log?")]})
        check_run(model, state, session, middleware, path, text)


def test_async_agent_sees_envelope_and_reads_back(
    big_file: tuple[Path, str], tmp_path: Path
) -> None:
    """The same run through ``ainvoke`` goes through ``awrap_model_call`` and the async tool."""
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from budget.integrations.langchain import LANGCHAIN, ToolBudgetMiddleware
    from tests.integrations._langchain_kit import ReadingModel, check_run, read_file

    path, text = big_file
    with Budget.open(tmp_path / "session", format=LANGCHAIN) as session:
        model = ReadingModel(paths=[str(path)])
        middleware = ToolBudgetMiddleware(session)
        agent = create_agent(model, tools=[read_file], middleware=[middleware])
        state = asyncio.run(agent.ainvoke({"messages": [HumanMessage("What went wrong?")]}))
        check_run(model, state, session, middleware, path, text)


def test_overflow_is_retried_with_old_results_trimmed(tmp_path: Path) -> None:
    """A prompt-too-long refusal is retried once, with the older round's output trimmed."""
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage, ToolMessage

    from budget.integrations.langchain import LANGCHAIN, ToolBudgetMiddleware
    from tests.integrations._langchain_kit import ReadingModel, read_file

    first, second = tmp_path / "a.log", tmp_path / "b.log"
    text_a = write_big_file(first)
    text_b = write_big_file(second, seed=7)
    # The tool's own cap: a hard limit, so the outputs stay whole until the refusal.
    config = {"tools": {"read_file": {"cap": 200_000}}}
    with Budget.open(tmp_path / "session", config, format=LANGCHAIN) as session:
        model = ReadingModel(paths=[str(first), str(second)], refuse_over=200_000)
        agent = create_agent(model, tools=[read_file], middleware=[ToolBudgetMiddleware(session)])
        state = agent.invoke({"messages": [HumanMessage("Compare the two logs.")]})

    # Read a, read b, refused with both inline, retried with a trimmed: four model calls.
    assert len(model.received) == 4
    refused, retried = model.received[2], model.received[3]
    assert [m.text for m in refused if isinstance(m, ToolMessage)] == [text_a, text_b]
    stub, kept = (m for m in retried if isinstance(m, ToolMessage))
    assert stub.text.startswith("[toolbudget] Old output of read_file trimmed")
    assert kept.text == text_b
    trimmed = session.decision("call_read_1")
    assert trimmed is not None
    assert trimmed.kind == "trimmed"
    assert [m.text for m in state["messages"] if isinstance(m, ToolMessage)] == [text_a, text_b]
    assert state["messages"][-1].text == "done"


def test_reported_usage_anchors_the_estimate(big_file: tuple[Path, str], tmp_path: Path) -> None:
    """The usage the last reply reported reaches the session: the estimate does not go below it."""
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from budget.integrations.langchain import LANGCHAIN, ToolBudgetMiddleware
    from tests.integrations._langchain_kit import ReadingModel, read_file

    path, _ = big_file
    with Budget.open(tmp_path / "session", format=LANGCHAIN) as session:
        model = ReadingModel(paths=[str(path)], usage_tokens=90_000)
        middleware = ToolBudgetMiddleware(session)
        agent = create_agent(model, tools=[read_file], middleware=[middleware])
        agent.invoke({"messages": [HumanMessage("What went wrong?")]})
    report = middleware.last_report
    assert report is not None
    # Even the unbudgeted history estimates below what the provider said it counted.
    assert report.tokens_before < 90_000 <= report.tokens_after


def test_format_keeps_message_fields_and_blocks(tmp_path: Path) -> None:
    """A spilled ToolMessage keeps id, name, artifact, status and image; the input is untouched."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from budget.integrations.langchain import LANGCHAIN
    from tests.integrations._langchain_kit import call

    big = write_big_file(tmp_path / "x.log")
    image = {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"}
    result = ToolMessage(
        content=[{"type": "text", "text": big}, image],
        tool_call_id="c1",
        name="shell",
        id="msg-7",
        artifact={"exit": 1},
        status="error",
    )
    messages: list[Any] = [
        HumanMessage("run it"),
        call("shell", {"cmd": "make"}, "c1"),
        result,
        AIMessage(content="it failed"),
    ]
    session = Budget.in_memory(format=LANGCHAIN)
    out = session.prepare(messages).messages
    assert out[0] is messages[0]
    assert out[1] is messages[1]
    assert out[3] is messages[3]
    shown = out[2]
    assert isinstance(shown, ToolMessage)
    assert (shown.id, shown.name, shown.tool_call_id) == ("msg-7", "shell", "c1")
    assert (shown.artifact, shown.status) == ({"exit": 1}, "error")
    assert isinstance(shown.content, list)
    assert shown.content[1] == image
    first = shown.content[0]
    assert isinstance(first, dict)
    assert first["text"].startswith("[toolbudget] Output of shell was too large")
    assert result.content[0] == {"type": "text", "text": big}
    ref = envelope_ref(first["text"])
    assert ref is not None
    assert session.read(ref) == big


def test_session_in_another_format_is_refused(tmp_path: Path) -> None:
    """A session fixed to another format refuses the agent's messages before the model sees them."""
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from budget.integrations.langchain import ToolBudgetMiddleware
    from tests.integrations._langchain_kit import ReadingModel, read_file

    with pytest.raises(ConfigError, match=r"needs a budget\.Budget session"):
        ToolBudgetMiddleware(str(tmp_path))  # type: ignore[arg-type]
    model = ReadingModel(paths=[])
    session = Budget.in_memory(format="anthropic")
    agent = create_agent(model, tools=[read_file], middleware=[ToolBudgetMiddleware(session)])
    with pytest.raises(FormatError, match=r"'anthropic'.*'langchain'"):
        agent.invoke({"messages": [HumanMessage("hello")]})
    assert model.received == []


def test_read_tool_pages_and_reports_errors(big_file: tuple[Path, str]) -> None:
    """The LangChain read-back tool returns exact lines, and an error text for a bad ref."""
    from budget.integrations.langchain import LANGCHAIN, session_read_tool

    _, text = big_file
    session = Budget.in_memory(format=LANGCHAIN)
    ref = session.store.put(text)
    read = session_read_tool(session)
    assert read.name == "toolbudget_read"
    page = read.invoke({"ref": ref, "offset": PAGE_OFFSET, "limit": PAGE_LIMIT})
    assert page_rows(page) == expected_rows(text)
    assert read.invoke({"ref": "nope"}).startswith("Error:")


@pytest.mark.parametrize("run_async", [False, True], ids=["invoke", "ainvoke"])
@pytest.mark.usefixtures("structlog_defaults")
def test_each_thread_gets_its_own_session_under_root(tmp_path: Path, run_async: bool) -> None:
    """Two threads through one agent: a session directory each, no ``decision_stale``."""
    from tests.integrations._langchain_kit import threads_through_one_agent

    files = {"ticket 1/a": tmp_path / "a.log", "ticket-2": tmp_path / "b.log"}
    texts = {t: write_big_file(p, seed=n) for n, (t, p) in enumerate(files.items())}
    root = tmp_path / "sessions"
    with capture_logs() as events:
        threads_through_one_agent(root, files, run_async=run_async)
    names = [e["event"] for e in events]
    assert "toolbudget.session.decision_stale" not in names
    assert sorted(p.name for p in root.iterdir()) == ["ticket%201%2Fa", "ticket-2"]
    for thread, text in texts.items():
        with Budget.open(root / quote(thread, safe="")) as session:
            decision = session.decision("call_read_1")  # the same call id in both threads
            assert decision is not None and decision.ref is not None
            assert session.read(decision.ref) == text


@pytest.mark.usefixtures("structlog_defaults")
def test_resuming_a_thread_reuses_its_session(tmp_path: Path) -> None:
    """A thread resumed (same middleware, then a new one) is budgeted by its own session again."""
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from budget.integrations.langchain import ToolBudgetMiddleware
    from tests.integrations._langchain_kit import ThreadModel, read_file

    first, other = tmp_path / "a.log", tmp_path / "b.log"
    write_big_file(first)
    write_big_file(other, seed=7)
    model = ThreadModel(paths=[])
    saver = InMemorySaver()
    root = tmp_path / "sessions"
    a: Any = {"configurable": {"thread_id": "a"}}
    with capture_logs() as events:
        middleware = ToolBudgetMiddleware(root=root)
        agent = create_agent(model, tools=[read_file], middleware=[middleware], checkpointer=saver)
        agent.invoke({"messages": [HumanMessage(str(first))]}, a)
        envelope = model.received[1][-1].text
        agent.invoke({"messages": [HumanMessage(str(other))]}, {"configurable": {"thread_id": "b"}})
        agent.invoke({"messages": [HumanMessage("And now?")]}, a)
        assert model.received[-1][2].text == envelope  # the frozen decision, byte for byte
        middleware.close()
        # After a restart: a new middleware on the same root resumes thread a's session.
        again = ToolBudgetMiddleware(root=root)
        agent = create_agent(model, tools=[read_file], middleware=[again], checkpointer=saver)
        agent.invoke({"messages": [HumanMessage("Still there?")]}, a)
        again.close()
    assert model.received[-1][2].text == envelope
    names = [e["event"] for e in events]
    assert "toolbudget.session.decision_stale" not in names
    assert names.count("toolbudget.session.resumed") == 1
    assert sorted(p.name for p in root.iterdir()) == ["a", "b"]


def test_root_middleware_refuses_a_run_without_thread_id(tmp_path: Path) -> None:
    """With ``root=`` a run without a thread id is refused with a ConfigError saying what to pass."""
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from budget.integrations.langchain import ToolBudgetMiddleware
    from tests.integrations._langchain_kit import ThreadModel, read_file

    middleware = ToolBudgetMiddleware(root=tmp_path / "sessions")
    agent = create_agent(ThreadModel(paths=[]), tools=[read_file], middleware=[middleware])
    with pytest.raises(ConfigError, match="thread_id"):
        agent.invoke({"messages": [HumanMessage(str(tmp_path))]})
    with pytest.raises(ConfigError, match="cannot name a session directory"):
        middleware.session_for("..")
    # A thread id cut inside an emoji names a directory of its own (it raised UnicodeEncodeError).
    cut = middleware.session_for("chat-\ud83d")
    assert (tmp_path / "sessions" / "chat-%ED%A0%BD" / "session.json").is_file()
    assert middleware.session_for("chat-\ud83d") is cut
    middleware.close()
    with pytest.raises(ConfigError, match="either a session or root"):
        ToolBudgetMiddleware()


def test_root_middleware_refuses_a_file_as_root(tmp_path: Path) -> None:
    """A ``root=`` that is a file is refused when the middleware is built, not at a thread's first
    model call."""
    from budget.integrations.langchain import ToolBudgetMiddleware

    path = tmp_path / "sessions"
    path.write_text("not a directory")
    with pytest.raises(ConfigError, match="not a directory"):
        ToolBudgetMiddleware(root=path)


def test_a_threads_session_is_opened_in_the_langchain_format(tmp_path: Path) -> None:
    """A session the middleware opens for a thread is told its format at open: its read-back
    tool has that format's shape before any request, where a guess would be refused."""
    from budget.integrations.langchain import LANGCHAIN, ToolBudgetMiddleware

    middleware = ToolBudgetMiddleware(root=tmp_path / "sessions")
    try:
        session = middleware.session_for("t-1")
        assert session.read_tool() == session.read_tool(format=LANGCHAIN)
    finally:
        middleware.close()
    with Budget.open(tmp_path / "plain") as plain, pytest.raises(FormatError):
        plain.read_tool()  # opened without a format: nothing known, nothing guessed
