"""LangChain v1's ``ContextEditingMiddleware`` with ``ClearToolUsesEdit``: the real package.

Followed (and run): ``langchain/agents/middleware/context_editing.py`` of the installed
``langchain`` 1.x. Each request, the history is converted to LangChain messages (``HumanMessage``,
``AIMessage`` with ``tool_calls``, ``ToolMessage``), handed to
``ContextEditingMiddleware.wrap_model_call`` with a handler that captures the edited request, and
the edits are carried back: every ``ToolMessage`` whose content the middleware changed replaces the
content of the matching tool_result (and, with ``clear_tool_inputs``, the tool_use input).

The package's defaults apply: trigger 100,000 tokens counted by its own
``count_tokens_approximately`` over the messages (it deep-copies and re-counts the whole history
on every call, and keeps the last 3 tool results; placeholder ``[cleared]``). ``token_counter``
replaces its counter (it receives LangChain messages). Converted messages are cached by the
identity of the canonical message, as an agent would hold them in its state; the middleware's own
work is untouched. Nothing is recoverable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._jsonbytes import dumps
from benchmarks.strategies._base import Declaration, Messages, Unrecoverable
from benchmarks.strategies._common import apply_edits, with_content
from benchmarks.trace import Trace, Usage

__all__ = ["STRATEGY", "LangChainContextEditingConfig"]


@dataclass(frozen=True, slots=True)
class LangChainContextEditingConfig:
    """Arguments passed to ``ClearToolUsesEdit``; the package's own defaults."""

    trigger: int = 100_000
    clear_at_least: int = 0
    keep: int = 3
    clear_tool_inputs: bool = False
    exclude_tools: tuple[str, ...] = ()
    placeholder: str = "[cleared]"
    token_counter: Callable[[Sequence[Any]], int] | None = None
    """None: the middleware's ``count_tokens_approximately``."""


def _args(value: Any) -> dict[str, Any]:
    """Tool-call arguments as LangChain requires them (a dict)."""
    if isinstance(value, dict):
        return value
    return {} if value is None else {"input": value}


def _to_lc(message: dict[str, Any]) -> list[Any]:
    """One canonical message as LangChain messages (a user message may hold several results)."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    role = message.get("role")
    content: Any = message.get("content") or []
    if role == "assistant":
        if isinstance(content, str):
            return [AIMessage(content=content)]
        blocks = [b for b in content if not (isinstance(b, dict) and b.get("type") == "tool_use")]
        calls = [
            {"name": str(b.get("name", "")), "args": _args(b.get("input")), "id": str(b.get("id"))}
            for b in content
            if isinstance(b, dict) and b.get("type") == "tool_use"
        ]
        return [AIMessage(content=blocks, tool_calls=calls)]
    if isinstance(content, str):
        return [HumanMessage(content=content)]
    out: list[Any] = []
    rest: list[Any] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            body = block.get("content")
            out.append(
                ToolMessage(
                    content=body if isinstance(body, str | list) else "",
                    tool_call_id=str(block.get("tool_use_id", "")),
                    status="error" if block.get("is_error") else "success",
                )
            )
        else:
            rest.append(block)
    if rest:
        out.append(HumanMessage(content=rest))
    return out


def _content_back(content: Any) -> Any:
    return content if isinstance(content, str | list) else dumps(content).decode()


class _Session(Unrecoverable):
    """The installed LangChain ``ContextEditingMiddleware``, driven on each request (one
    middleware instance; it keeps no state between calls)."""

    def __init__(self, config: LangChainContextEditingConfig, trace: Trace, workdir: Path) -> None:
        from langchain.agents.middleware.context_editing import (
            ClearToolUsesEdit,
            ContextEditingMiddleware,
        )
        from langchain_core.language_models.fake_chat_models import FakeListChatModel
        from langchain_core.messages import SystemMessage

        self.config = config
        self.middleware = ContextEditingMiddleware(
            edits=[
                ClearToolUsesEdit(
                    trigger=config.trigger,
                    clear_at_least=config.clear_at_least,
                    keep=config.keep,
                    clear_tool_inputs=config.clear_tool_inputs,
                    exclude_tools=config.exclude_tools,
                    placeholder=config.placeholder,
                )
            ],
            token_counter=config.token_counter,
        )
        # The approximate counter never calls the model; the request type still requires one.
        self.model = FakeListChatModel(responses=[""])
        self.system = SystemMessage(content=trace.system) if trace.system else None
        self._memo: dict[int, tuple[dict[str, Any], list[Any]]] = {}

    def _convert(self, messages: Messages) -> list[Any]:
        memo: dict[int, tuple[dict[str, Any], list[Any]]] = {}
        out: list[Any] = []
        for message in messages:
            hit = self._memo.get(id(message))
            converted = hit[1] if hit is not None and hit[0] is message else _to_lc(message)
            memo[id(message)] = (message, converted)
            out.extend(converted)
        self._memo = memo
        return out

    def prepare(self, messages: Messages, *, usage: Usage | None, now: float | None) -> Messages:
        from langchain.agents.middleware.types import ModelRequest, ModelResponse
        from langchain_core.messages import AIMessage, ToolMessage

        lc_messages = self._convert(messages)
        captured: list[list[Any]] = []

        def handler(request: Any) -> Any:
            captured.append(list(request.messages))
            return ModelResponse(result=[AIMessage(content="")])

        request = ModelRequest(model=self.model, messages=lc_messages, system_message=self.system)
        self.middleware.wrap_model_call(request, handler)
        edited = captured[0]

        changed: dict[str, Any] = {}
        inputs_cleared: set[str] = set()
        for before, after in zip(lc_messages, edited, strict=True):
            if isinstance(after, ToolMessage) and after.content != before.content:
                changed[after.tool_call_id] = _content_back(after.content)
            elif isinstance(after, AIMessage) and after.tool_calls != before.tool_calls:
                inputs_cleared.update(
                    str(c["id"])
                    for c, o in zip(after.tool_calls, before.tool_calls, strict=True)
                    if c.get("args") != o.get("args")
                )
        if not changed and not inputs_cleared:
            return list(messages)
        edits: dict[int, dict[int, dict[str, Any]]] = {}
        for i, message in enumerate(messages):
            content = message.get("content")
            if not isinstance(content, list):
                continue
            for j, block in enumerate(content):
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_result" and block.get("tool_use_id") in changed:
                    new = changed[str(block["tool_use_id"])]
                    edits.setdefault(i, {})[j] = with_content(block, new)
                elif block.get("type") == "tool_use" and block.get("id") in inputs_cleared:
                    edits.setdefault(i, {})[j] = {**block, "input": {}}
        return apply_edits(messages, edits)


STRATEGY = Declaration("langchain", LangChainContextEditingConfig, _Session)
