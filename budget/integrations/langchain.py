"""LangChain v1: an agent middleware that budgets every model call, and the read-back tool.

    from langchain.agents import create_agent
    from budget import Budget
    from budget.integrations.langchain import ToolBudgetMiddleware

    session = Budget.open("sessions/<id>")
    agent = create_agent(model, tools=[...], middleware=[ToolBudgetMiddleware(session)])

The middleware hands the model a budgeted copy of ``request.messages`` (the agent state keeps the
full messages) and registers the read-back tool with the agent, so the model can read spilled
outputs back. It prepares every request in the :data:`LANGCHAIN` format, which fixes the
session's format (a session fixed to another one raises FormatError on the first call).
Requires the ``langchain`` extra (``pip install 'toolbudget[langchain]'``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

try:
    from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
    from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
    from langchain_core.tools import StructuredTool
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "budget.integrations.langchain needs LangChain v1: pip install 'toolbudget[langchain]'"
    ) from exc

from budget._errors import InputError
from budget._report import Report
from budget._session import Budget
from budget._view import EMPTY_SCAN, Call, RawResult, Scanned
from budget.integrations._common import is_overflow, require_session

__all__ = ["LANGCHAIN", "LangChainFormat", "ToolBudgetMiddleware", "session_read_tool"]


def _content_text(content: object, where: str) -> tuple[str, int]:
    """The text of a ToolMessage's content and how many non-text parts it has."""
    if isinstance(content, str):
        return content, 0
    if not isinstance(content, list):
        raise InputError(
            f"{where}.content must be a string or a list of content blocks, "
            f"not {type(content).__name__}"
        )
    texts: list[str] = []
    others = 0
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and part.get("type") == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise InputError(f"{where}: a text block's text must be a string")
            texts.append(text)
        else:
            # Images, files and provider blocks: never rewritten, counted by an estimate.
            others += 1
    return "\n".join(texts), others


def _replace_text(content: object, text: str) -> str | list[Any]:
    """``content`` showing ``text`` in place of its text parts; other blocks kept in place."""
    if not isinstance(content, list):
        return text
    out: list[Any] = []
    placed = False
    for part in content:
        is_text = isinstance(part, str) or (isinstance(part, dict) and part.get("type") == "text")
        if not is_text:
            out.append(part)
        elif not placed:
            # The first text part keeps its shape and its other keys (an id, annotations).
            out.append(text if isinstance(part, str) else {**part, "text": text})
            placed = True
    if not placed:
        out.insert(0, {"type": "text", "text": text})
    return out


class LangChainFormat:
    """LangChain messages: ``AIMessage.tool_calls`` make calls, ``ToolMessage`` holds a result."""

    name = "langchain"

    def scan(self, index: int, message: Any) -> Scanned:
        """Validate one message and say which calls and results it holds."""
        where = f"messages[{index}]"
        if not isinstance(message, BaseMessage):
            raise InputError(
                f"{where} must be a LangChain message (BaseMessage), not {type(message).__name__}"
            )
        if isinstance(message, AIMessage):
            calls: list[Call] = []
            # Invalid calls (arguments that did not parse) may still be answered by a ToolMessage.
            for tc in (*message.tool_calls, *message.invalid_tool_calls):
                call_id = tc.get("id")
                if isinstance(call_id, str) and call_id:
                    calls.append(Call(call_id, tc.get("name") or ""))
            return Scanned(tuple(calls), (), opens_round=True) if calls else EMPTY_SCAN
        if isinstance(message, ToolMessage):
            if not isinstance(message.tool_call_id, str) or not message.tool_call_id:
                raise InputError(f"{where}.tool_call_id must be a non-empty string")
            text, others = _content_text(message.content, where)
            raw = RawResult(message.tool_call_id, 0, text, message.status == "error", others)
            return Scanned((), (raw,))
        return EMPTY_SCAN

    def rewrite(self, message: Any, texts: Mapping[int, str]) -> Any:
        """A copy of the ToolMessage showing the new text; id, name, artifact, status kept."""
        if 0 not in texts:
            return message
        return message.model_copy(update={"content": _replace_text(message.content, texts[0])})


LANGCHAIN = LangChainFormat()
"""The LangChain message format (the middleware names it on every request)."""


def session_read_tool(session: Budget) -> StructuredTool:
    """The read-back tool as a LangChain tool (its JSON schema is the session's own)."""
    spec = session.read_tool(format="anthropic")

    def read(**kwargs: Any) -> str:
        return session.handle_read_tool(kwargs)

    async def aread(**kwargs: Any) -> str:
        # Reading a body is file I/O: keep it off the event loop.
        return await asyncio.to_thread(session.handle_read_tool, kwargs)

    return StructuredTool(
        name=spec["name"],
        description=spec["description"],
        args_schema=spec["input_schema"],
        func=read,
        coroutine=aread,
    )


def _last_usage(messages: Sequence[Any]) -> Any:
    """The usage the last model reply reported (it describes the previous request), if any."""
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            return message.usage_metadata
    return None


class ToolBudgetMiddleware(AgentMiddleware):
    """Budgets each model call's messages; registers the read-back tool with the agent.

    One session per conversation: the session keeps per-message state of the last history it saw
    and freezes each result's decision, so the same history gives the same request bytes. When
    the provider refuses a request as too long, the middleware tells the session and retries
    with a harder budget (at most twice; the third refusal raises ContextOverflow).
    """

    def __init__(
        self, session: Budget, *, read_tool: bool = True, retry_on_overflow: bool = True
    ) -> None:
        super().__init__()
        self.session = require_session(session, "ToolBudgetMiddleware")
        self.retry_on_overflow = retry_on_overflow
        self.tools = [session_read_tool(session)] if read_tool else []
        self.last_report: Report | None = None
        """The report of the last model call budgeted."""

    def _budget(self, request: ModelRequest) -> ModelRequest:
        messages = request.messages
        prepared = self.session.prepare(messages, usage=_last_usage(messages), format=LANGCHAIN)
        self.last_report = prepared.report
        return request.override(messages=prepared.messages)

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse:
        """Call the model with the budgeted messages (again, harder, after an overflow)."""
        while True:
            budgeted = self._budget(request)
            try:
                return handler(budgeted)
            except Exception as exc:
                if not (self.retry_on_overflow and is_overflow(self.session, exc)):
                    raise

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        """The async form: budgeting (it may write spilled bodies) runs in a worker thread."""
        while True:
            budgeted = await asyncio.to_thread(self._budget, request)
            try:
                return await handler(budgeted)
            except Exception as exc:
                if not (self.retry_on_overflow and is_overflow(self.session, exc)):
                    raise
