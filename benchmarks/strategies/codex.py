"""Codex CLI's truncation policy: each tool output is cut to head + tail when it is recorded.

Followed: ``codex-rs/core/src/context_manager/history.rs`` (``ContextManager::record_items`` ->
``process_item``: function and custom tool outputs are truncated with the turn's
``TruncationPolicy`` times 1.2, an allowance for serialization), ``codex-rs/utils/output-
truncation/src/lib.rs`` (``truncate_text``, ``truncate_function_output_items_with_policy``) and
``codex-rs/utils/string/src/truncate.rs`` (``truncate_middle_with_token_budget``: tokens are
UTF-8 bytes / 4, rounded up; the byte budget is split in half between the head and the tail, cut
at character boundaries, joined by ``…<N> tokens truncated…`` where N is the removed bytes / 4,
rounded up). The default policy of Codex models is ``Tokens(10_000)``.

A text output longer than the budget (10,000 x 1.2 = 12,000 tokens = 48,000 bytes) keeps its
first and last 24,000 bytes. A content list shares the token budget across its text items in
order (an item that does not fit is itself truncated to what is left; later ones are dropped and
counted in ``[omitted N text items ...]``; empty text items are dropped); images are kept. The
truncation happens once, when the result is recorded, so the history never changes afterwards.
Nothing is recoverable (Codex keeps no copy for the model).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.strategies._base import Messages, StrategySession
from benchmarks.strategies._common import PrefixMemo, tool_results, with_content
from benchmarks.trace import Trace, Usage
from budget._errors import ConfigError

__all__ = ["Codex", "CodexConfig", "make", "truncate_content", "truncate_text"]

BYTES_PER_TOKEN = 4


@dataclass(frozen=True, slots=True)
class CodexConfig:
    """Codex's default truncation policy."""

    max_tokens: int = 10_000
    """``TruncationPolicy::Tokens`` of the model family."""
    serialization_allowance: float = 1.2
    """Multiplier ``process_item`` applies to the policy (rounded up)."""

    def __post_init__(self) -> None:
        if self.max_tokens < 0 or self.serialization_allowance <= 0:
            raise ConfigError("CodexConfig.max_tokens must be >= 0 and the allowance positive")

    @property
    def budget_tokens(self) -> int:
        """The token budget actually applied to one output."""
        return math.ceil(self.max_tokens * self.serialization_allowance)


def _approx_tokens(n_bytes: int) -> int:
    return (n_bytes + BYTES_PER_TOKEN - 1) // BYTES_PER_TOKEN


def truncate_text(text: str, max_tokens: int) -> str:
    """``truncate_middle_with_token_budget``: head and tail within ``max_tokens * 4`` bytes."""
    data = text.encode("utf-8", "surrogatepass")
    max_bytes = max_tokens * BYTES_PER_TOKEN
    if not data or (max_tokens > 0 and len(data) <= max_bytes):
        return text
    if max_bytes == 0:
        return f"…{_approx_tokens(len(data))} tokens truncated…"
    left = max_bytes // 2
    right = max_bytes - left
    # Decoding with "ignore" drops the partial character at each cut: the head ends at the last
    # character boundary within ``left`` bytes, the tail starts at the first one within ``right``.
    head = data[:left].decode("utf-8", "ignore")
    tail = data[len(data) - right :].decode("utf-8", "ignore")
    removed = _approx_tokens(len(data) - max_bytes)
    return f"{head}…{removed} tokens truncated…{tail}"


def truncate_content(content: Any, max_tokens: int) -> Any:
    """The recorded form of a tool result's content under a ``Tokens(max_tokens)`` policy."""
    if isinstance(content, str):
        return truncate_text(content, max_tokens)
    if not isinstance(content, list):
        return content
    out: list[Any] = []
    remaining = max_tokens
    omitted = 0
    for block in content:
        if not (isinstance(block, dict) and block.get("type") == "text"):
            out.append(block)
            continue
        text = str(block.get("text", ""))
        if not text:
            continue
        if remaining == 0:
            omitted += 1
            continue
        cost = _approx_tokens(len(text.encode("utf-8", "surrogatepass")))
        if cost <= remaining:
            out.append(block)
            remaining -= cost
            continue
        snippet = truncate_text(text, remaining)
        if snippet:
            out.append({**block, "text": snippet})
        else:
            omitted += 1
        remaining = 0
    if omitted:
        out.append({"type": "text", "text": f"[omitted {omitted} text items ...]"})
    return out if out != content else content


class _Session:
    def __init__(self, config: CodexConfig) -> None:
        self.config = config
        self.recorded: dict[str, Any] = {}
        """The truncated content of each result that changed when it was recorded."""
        self.seen: set[str] = set()
        self.memo = PrefixMemo()

    def prepare(self, messages: Messages, *, usage: Usage | None, now: float | None) -> Messages:
        start = self.memo.reusable(messages)
        edits: dict[int, dict[int, dict[str, Any]]] = {}
        budget = self.config.budget_tokens
        for ref in tool_results(messages, start):
            if ref.call_id not in self.seen:
                self.seen.add(ref.call_id)
                content = ref.data.get("content")
                new = truncate_content(content, budget)
                if new is not content:
                    self.recorded[ref.call_id] = new
            recorded = self.recorded.get(ref.call_id)
            if recorded is not None:
                edits.setdefault(ref.msg, {})[ref.block] = with_content(ref.data, recorded)
        return self.memo.finish(messages, start, edits)

    def recover(self, call_id: str) -> str | None:
        return None


@dataclass(slots=True)
class Codex:
    """Head+tail truncation of each tool output at record time."""

    config: CodexConfig = field(default_factory=CodexConfig)
    name: str = "codex"

    def open(self, trace: Trace, workdir: Path) -> StrategySession:
        """A session remembering each result's recorded form."""
        return _Session(self.config)


def make(**overrides: Any) -> Codex:
    """The ``codex`` strategy, with config fields overridden by keyword."""
    return Codex(CodexConfig(**overrides))
