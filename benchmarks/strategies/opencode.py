"""opencode's session compaction ``prune``: clear old tool outputs beyond the newest 40k tokens.

Followed: ``packages/opencode/src/session/compaction.ts`` (``SessionCompaction.prune``,
``PRUNE_PROTECT = 40_000``, ``PRUNE_MINIMUM = 20_000``, ``PRUNE_PROTECTED_TOOLS = ["skill"]``),
``session/prompt.ts`` (``prune`` runs when the agent loop of a user turn ends) and
``session/message-v2.ts`` (a compacted output is sent as ``[Old tool result content cleared]``,
its attachments dropped). ``prune`` walks the messages from the newest:

* counting user turns, and skipping everything until the second user turn from the end (the
  last two user turns are never touched);
* stopping at the first tool output already compacted (everything older was pruned before);
* for each completed (not errored) tool output, newest first, skipping protected tools: add its
  token estimate to ``total``; once ``total`` exceeds ``protect``, the output is prunable;
* marking the prunable outputs as compacted only if they add up to more than ``minimum`` tokens.

Compaction is persistent: once compacted an output stays cleared on every later request.

Mapping: a user turn is a user message without tool results (a prompt); the tool outputs are the
tool_results answering an assistant message's calls. ``prune`` runs once per prompt after the
first, on the history before that prompt (the end of the previous turn), so a single-prompt
session (one task, many tool calls) is never pruned, as in opencode. The token estimate is the
injected counter on the output text (opencode: ``round(chars / 4)``). Nothing is recoverable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._count import count_tokens
from benchmarks.strategies._base import Messages, StrategySession
from benchmarks.strategies._common import (
    PrefixMemo,
    is_error,
    is_prompt,
    result_text,
    tool_results,
    with_content,
)
from benchmarks.trace import Trace, Usage
from budget._errors import ConfigError

__all__ = ["OpenCode", "OpenCodeConfig", "make"]

PLACEHOLDER = "[Old tool result content cleared]"


@dataclass(frozen=True, slots=True)
class OpenCodeConfig:
    """opencode's constants."""

    protect: int = 40_000
    """Newest tool-output tokens never pruned (``PRUNE_PROTECT``)."""
    minimum: int = 20_000
    """Prune only when more than this many tokens would be cleared (``PRUNE_MINIMUM``)."""
    protected_tools: frozenset[str] = frozenset({"skill"})
    placeholder: str = PLACEHOLDER
    count: Callable[[Any], int] = count_tokens
    """Token estimate of one output text."""

    def __post_init__(self) -> None:
        if self.protect < 0 or self.minimum < 0:
            raise ConfigError("OpenCodeConfig.protect and .minimum must be >= 0")


class _Session:
    def __init__(self, config: OpenCodeConfig) -> None:
        self.config = config
        self.compacted: set[str] = set()
        self.pruned_prompts = 0
        """Prompts (after the first) whose preceding turn end has been pruned."""
        self.memo = PrefixMemo()
        self._tokens: dict[str, int] = {}

    def _estimate(self, call_id: str, content: Any) -> int:
        tokens = self._tokens.get(call_id)
        if tokens is None:
            tokens = self.config.count(result_text(content))
            self._tokens[call_id] = tokens
        return tokens

    def _prune(self, messages: Messages) -> None:
        config = self.config
        results = {
            ref.call_id: ref.data
            for ref in tool_results(messages)
            if not is_error(ref.data)  # an errored tool part is not "completed"
        }
        total = 0
        pruned = 0
        to_prune: list[str] = []
        turns = 0
        done = False
        for i in range(len(messages) - 1, -1, -1):
            message = messages[i]
            if is_prompt(message):
                turns += 1
            if turns < 2 or message.get("role") != "assistant":
                continue
            content = message.get("content")
            if not isinstance(content, list):
                continue
            for block in reversed(content):
                if not (isinstance(block, dict) and block.get("type") == "tool_use"):
                    continue
                call_id = str(block.get("id", ""))
                result = results.get(call_id)
                if result is None or block.get("name") in config.protected_tools:
                    continue
                if call_id in self.compacted:
                    done = True
                    break
                estimate = self._estimate(call_id, result.get("content"))
                total += estimate
                if total <= config.protect:
                    continue
                pruned += estimate
                to_prune.append(call_id)
            if done:
                break
        if pruned > config.minimum:
            self.compacted.update(to_prune)

    def prepare(self, messages: Messages, *, usage: Usage | None, now: float | None) -> Messages:
        prompts = [i for i, m in enumerate(messages) if is_prompt(m)]
        changed = False
        while self.pruned_prompts + 1 < len(prompts):
            before = len(self.compacted)
            self._prune(messages[: prompts[self.pruned_prompts + 1]])
            changed = changed or len(self.compacted) != before
            self.pruned_prompts += 1
        start = 0 if changed else self.memo.reusable(messages)
        edits: dict[int, dict[int, dict[str, Any]]] = {}
        for ref in tool_results(messages, start):
            if ref.call_id in self.compacted:
                edits.setdefault(ref.msg, {})[ref.block] = with_content(
                    ref.data, self.config.placeholder
                )
        return self.memo.finish(messages, start, edits)

    def recover(self, call_id: str) -> str | None:
        return None


@dataclass(slots=True)
class OpenCode:
    """opencode's ``prune``, run at the end of each user turn, persistent."""

    config: OpenCodeConfig = field(default_factory=OpenCodeConfig)
    name: str = "opencode"

    def open(self, trace: Trace, workdir: Path) -> StrategySession:
        """A session remembering which outputs were compacted."""
        return _Session(self.config)


def make(**overrides: Any) -> OpenCode:
    """The ``opencode`` strategy, with config fields overridden by keyword."""
    return OpenCode(OpenCodeConfig(**overrides))
