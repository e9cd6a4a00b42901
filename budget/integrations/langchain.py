"""LangChain v1: an agent middleware that budgets every model call, and the read-back tool.

    from langchain.agents import create_agent
    from budget import Budget
    from budget.integrations.langchain import ToolBudgetMiddleware

    session = Budget.open("sessions/<id>")
    agent = create_agent(model, tools=[...], middleware=[ToolBudgetMiddleware(session)])

    # or one session per conversation: sessions/<thread_id>, by the run's LangGraph thread_id
    agent = create_agent(model, tools=[...], middleware=[ToolBudgetMiddleware(root="sessions")],
                         checkpointer=InMemorySaver())
    agent.invoke({"messages": [...]}, {"configurable": {"thread_id": "ticket-42"}})

The middleware hands the model a budgeted copy of ``request.messages`` (the agent state keeps the
full messages) and registers the read-back tool with the agent, so the model can read spilled
outputs back. It prepares every request in the :data:`LANGCHAIN` format, which fixes the
session's format (a session fixed to another one raises FormatError on the first call).
Requires the ``langchain`` extra (``pip install 'toolbudget[langchain]'``).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any
from urllib.parse import quote

try:
    from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
    from langchain.chat_models import init_chat_model
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
    )
    from langchain_core.tools import BaseTool, StructuredTool
    from langgraph.config import get_config
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "budget.integrations.langchain needs LangChain v1: pip install 'toolbudget[langchain]'"
    ) from exc

from budget._config import BudgetConfig, build_config
from budget._errors import ConfigError, InputError
from budget._readback import read_tool_definition
from budget._report import Prepared, Report
from budget._view import EMPTY_SCAN, PROMPT_SCAN, REPLY_SCAN, Call, Format, RawResult, Scanned
from budget.compaction._transcript import render_transcript
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
from budget.summarizers import PROMPT

__all__ = [
    "LANGCHAIN",
    "LangChainFormat",
    "ToolBudgetMiddleware",
    "chat_model_summarizer",
    "session_read_tool",
]


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


class LangChainFormat(Format):
    """LangChain messages: ``AIMessage.tool_calls`` make calls, ``ToolMessage`` holds a result."""

    name = "langchain"

    def scan(self, index: int, message: Any) -> Scanned:
        """Validate one message and say which calls and results it holds."""
        where = f"messages[{index}]"
        if is_summary(message):
            return EMPTY_SCAN  # compaction's summary message, made a HumanMessage on the way out
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
                    name = tc.get("name") or ""
                    calls.append(Call(call_id, name, *call_facts(name, tc.get("args"))))
            return Scanned(tuple(calls), (), opens_round=True) if calls else REPLY_SCAN
        if isinstance(message, ToolMessage):
            if not isinstance(message.tool_call_id, str) or not message.tool_call_id:
                raise InputError(f"{where}.tool_call_id must be a non-empty string")
            text, others = _content_text(message.content, where)
            raw = RawResult(message.tool_call_id, 0, text, message.status == "error", others)
            return Scanned((), (raw,))
        return PROMPT_SCAN if isinstance(message, HumanMessage) else EMPTY_SCAN

    def rewrite(self, message: Any, texts: Mapping[int, str]) -> Any:
        """A copy of the ToolMessage showing the new text; id, name, artifact, status kept."""
        if 0 not in texts:
            return message
        return message.model_copy(update={"content": _replace_text(message.content, texts[0])})


LANGCHAIN = LangChainFormat()
"""The LangChain message format (the middleware names it on every request)."""


def session_read_tool(session: Budget) -> StructuredTool:
    """The read-back tool as a LangChain tool (its JSON schema is the session's own)."""
    session = require_session(session, "session_read_tool")
    return _read_tool(session.read_tool(format="anthropic"), lambda: session)


def _read_tool(spec: Mapping[str, Any], resolve: Callable[[], Budget]) -> StructuredTool:
    """The read-back tool reading from the session ``resolve`` gives at each call."""

    def read(**kwargs: Any) -> str:
        return resolve().handle_read_tool(kwargs)

    async def aread(**kwargs: Any) -> str:
        session = resolve()  # here: the run's config is a context variable of this task
        # Reading a body is file I/O: keep it off the event loop.
        return await asyncio.to_thread(session.handle_read_tool, kwargs)

    return StructuredTool(
        name=spec["name"],
        description=spec["description"],
        args_schema=spec["input_schema"],
        func=read,
        coroutine=aread,
        metadata={"toolbudget": "read-back"},  # the middleware's check knows its own kind
    )


def chat_model_summarizer(
    model: BaseChatModel | str, *, prompt: str = PROMPT
) -> Callable[[Sequence[Any]], str]:
    """A summarizer (see :mod:`budget.summarizers`) calling a LangChain chat model.

    ``model`` is a chat model or a model name for ``init_chat_model`` (e.g.
    ``"anthropic:claude-haiku-4-5"``). The request is :data:`budget.summarizers.PROMPT` as the
    system message and the transcript of the messages as the human one; no tools are bound, so
    the model can only write the summary.
    """
    chat = init_chat_model(model) if isinstance(model, str) else model
    if not isinstance(chat, BaseChatModel):
        raise ConfigError(f"chat_model_summarizer needs a LangChain chat model, not {chat!r:.80}")

    def summarize(messages: Sequence[Any]) -> str:
        reply = chat.invoke([SystemMessage(prompt), HumanMessage(render_transcript(messages))])
        return reply.text

    return summarize


def _last_usage(messages: Sequence[Any]) -> Any:
    """The usage the last model reply reported (it describes the previous request), if any."""
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            return message.usage_metadata
    return None


def _session_root(root: str | os.PathLike[str]) -> Path:
    """``root`` as a path, refused at once when it is empty or a file: the threads' sessions,
    opened at their first model call, would go to the working directory or each fail there."""
    path = Path(root) if isinstance(root, str | os.PathLike) and os.fspath(root) else None
    if path is None or (path.exists() and not path.is_dir()):  # None: "" (an unset variable)
        shown = repr(root)[:80] if path is None else str(path)
        raise ConfigError(f"ToolBudgetMiddleware: root= {shown} is not a directory")
    return path


def _thread_dir(thread_id: object) -> str:
    """The directory name of a thread's session: its id, percent-encoded (no ``/``, reversible).

    A lone surrogate (a JSON id cut in the middle of an emoji) is encoded as its code point's
    UTF-8 form, so every id, like every other, names a directory of its own."""
    name = quote(str(thread_id).encode("utf-8", "surrogatepass"), safe="")
    if name in ("", ".", "..") or len(name) > 200:
        raise ConfigError(
            f"thread_id {str(thread_id)[:80]!r} cannot name a session directory "
            "(empty, '.', '..' or over 200 characters once percent-encoded)"
        )
    return name


class ToolBudgetMiddleware(AgentMiddleware):
    """Budgets each model call's messages; registers the read-back tool with the agent.

    One session per conversation: the session keeps per-message state of the last history it saw
    and freezes each result's decision, so the same history gives the same request bytes. Give
    it either one ``session`` (one conversation), or a ``root`` directory: each LangGraph thread
    (the run's ``config["configurable"]["thread_id"]``) then gets its own session,
    ``root/<thread_id>`` (percent-encoded), opened with ``config`` on the thread's first model
    call and kept open, so resuming the thread, in this process or after a restart, resumes its
    session. A run without a ``thread_id`` is refused (ConfigError), as is a ``root`` that is a
    file, when the middleware is built. :meth:`close` closes them.

    When the provider refuses a request as too long, the middleware tells the session and retries
    with a harder budget (at most twice; the third refusal compacts when the session can, else
    raises ContextOverflow).

    ``summarizer`` makes compaction possible (with the session's ``compaction`` setting,
    ``"auto"`` for it to run by itself): ``"agent"`` summarizes with the agent's own model (the
    one of the model call being budgeted, with no tools bound), another string names a model for
    ``init_chat_model``, a chat model is used as is (see :func:`chat_model_summarizer`), and any
    other callable is a summarizer as :mod:`budget.summarizers` describes. The summary reaches
    the model as a HumanMessage; the agent's state keeps every message.
    """

    def __init__(
        self,
        session: Budget | None = None,
        *,
        root: str | os.PathLike[str] | None = None,
        config: BudgetConfig | dict[str, Any] | None = None,
        read_tool: bool = True,
        retry_on_overflow: bool = True,
        summarizer: Callable[[Sequence[Any]], Any] | BaseChatModel | str | None = None,
    ) -> None:
        super().__init__()
        if (session is None) == (root is None):
            given = "both were given" if session is not None else "neither was given"
            raise ConfigError(f"ToolBudgetMiddleware needs either a session or root=: {given}")
        if session is not None and config is not None:
            raise ConfigError("ToolBudgetMiddleware: config= applies to root= sessions only")
        self.session = None if session is None else require_session(session, "ToolBudgetMiddleware")
        """The one session (None with ``root``: see :meth:`session_for`)."""
        self.root = None if root is None else _session_root(root)
        """The directory holding one session per thread (None with a single session)."""
        self._config = build_config(config)
        self._sessions: dict[str, Budget] = {}
        self._lock = threading.Lock()
        self.retry_on_overflow = require_flag(
            retry_on_overflow, "retry_on_overflow", "ToolBudgetMiddleware"
        )
        self._model: ContextVar[BaseChatModel | None] = ContextVar(
            f"toolbudget_model_{id(self)}", default=None
        )
        """The model of the call being budgeted (``"agent"``): a context variable, not a thread
        local, since the summarizer runs in a thread of its own under ``compact_timeout_s``
        (with the budgeting call's context)."""
        self._summaries: dict[str, HumanMessage] = {}
        self._summarizer = self._summarizer_for(summarizer)
        if self.session is not None:
            attach_summarizer(self.session, self._summarizer, "ToolBudgetMiddleware")
        if not require_flag(read_tool, "read_tool", "ToolBudgetMiddleware"):
            self.tools = []
        elif self.session is not None:
            self.tools = [session_read_tool(self.session)]
        else:
            self.tools = [_read_tool(read_tool_definition(self._config), self._current)]
        self.last_report: Report | None = None
        """The report of the last model call budgeted (of any thread)."""

    def session_for(self, thread_id: object) -> Budget:
        """The session of a thread: ``root/<thread_id>``, opened on first use (with ``root``), or
        the one session."""
        if self.root is None:
            assert self.session is not None
            return self.session
        name = _thread_dir(thread_id)
        with self._lock:
            session = self._sessions.get(name)
            if session is None:
                session = Budget.open(
                    self.root / name, self._config, format=LANGCHAIN, summarizer=self._summarizer
                )
                self._sessions[name] = session
            return session

    def _current(self) -> Budget:
        """The session of the run being executed (its thread's, with ``root``)."""
        if self.root is None:
            assert self.session is not None
            return self.session
        configurable = get_config().get("configurable") or {}
        thread_id = configurable.get("thread_id")
        if thread_id is None:
            raise ConfigError(
                "ToolBudgetMiddleware(root=...) gives each thread its own session: run the agent "
                "with config={'configurable': {'thread_id': ...}}"
            )
        return self.session_for(thread_id)

    def close(self) -> None:
        """Close the sessions opened for threads (a single ``session`` stays the caller's)."""
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            session.close()

    def _summarizer_for(
        self, summarizer: Callable[[Sequence[Any]], Any] | BaseChatModel | str | None
    ) -> Callable[[Sequence[Any]], Any] | None:
        if summarizer == "agent":
            return self._agent_summary
        if isinstance(summarizer, str | BaseChatModel):
            return chat_model_summarizer(summarizer)
        if summarizer is not None and not callable(summarizer):
            raise ConfigError(
                "ToolBudgetMiddleware(summarizer=...) takes 'agent', a model name, a chat model "
                f"or a callable, not {type(summarizer).__name__}"
            )
        return summarizer

    def _agent_summary(self, messages: Sequence[Any]) -> str:
        model = self._model.get()
        if not isinstance(model, BaseChatModel):
            raise ConfigError(
                "summarizer='agent' summarizes with the model of an agent's model call: "
                "compact through the agent (or name a model)"
            )
        return chat_model_summarizer(model)(messages)

    def _budget(self, request: ModelRequest, session: Budget) -> ModelRequest:
        messages = request.messages
        token = self._model.set(request.model)
        try:
            prepared = session.prepare(messages, usage=_last_usage(messages), format=LANGCHAIN)
        finally:
            self._model.reset(token)
        return self._sent(request, prepared)

    async def _abudget(self, request: ModelRequest, session: Budget) -> ModelRequest:
        """:meth:`_budget` for the async agent: ``aprepare`` budgets in a worker thread and
        awaits an async summarizer on this loop (the sync ``prepare`` refuses one)."""
        messages = request.messages
        token = self._model.set(request.model)
        try:
            prepared = await session.aprepare(
                messages, usage=_last_usage(messages), format=LANGCHAIN
            )
        finally:
            self._model.reset(token)
        return self._sent(request, prepared)

    def _sent(self, request: ModelRequest, prepared: Prepared) -> ModelRequest:
        self.last_report = prepared.report
        return request.override(messages=[self._native(m) for m in prepared.messages])

    def _native(self, message: Any) -> Any:
        """``message``, or for compaction's summary the HumanMessage showing it (the same object
        while the checkpoint holds: :func:`native_summary`)."""
        with self._lock:
            return native_summary(self._summaries, message, lambda text: HumanMessage(content=text))

    def _check_tools(self, request: ModelRequest) -> None:
        """Refuse an agent tool named like the read-back tool: create_agent keeps one tool per
        name (the agent's), so every read-back of a spilled output would go to it. A read-back
        tool given to the agent as well (``session_read_tool``) is one of ours: allowed."""
        name = self.tools[0].name if self.tools else None
        for tool in request.tools:
            ours = isinstance(tool, BaseTool) and (tool.metadata or {}).get("toolbudget")
            if isinstance(tool, BaseTool) and tool.name == name and ours != "read-back":
                raise ConfigError(
                    f"ToolBudgetMiddleware: the agent has a tool of its own named "
                    f"{tool.name!r}, the read-back tool's name: rename it, or give the "
                    "read-back tool another (the read_tool_name setting)"
                )

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse:
        """Call the model with the budgeted messages (again, harder, after an overflow)."""
        self._check_tools(request)
        session = self._current()
        while True:
            budgeted = self._budget(request, session)
            try:
                return handler(budgeted)
            except Exception as exc:
                if not (self.retry_on_overflow and is_overflow(session, exc)):
                    raise

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        """The async form: budgeting (it may write spilled bodies) runs in a worker thread; an
        async summarizer is awaited on the loop."""
        self._check_tools(request)
        session = await asyncio.to_thread(self._current)  # opening a session is file I/O
        while True:
            budgeted = await self._abudget(request, session)
            try:
                return await handler(budgeted)
            except Exception as exc:
                if not (self.retry_on_overflow and is_overflow(session, exc)):
                    raise
