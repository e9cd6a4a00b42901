"""pydantic-ai: a capability that budgets every model request, a history processor, the read tool.

    from pydantic_ai import Agent
    from budget import Budget
    from budget.integrations.pydantic_ai import ToolBudgetCapability

    session = Budget.open("sessions/<id>")
    agent = Agent(model, tools=[...], capabilities=[ToolBudgetCapability(session)])

The capability budgets the messages of each request attempt only: the run's message history
(``result.all_messages()``) keeps every tool return in full. It also gives the agent the read-back
tool, and retries a request the provider refused as too long with a harder budget. Every request
is prepared in the :data:`PYDANTIC_AI` format, which fixes the session's format.

pydantic-ai 2 removed ``Agent(history_processors=...)``; its replacement, ``ProcessHistory``,
writes the processor's output back into the run's history. :func:`toolbudget_history_processor`
works there too (it maps its own output back to the originals before budgeting, and a new
processor on the session, after a restart, reads the outputs behind the envelopes back, so
decisions stay frozen), but the history then holds envelopes: prefer the capability.

Tool return content that is not a string (a dict, a model, a list) is measured, spilled and read
back in its JSON text form, which is what the model is sent; when it is spilled the content becomes
the envelope string. Files in the content (images, documents) are kept and never rewritten.
Requires the ``pydantic-ai`` extra (``pip install 'toolbudget[pydantic-ai]'``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

try:
    from pydantic_ai import RunContext, Tool
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.exceptions import RetryModelRequest
    from pydantic_ai.messages import (
        ERROR_OUTCOMES,
        ModelMessage,
        ModelRequest,
        ModelResponse,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.toolsets import FunctionToolset
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "budget.integrations.pydantic_ai needs pydantic-ai 2: pip install 'toolbudget[pydantic-ai]'"
    ) from exc

from budget._errors import BudgetError, InputError
from budget._report import Report
from budget._view import EMPTY_SCAN, PROMPT_SCAN, REPLY_SCAN, Call, Format, RawResult, Scanned
from budget.formats._common import call_facts
from budget.integrations._common import (
    attach_summarizer,
    is_overflow,
    is_summary,
    native_summary,
    require_flag,
    require_session,
)
from budget.session._budget import Budget

__all__ = [
    "PYDANTIC_AI",
    "PydanticAIFormat",
    "ToolBudgetCapability",
    "session_read_tool",
    "toolbudget_history_processor",
]


def _return_text(part: ToolReturnPart) -> tuple[str, int]:
    """The text the model is sent for a tool return, and how many files it carries."""
    if isinstance(part.content, str):
        return part.content, 0
    items = part.content_items(mode="str", wrap_if_error=False)
    texts = [item for item in items if isinstance(item, str)]
    return "\n".join(texts), len(items) - len(texts)


class PydanticAIFormat(Format):
    """pydantic-ai messages: ``ToolCallPart`` in responses, ``ToolReturnPart`` in requests."""

    name = "pydantic-ai"

    def scan(self, index: int, message: Any) -> Scanned:
        """Validate one message and say which calls and results it holds."""
        if is_summary(message):
            return EMPTY_SCAN  # compaction's summary message, made a ModelRequest on the way out
        if isinstance(message, ModelResponse):
            calls = tuple(
                Call(part.tool_call_id, part.tool_name, *call_facts(part.tool_name, part.args))
                for part in message.parts
                if isinstance(part, ToolCallPart)
            )
            return Scanned(calls, (), opens_round=True) if calls else REPLY_SCAN
        if isinstance(message, ModelRequest):
            results: list[RawResult] = []
            for slot, part in enumerate(message.parts):
                # Typed return parts (tool search, capability loads) are the framework's own
                # bookkeeping, with a validated content shape a text would break: left alone.
                if type(part) is ToolReturnPart:
                    text, files = _return_text(part)
                    error = part.outcome in ERROR_OUTCOMES
                    results.append(RawResult(part.tool_call_id, slot, text, error, files))
            if results:
                return Scanned((), tuple(results))
            prompted = any(isinstance(part, UserPromptPart) for part in message.parts)
            return PROMPT_SCAN if prompted else EMPTY_SCAN
        raise InputError(
            f"messages[{index}] must be a pydantic-ai ModelRequest or ModelResponse, "
            f"not {type(message).__name__}"
        )

    def rewrite(self, message: Any, texts: Mapping[int, str]) -> Any:
        """A copy of the request whose tool returns at the given slots show the given texts."""
        parts = list(message.parts)
        for slot, text in texts.items():
            part = parts[slot]
            files = [] if isinstance(part.content, str) else part.files
            parts[slot] = replace(part, content=[text, *files] if files else text)
        return replace(message, parts=parts)


def _native(summaries: dict[str, ModelRequest], message: Any) -> Any:
    """``message``, or for compaction's summary the ModelRequest showing it (:func:`native_summary`)."""
    return native_summary(
        summaries, message, lambda text: ModelRequest(parts=[UserPromptPart(content=text)])
    )


PYDANTIC_AI = PydanticAIFormat()
"""The pydantic-ai message format (the capability and the processor name it on every request)."""


def session_read_tool(session: Budget) -> Tool[Any]:
    """The read-back tool as a pydantic-ai ``Tool`` (its JSON schema is the session's own)."""
    session = require_session(session, "session_read_tool")
    spec = session.read_tool(format="anthropic")

    async def read(**kwargs: Any) -> str:
        # Reading a body is file I/O: keep it off the event loop.
        return await asyncio.to_thread(session.handle_read_tool, kwargs)

    return Tool.from_schema(
        read,
        name=spec["name"],
        description=spec["description"],
        json_schema=spec["input_schema"],
    )


