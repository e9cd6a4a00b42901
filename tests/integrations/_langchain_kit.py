"""The LangChain side of tests/integrations/test_langchain.py: its tool, reading models and checks,
imported by each test so that collecting the suite imports no LangChain."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import Field

from budget import Budget
from budget.integrations.langchain import ToolBudgetMiddleware
from tests.integrations._agentkit import (
    PAGE_LIMIT,
    PAGE_OFFSET,
    envelope_ref,
    expected_rows,
    page_rows,
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
                return call("toolbudget_read", args, f"call_back_{read}")
        if read < len(self.paths):
            return call("read_file", {"path": self.paths[read]}, f"call_read_{read + 1}")
        return AIMessage(content="done")


def call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])


def check_run(
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


class ThreadModel(ReadingModel):
    """A ReadingModel that reads the file its conversation's first message names, then answers."""

    def _decide(self, messages: list[BaseMessage]) -> AIMessage:
        self.paths = [messages[0].text]
        return super()._decide(messages)


def threads_through_one_agent(root: Path, files: dict[str, Path], *, run_async: bool) -> None:
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
