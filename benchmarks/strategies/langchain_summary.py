"""LangChain v1's ``SummarizationMiddleware``: the real package, driven as an agent would.

Followed (and run): ``langchain/agents/middleware/summarization.py`` of the installed ``langchain``
(1.5.2 when this was written). Its shipped defaults apply: ``keep=("messages", 20)``,
``trim_tokens_to_summarize=4000`` (the summary prompt holds at most the last ~4,000 tokens of what
is summarized), ``DEFAULT_SUMMARY_PROMPT``, its ``count_tokens_approximately`` counter. It ships
no trigger (``trigger=None`` never summarizes), so the one from its own docstring example is
used: ``trigger=("fraction", 0.8)`` of the model profile's ``max_input_tokens``, set to the
bench's ``--window``.

The middleware is destructive: ``before_model`` returns ``RemoveMessage(REMOVE_ALL_MESSAGES)``, the
summary message and the preserved messages, and the agent's state *is* that from then on. So the
session holds the state: each request appends the trace's new messages to it, converts it to
LangChain messages (``HumanMessage``, ``AIMessage`` with ``tool_calls``, ``ToolMessage``), calls
``before_model``, and when it summarized, keeps the middleware's summary message and the state's
messages it preserved (the canonical dicts they came from). Nothing is recoverable.

The model is a fake chat model from ``langchain_core`` (``FakeListChatModel``) that records the
prompt it is sent (priced as the summary request, one user turn, no system prompt) and answers a
marker, which the session replaces by the extractive summary (:func:`budget.summarizers.extractive`)
of the messages the middleware summarized: summary sizes equal the other compacting strategies'.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.strategies._base import Declaration, Messages, SideCall, Unrecoverable
from benchmarks.strategies.langchain_editing import _to_lc
from benchmarks.trace import Trace, Usage
from budget import summarizers

__all__ = ["MARKER", "STRATEGY", "LangChainSummaryConfig"]

MARKER = "<<toolbudget-bench-summary>>"
"""What the fake model answers; replaced by the extractive summary."""


@dataclass(frozen=True, slots=True)
class LangChainSummaryConfig:
    """The middleware's arguments; ``window`` is the bench's ``--window`` (the model profile)."""

    window: int = 128_000
    trigger_fraction: float = 0.8
    keep_messages: int = 20
    trim_tokens_to_summarize: int | None = 4_000


def _fake_model(window: int) -> Any:
    """A ``FakeListChatModel`` recording its prompts, with ``max_input_tokens`` = ``window``."""
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from pydantic import Field

    class Recording(FakeListChatModel):
        """Answers :data:`MARKER` and keeps each prompt it was sent."""

        prompts: list[str] = Field(default_factory=list)

        def _call(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> str:
            self.prompts.append("\n".join(str(m.content) for m in messages))
            return MARKER

    return Recording(responses=[MARKER], profile={"max_input_tokens": window})


class _Session(Unrecoverable):
    """The installed ``SummarizationMiddleware`` over one trace's agent state."""

    def __init__(self, config: LangChainSummaryConfig, trace: Trace, workdir: Path) -> None:
        from langchain.agents.middleware.summarization import SummarizationMiddleware

        self.model = _fake_model(config.window)
        self.middleware = SummarizationMiddleware(
            self.model,
            trigger=("fraction", config.trigger_fraction),
            keep=("messages", config.keep_messages),
            trim_tokens_to_summarize=config.trim_tokens_to_summarize,
        )
        self.held: Messages = []
        self.absorbed = 0
        self.summarize = summarizers.extractive()
        self.calls: list[SideCall] = []
        self.compactions = 0
        self.breaker_openings = 0
        self._memo: dict[int, tuple[dict[str, Any], list[Any]]] = {}

    def _convert(self, messages: Messages) -> tuple[list[Any], list[int]]:
        """LangChain messages of ``messages``, and the index of the dict each one came from."""
        memo: dict[int, tuple[dict[str, Any], list[Any]]] = {}
        out: list[Any] = []
        owner: list[int] = []
        for i, message in enumerate(messages):
            hit = self._memo.get(id(message))
            converted = hit[1] if hit is not None and hit[0] is message else _to_lc(message)
            memo[id(message)] = (message, converted)
            out.extend(converted)
            owner.extend([i] * len(converted))
        self._memo = memo
        return out, owner

    def prepare(self, messages: Messages, *, usage: Usage | None, now: float | None) -> Messages:
        """The agent's state after the middleware ran on it, as canonical messages."""
        from langchain_core.messages import RemoveMessage

        self.held = [*self.held, *messages[self.absorbed :]]
        self.absorbed = len(messages)
        lc, owner = self._convert(self.held)
        if not lc:
            return list(self.held)
        update = self.middleware.before_model({"messages": lc}, None)  # type: ignore[arg-type]
        if update is None:
            return list(self.held)
        new = [m for m in update["messages"] if not isinstance(m, RemoveMessage)]
        preserved = len(new) - 1
        cutoff = len(lc) - preserved
        # The dicts whose messages were all summarized; a dict split by the cut (a user turn
        # holding results and text) keeps its preserved part whole, as the state would.
        first_kept = owner[cutoff] if cutoff < len(lc) else len(self.held)
        summarized = self.held[:first_kept]
        summary = self.summarize(summarized)
        assert isinstance(summary, str)
        text = str(new[0].content).replace(MARKER, summary)
        prompt = self.model.prompts[-1] if self.model.prompts else text
        self.calls.append(SideCall([{"role": "user", "content": prompt}], summary))
        self.held = [{"role": "user", "content": text}, *self.held[first_kept:]]
        self.compactions += 1
        return list(self.held)

    def take_side_calls(self) -> list[SideCall]:
        """The summary requests made since the last call."""
        calls, self.calls = self.calls, []
        return calls


STRATEGY = Declaration("langchain-summary", LangChainSummaryConfig, _Session)