def _last_usage(messages: Sequence[ModelMessage]) -> Any:
    """The usage the last response reported (it describes the previous request), if any."""
    for message in reversed(messages):
        if isinstance(message, ModelResponse):
            return message.usage if message.usage.input_tokens else None
    return None


@dataclass
class ToolBudgetCapability(AbstractCapability[Any]):
    """Budgets each model request's messages; gives the agent the read-back tool.

    The budgeting runs in ``prepare_model_request``, once per attempt, on what the agent is about
    to send: the run's history is not touched. A request the provider refuses as too long is
    attempted again with a harder budget (at most twice; the third refusal compacts when the
    session can, else raises ContextOverflow). One session per conversation.

    ``summarizer`` (sync or async, see :mod:`budget.summarizers`) makes compaction possible,
    with the session's ``compaction`` setting (``"auto"`` for it to run by itself); the summary
    reaches the model as a ``ModelRequest`` with one ``UserPromptPart``.
    """

    session: Budget
    read_tool: bool = True
    retry_on_overflow: bool = True
    summarizer: Callable[[Sequence[Any]], Any] | None = None
    last_report: Report | None = field(default=None, init=False, compare=False)
    """The report of the last request budgeted."""
    _summaries: dict[str, ModelRequest] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        require_session(self.session, "ToolBudgetCapability")
        require_flag(self.read_tool, "read_tool", "ToolBudgetCapability")
        require_flag(self.retry_on_overflow, "retry_on_overflow", "ToolBudgetCapability")
        attach_summarizer(self.session, self.summarizer, "ToolBudgetCapability")

    def get_toolset(self) -> FunctionToolset[Any] | None:
        """The read-back tool, unless ``read_tool=False``."""
        return FunctionToolset([session_read_tool(self.session)]) if self.read_tool else None

    async def prepare_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Replace the request's messages with their budgeted copy."""
        messages = list(request_context.messages)
        # aprepare budgets in a worker thread (file I/O) and awaits an async summarizer here.
        prepared = await self.session.aprepare(
            messages, usage=_last_usage(messages), format=PYDANTIC_AI
        )
        self.last_report = prepared.report
        request_context.messages = [self._native(m) for m in prepared.messages]
        return request_context

    def _native(self, message: Any) -> Any:
        """``message``, or for compaction's summary the ModelRequest showing it."""
        return _native(self._summaries, message)

    async def on_model_request_error(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, error: Exception
    ) -> ModelResponse:
        """A prompt-too-long error makes another attempt, budgeted harder; others propagate."""
        if self.retry_on_overflow and is_overflow(self.session, error):
            raise RetryModelRequest() from error
        raise error


class _HistoryProcessor:
    """Budgets a history; maps its own earlier output back to the originals first."""

    def __init__(self, session: Budget) -> None:
        self._session = session
        # id(copy) -> (copy, original): ProcessHistory writes our copies into the run's history,
        # and budgeting a copy again would re-decide results from their envelopes.
        self._originals: dict[int, tuple[ModelMessage, ModelMessage]] = {}
        self._summaries: dict[str, ModelRequest] = {}

    def _original(self, message: ModelMessage) -> ModelMessage:
        hit = self._originals.get(id(message))
        return hit[1] if hit is not None and hit[0] is message else self._read_back(message)

    def _read_back(self, message: ModelMessage) -> ModelMessage:
        """``message`` with each tool return showing exactly its frozen decision's text (a copy
        ProcessHistory stored, met by a new processor after a restart) holding its output again,
        read back: budgeting the copy would take it for an edited output and decide it anew."""
        if not isinstance(message, ModelRequest):
            return message
        texts: dict[int, str] = {}
        for slot, part in enumerate(message.parts):
            if type(part) is not ToolReturnPart:
                continue
            decision = self._session.decision(part.tool_call_id)
            if decision is None or decision.ref is None or decision.text is None:
                continue
            if _return_text(part)[0] == decision.text:
                try:
                    texts[slot] = self._session.read(decision.ref)
                except BudgetError:
                    continue  # the body is gone: the copy is budgeted as the output it shows
        return PYDANTIC_AI.rewrite(message, texts) if texts else message

    def __call__(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        restored = [self._original(m) for m in messages]
        sent = self._session.prepare(
            restored, usage=_last_usage(restored), format=PYDANTIC_AI
        ).messages
        out: list[ModelMessage] = [_native(self._summaries, m) for m in sent]
        # A compacted copy is a summary in place of a prefix: the rest pairs from the end. The
        # summary maps to no original (a resent summary is before the retained tail: dropped).
        self._originals = {}
        for raw, o, m in zip(reversed(sent), reversed(out), reversed(restored), strict=False):
            if is_summary(raw):
                break
            if o is not m:
                self._originals[id(o)] = (o, m)
        return out


def toolbudget_history_processor(
    session: Budget,
) -> Callable[[list[ModelMessage]], list[ModelMessage]]:
    """A history processor (``list[ModelMessage] -> list[ModelMessage]``) using ``session``.

    For ``capabilities=[ProcessHistory(toolbudget_history_processor(session))]`` (or pydantic-ai
    1's ``history_processors=[...]``). The framework stores what it returns as the run's history;
    use :class:`ToolBudgetCapability` to keep the history in full.
    """
    return _HistoryProcessor(require_session(session, "toolbudget_history_processor"))
