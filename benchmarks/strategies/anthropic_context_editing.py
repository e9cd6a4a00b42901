"""Anthropic's server-side context editing, the ``clear_tool_uses_20250919`` edit.

Followed: the Claude API documentation, "Context editing" (platform.claude.com/docs/en/build-with-
claude/context-editing) and the SDK types ``BetaClearToolUses20250919Edit`` (trigger
``input_tokens`` 100,000; keep 3 ``tool_uses``; ``clear_at_least``; ``exclude_tools``;
``clear_tool_inputs``). The edit runs on the server on every request, from scratch, on the full
history the client sends:

* if the prompt's input tokens (system prompt and messages) exceed ``trigger``, the results of
  every tool use except the last ``keep`` ones are replaced by a placeholder, oldest first, skipping
  ``exclude_tools``; with ``clear_tool_inputs`` the matching tool_use inputs become ``{}``;
* if clearing would reclaim fewer than ``clear_at_least`` tokens, nothing is cleared (the
  documented purpose of the setting: clear only when breaking the cache is worth it).

Deviations: the API does not publish its placeholder text, so it is a setting here; tokens are
estimated, not counted by the provider: by default with the trace model's tokenizer profile
(:func:`benchmarks._count.counter_for`, the same estimate the replay bills with; the server counts
with the model's own tokenizer), or with the injected ``count``; tool definitions are not counted
(the traces do not carry them). Nothing is recoverable: cleared results are gone from the prompt.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._count import counter_for
from benchmarks.strategies._base import Declaration, Messages, Unrecoverable
from benchmarks.strategies._common import apply_edits, tool_calls, tool_results, with_content
from benchmarks.trace import Trace, Usage
from budget._errors import ConfigError

__all__ = ["STRATEGY", "AnthropicContextEditingConfig"]


@dataclass(frozen=True, slots=True)
class AnthropicContextEditingConfig:
    """The API's defaults for ``clear_tool_uses_20250919``."""

    trigger: int = 100_000
    """Input tokens above which the edit applies."""
    keep: int = 3
    """Most recent tool uses whose results are kept."""
    clear_at_least: int = 0
    """Minimum tokens an activation must reclaim, else nothing is cleared."""
    exclude_tools: frozenset[str] = frozenset()
    clear_tool_inputs: bool = False
    placeholder: str = "[Tool result cleared]"
    count: Callable[[Any], int] | None = None
    """Token counter; None: the trace model's tokenizer profile."""

    def __post_init__(self) -> None:
        if self.keep < 0:
            raise ConfigError(f"AnthropicContextEditingConfig.keep must be >= 0, got {self.keep}")
        if self.trigger < 0 or self.clear_at_least < 0:
            raise ConfigError("AnthropicContextEditingConfig.trigger/clear_at_least must be >= 0")


class _Session(Unrecoverable):
    """``clear_tool_uses_20250919``, applied from scratch to every request (the server computes
    the edit each time), counting with the trace model's tokenizer profile unless a counter was
    given."""

    def __init__(self, config: AnthropicContextEditingConfig, trace: Trace, workdir: Path) -> None:
        count = config.count if config.count is not None else counter_for(trace.model)
        self.config = config
        self.count = count
        self.system_tokens = count(trace.system) if trace.system else 0
        # Token counts of message objects met in the previous request (the server re-counts the
        # whole prompt each time; caching by identity only saves the replay's own time).
        self._memo: dict[int, tuple[dict[str, Any], int]] = {}

    def _count_messages(self, messages: Messages) -> int:
        memo: dict[int, tuple[dict[str, Any], int]] = {}
        total = 0
        for message in messages:
            hit = self._memo.get(id(message))
            tokens = hit[1] if hit is not None and hit[0] is message else self.count(message)
            memo[id(message)] = (message, tokens)
            total += tokens
        self._memo = memo
        return total

    def prepare(self, messages: Messages, *, usage: Usage | None, now: float | None) -> Messages:
        config = self.config
        if self.system_tokens + self._count_messages(messages) <= config.trigger:
            return list(messages)
        calls = list(tool_calls(messages))
        kept = {c.call_id for c in calls[len(calls) - config.keep :]} if config.keep else set()
        names = {c.call_id: c.name for c in calls}
        placeholder_tokens = self.count(config.placeholder)
        edits: dict[int, dict[int, dict[str, Any]]] = {}
        cleared: set[str] = set()
        reclaimed = 0
        for ref in tool_results(messages):
            if ref.call_id in kept or names.get(ref.call_id) in config.exclude_tools:
                continue
            if ref.call_id not in names:
                continue
            content = ref.data.get("content")
            if content == config.placeholder:
                continue
            reclaimed += self.count(content) - placeholder_tokens
            edits.setdefault(ref.msg, {})[ref.block] = with_content(ref.data, config.placeholder)
            cleared.add(ref.call_id)
        if not edits or reclaimed < config.clear_at_least:
            return list(messages)
        if config.clear_tool_inputs:
            for i, message in enumerate(messages):
                if message.get("role") != "assistant" or not isinstance(message["content"], list):
                    continue
                for j, block in enumerate(message["content"]):
                    if (
                        isinstance(block, dict)
                        and block.get("type") == "tool_use"
                        and block.get("id") in cleared
                    ):
                        edits.setdefault(i, {})[j] = {**block, "input": {}}
        return apply_edits(messages, edits)


STRATEGY = Declaration("anthropic-context-editing", AnthropicContextEditingConfig, _Session)
