"""The framework side of tests/integrations/test_pydantic_ai.py: its tools, models and
helpers, imported by each test so that collecting the suite imports no pydantic-ai."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo

from budget import Budget
from tests.integrations._agentkit import (
    PAGE_LIMIT,
    PAGE_OFFSET,
    envelope_ref,
    expected_rows,
    page_rows,
)


def read_file(path: str) -> str:
    """Read a text file and return its contents."""
    return Path(path).read_text(encoding="utf-8")


def returns(message: ModelMessage) -> list[ToolReturnPart]:
    if not isinstance(message, ModelRequest):
        return []
    return [p for p in message.parts if isinstance(p, ToolReturnPart)]


def all_returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages for p in returns(m)]


@dataclass
class Reader:
    """A model function deciding its next response from the messages it receives.

    It reads each of ``paths`` in turn; when a result comes back as an envelope it reads a page of
    it back through the read-back tool; then it answers. With ``refuse_over`` set it raises a
    prompt-too-long error, like a provider, when the tool returns it receives exceed that size.
    """

    paths: list[str]
    refuse_over: int | None = None
    received: list[list[ModelMessage]] = field(default_factory=list)
    offered: list[list[str]] = field(default_factory=list)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.received.append(list(messages))
        self.offered.append([t.name for t in info.function_tools])
        shown = sum(len(str(p.content)) for p in all_returns(messages))
        if self.refuse_over is not None and shown > self.refuse_over:
            raise ValueError(f"prompt is too long: {shown // 4} tokens > 50000 maximum")
        read = sum(1 for p in all_returns(messages) if p.tool_name == "read_file")
        last = returns(messages[-1])
        if last and last[-1].tool_name == "read_file":
            ref = envelope_ref(str(last[-1].content))
            if ref is not None:
                args = {"ref": ref, "offset": PAGE_OFFSET, "limit": PAGE_LIMIT}
                return ModelResponse(parts=[ToolCallPart("toolbudget_read", args, f"back_{read}")])
        if read < len(self.paths):
            args = {"path": self.paths[read]}
            return ModelResponse(parts=[ToolCallPart("read_file", args, f"read_{read + 1}")])
        return ModelResponse(parts=[TextPart("done")])


def check_envelope_and_page(reader: Reader, session: Budget, path: Path, text: str) -> str:
    """The model saw an envelope, then the same envelope and the exact lines read back."""
    assert len(reader.received) == 3
    assert {"read_file", "toolbudget_read"} <= set(reader.offered[0])
    (shown,) = returns(reader.received[1][-1])
    assert shown.tool_call_id == "read_1"
    assert isinstance(shown.content, str)
    assert shown.content.startswith("[toolbudget] Output of read_file was too large")
    assert len(shown.content) < 5_000 < len(text)
    ref = envelope_ref(shown.content)
    assert ref is not None
    first, page = all_returns(reader.received[2])
    assert first.content == shown.content
    assert page.tool_name == "toolbudget_read"
    assert page_rows(str(page.content)) == expected_rows(text)
    assert session.read(ref).encode("utf-8") == path.read_bytes()
    decision = session.decision("read_1")
    assert decision is not None
    assert (decision.kind, decision.ref) == ("spilled", ref)
    return ref
