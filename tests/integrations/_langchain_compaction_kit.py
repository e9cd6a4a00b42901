"""The framework side of tests/integrations/test_langchain_compaction.py: its tools, models and
helpers, imported by each test so that collecting the suite imports no LangChain."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import Field

from tests.compaction import AUTO, ROUNDS, build_log
from tests.integrations._langchain_fake import ToolNamingModel

CONFIG = AUTO
"""A 4k window: the agent's history passes the 3,000-token threshold after about a dozen rounds."""


SUMMARY = "## Goal\nFix the parser without editing tests/."


@tool
def run(step: int) -> str:
    """Run one step of the build and return its log."""
    return build_log(step)


class WorkingModel(ToolNamingModel):
    """A chat model that calls ``run`` ``rounds`` times, then answers; asked under the
    summarizer's prompt (no tools bound), it writes a fixed summary."""

    rounds: int = ROUNDS
    refuse_over: int | None = None
    """Refuse (a prompt-too-long error, as a provider words it) more messages than this."""
    refused: int = 0
    received: list[list[BaseMessage]] = Field(default_factory=list)
    summaries: list[list[BaseMessage]] = Field(default_factory=list)
    summary_tools: list[list[str]] = Field(default_factory=list)
    """The tools bound on each summary request (none: the summarizer binds no tools)."""

    def reply(self, messages: list[BaseMessage]) -> ChatResult:
        """A summary when asked to summarize; else the next step, or a refusal when told to."""
        if (
            messages
            and isinstance(messages[0], SystemMessage)
            and "summarizing" in messages[0].text
        ):
            self.summaries.append(list(messages))
            self.summary_tools.append(self.offered[-1])
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=SUMMARY))])
        self.received.append(list(messages))
        if self.refuse_over is not None and len(messages) > self.refuse_over:
            self.refused += 1
            raise ValueError(f"prompt is too long: {len(messages) * 1_000} tokens > 30000 maximum")
        done = sum(1 for m in all_calls(messages))
        if done < self.rounds:
            call = {"name": "run", "args": {"step": done}, "id": f"call_{done}"}
            reply = AIMessage(content=f"Running step {done}.", tool_calls=[call])
        else:
            reply = AIMessage(content="done")
        # A usage per success: it ends an overflow streak.
        n = len(self.received)
        reply.usage_metadata = {"input_tokens": n, "output_tokens": 1, "total_tokens": n + 1}
        return ChatResult(generations=[ChatGeneration(message=reply)])


def all_calls(messages: list[BaseMessage]) -> list[str]:
    """The step numbers run so far, read from the calls (or, once compacted, the tail's calls
    and the summary's count) so the model goes on where the history says it is."""
    steps = [
        str(tc["args"]["step"]) for m in messages if isinstance(m, AIMessage) for tc in m.tool_calls
    ]
    if steps:
        last = int(steps[-1])
        return [str(i) for i in range(last + 1)]
    return []


def check(model: WorkingModel, state: dict[str, Any]) -> None:
    """The run compacted: a summary call without tools, then copies led by the summary; the
    agent's state kept every message."""
    assert model.summaries, "no summary was asked for"
    assert model.summary_tools and all(names == [] for names in model.summary_tools)
    transcript = model.summaries[0][1].text
    assert "[tool call call_0] run(" in transcript
    assert "Fix the parser" in transcript
    compacted = [m for m in model.received if "<summary>" in m[0].text]
    assert compacted
    first = compacted[-1][0]
    assert isinstance(first, HumanMessage)
    assert SUMMARY in first.text
    assert "Fix the parser." in first.text  # the user's words, carried verbatim
    assert len(compacted[-1]) < len(state["messages"])
    assert len(state["messages"]) == 1 + 2 * ROUNDS + 1
    assert state["messages"][-1].text == "done"
