"""LangChain v1: the middleware inside a real ``create_agent`` loop, with a model that reads."""

# ruff: noqa: E402 - the framework is imported after its CI guard (require_module below).
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests._ci import require_module

require_module("langchain.agents", extra="langchain")

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field
from structlog.testing import capture_logs

from budget import Budget, ConfigError, FormatError
from budget.integrations.langchain import LANGCHAIN, ToolBudgetMiddleware, session_read_tool
from tests.integrations._agentkit import (
    PAGE_LIMIT,
    PAGE_OFFSET,
    envelope_ref,
    expected_rows,
    page_rows,
    write_big_file,
)
from tests.integrations._langchain_fake import ToolNamingModel


@tool
def read_file(path: str) -> str:
    """Read a text file and return its contents."""
    return Path(path).read_text(encoding="utf-8")


class ReadingModel(ToolNamingModel):
    """A chat model that decides its next message from the messages it receives.

    It reads each of ``paths`` in turn; when a result comes back as an envelope it reads a page
    of it back through the read-back tool; then it answers. With ``refuse_over`` set it raises a
    prompt-too-long error, like a provider, when the tool results it receives exceed that size.
    """

    paths: list[str]
    refuse_over: int | None = None
    usage_tokens: int | None = None
    received: list[list[BaseMessage]] = Field(default_factory=list)

    def reply(self, messages: list[BaseMessage]) -> ChatResult:
        """Read the next file, or answer once every path was read; refuse when told to."""
        self.received.append(list(messages))
        shown = sum(len(m.text) for m in messages if isinstance(m, ToolMessage))
        if self.refuse_over is not None and shown > self.refuse_over:
            raise ValueError(
                f"prompt is too long: {shown // 4} tokens > {self.refuse_over // 4} maximum"
            )
        reply = self._decide(messages)
        if self.usage_tokens is not None:
            reply.usage_metadata = {
                "input_tokens": self.usage_tokens,
                "output_tokens": 20,
                "total_tokens": self.usage_tokens + 20,
            }
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def _decide(self, messages: list[BaseMessage]) -> AIMessage:
        read = sum(1 for m in messages if isinstance(m, ToolMessage) and m.name == "read_file")
        last = messages[-1]
        if isinstance(last, ToolMessage) and last.name == "read_file":
            ref = envelope_ref(last.text)
            if ref is not None:
                args = {"ref": ref, "offset": PAGE_OFFSET, "limit": PAGE_LIMIT}
                return _call("toolbudget_read", args, f"call_back_{read}")
        if read < len(self.paths):
            return _call("read_file", {"path": self.paths[read]}, f"call_read_{read + 1}")
        return AIMessage(content="done")


def _call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])


def _check_run(
    model: ReadingModel,
    state: dict[str, Any],
    session: Budget,
    middleware: ToolBudgetMiddleware,
    path: Path,
    text: str,
) -> None:
    assert len(model.received) == 3
    assert {"read_file", "toolbudget_read"} <= set(model.offered[0])
    shown = model.received[1][-1]
    assert isinstance(shown, ToolMessage)
    assert shown.name == "read_file"
    assert shown.tool_call_id == "call_read_1"
    assert shown.text.startswith("[toolbudget] Output of read_file was too large")
    assert len(shown.text) < 5_000 < len(text)
    ref = envelope_ref(shown.text)
    assert ref is not None
    # The next request shows the same envelope, byte for byte, then the page read back.
    assert model.received[2][2].text == shown.text
    page = model.received[2][-1]
    assert isinstance(page, ToolMessage)
    assert page.name == "toolbudget_read"
    assert page_rows(page.text) == expected_rows(text)
    assert session.read(ref).encode("utf-8") == path.read_bytes()
    # The agent's own state still holds the full output.
    full = state["messages"][2]
    assert isinstance(full, ToolMessage)
    assert full.text == text
    assert state["messages"][-1].text == "done"
    decision = session.decision("call_read_1")
    assert decision is not None
    assert decision.kind == "spilled"
    assert decision.ref == ref
    assert middleware.last_report is not None
    assert middleware.last_report.spilled == 1


