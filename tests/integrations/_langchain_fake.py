"""A LangChain chat model base for the tests: it binds tools by name and records what it was
offered, so a fake model only says what it replies (``reply``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

__all__ = ["ToolNamingModel"]


class ToolNamingModel(BaseChatModel):
    """A chat model whose ``bind_tools`` keeps the tools' names, passed to :meth:`reply`."""

    offered: list[list[str]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return f"toolbudget-{type(self).__name__.lower()}"

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any
    ) -> Runnable[Any, AIMessage]:
        names = [convert_to_openai_tool(t)["function"]["name"] for t in tools]
        return self.bind(tool_names=names, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Any:
        self.offered.append(list(kwargs.get("tool_names", [])))
        return self.reply(list(messages))

    def reply(self, messages: list[BaseMessage]) -> Any:
        """The ``ChatResult`` answering ``messages``."""
        raise NotImplementedError