def test_agent_sees_envelope_and_reads_back(big_file: tuple[Path, str], tmp_path: Path) -> None:
    """In a sync agent run the model gets an envelope, reads exact lines back; state keeps all."""
    path, text = big_file
    with Budget.open(tmp_path / "session") as session:
        model = ReadingModel(paths=[str(path)])
        middleware = ToolBudgetMiddleware(session)
        agent = create_agent(model, tools=[read_file], middleware=[middleware])
        state = agent.invoke({"messages": [HumanMessage("What went wrong in the log?")]})
        _check_run(model, state, session, middleware, path, text)


def test_async_agent_sees_envelope_and_reads_back(
    big_file: tuple[Path, str], tmp_path: Path
) -> None:
    """The same run through ``ainvoke`` goes through ``awrap_model_call`` and the async tool."""
    path, text = big_file
    with Budget.open(tmp_path / "session", format=LANGCHAIN) as session:
        model = ReadingModel(paths=[str(path)])
        middleware = ToolBudgetMiddleware(session)
        agent = create_agent(model, tools=[read_file], middleware=[middleware])
        state = asyncio.run(agent.ainvoke({"messages": [HumanMessage("What went wrong?")]}))
        _check_run(model, state, session, middleware, path, text)


def test_overflow_is_retried_with_old_results_trimmed(tmp_path: Path) -> None:
    """A prompt-too-long refusal is retried once, with the older round's output trimmed."""
    first, second = tmp_path / "a.log", tmp_path / "b.log"
    text_a = write_big_file(first)
    text_b = write_big_file(second, seed=7)
    config = {"result_cap": 200_000}
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
        _call("shell", {"cmd": "make"}, "c1"),
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
    _, text = big_file
    session = Budget.in_memory(format=LANGCHAIN)
    ref = session.store.put(text)
    read = session_read_tool(session)
    assert read.name == "toolbudget_read"
    page = read.invoke({"ref": ref, "offset": PAGE_OFFSET, "limit": PAGE_LIMIT})
    assert page_rows(page) == expected_rows(text)
    assert read.invoke({"ref": "nope"}).startswith("Error:")


class ThreadModel(ReadingModel):
    """A ReadingModel that reads the file its conversation's first message names, then answers."""

    def _decide(self, messages: list[BaseMessage]) -> AIMessage:
        self.paths = [messages[0].text]
        return super()._decide(messages)


def _threads_through_one_agent(root: Path, files: dict[str, Path], *, run_async: bool) -> None:
    """Run one conversation per thread id through one agent; the middleware is closed after."""
    model = ThreadModel(paths=[])
    middleware = ToolBudgetMiddleware(root=root)
    agent = create_agent(model, tools=[read_file], middleware=[middleware])
    try:
        for thread, path in files.items():
            run: Any = {"messages": [HumanMessage(str(path))]}
            config: Any = {"configurable": {"thread_id": thread}}
            if run_async:
                state = asyncio.run(agent.ainvoke(run, config))
            else:
                state = agent.invoke(run, config)
            page = state["messages"][-2]  # the page read back from this thread's own session
            assert isinstance(page, ToolMessage)
            assert page.name == "toolbudget_read"
            assert page_rows(page.text) == expected_rows(path.read_text(encoding="utf-8"))
    finally:
        middleware.close()


@pytest.mark.parametrize("run_async", [False, True], ids=["invoke", "ainvoke"])
@pytest.mark.usefixtures("structlog_defaults")
def test_each_thread_gets_its_own_session_under_root(tmp_path: Path, run_async: bool) -> None:
    """Two threads through one agent: a session directory each, no ``decision_stale``."""
    files = {"ticket 1/a": tmp_path / "a.log", "ticket-2": tmp_path / "b.log"}
    texts = {t: write_big_file(p, seed=n) for n, (t, p) in enumerate(files.items())}
    root = tmp_path / "sessions"
    with capture_logs() as events:
        _threads_through_one_agent(root, files, run_async=run_async)
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
    middleware = ToolBudgetMiddleware(root=tmp_path / "sessions")
    agent = create_agent(ThreadModel(paths=[]), tools=[read_file], middleware=[middleware])
    with pytest.raises(ConfigError, match="thread_id"):
        agent.invoke({"messages": [HumanMessage(str(tmp_path))]})
    with pytest.raises(ConfigError, match="cannot name a session directory"):
        middleware.session_for("..")
    with pytest.raises(ConfigError, match="either a session or root"):
        ToolBudgetMiddleware()
