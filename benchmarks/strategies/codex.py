"""Codex CLI's truncation policy: each tool output is cut to head + tail when it is recorded.

Source: github.com/openai/codex at commit 626f2d896f0ef70504f96a345b5160f4e6275f20,
``codex-rs/core/src/openai_models/model_family.rs`` (``find_family_for_model``): the default
policy of every model family is ``TruncationPolicy::Bytes(10_000)``; only the Codex models
(slugs ``gpt-5-codex``, ``gpt-5.1-codex``, ``gpt-5.1-codex-max``, ``codex-``, ``exp-codex``)
have ``TruncationPolicy::Tokens(10_000)``. ``mode="auto"`` (the default) picks the policy from
the trace's model the same way: ``tokens`` when the slug names a Codex model, else ``bytes``.

Followed for the cut itself: ``codex-rs/core/src/context_manager/history.rs`` (``ContextManager::record_items`` ->
``process_item``: function and custom tool outputs are truncated with the turn's
``TruncationPolicy`` times 1.2, an allowance for serialization), ``codex-rs/utils/output-
truncation/src/lib.rs`` (``truncate_text``, ``truncate_function_output_items_with_policy``) and
``codex-rs/utils/string/src/truncate.rs`` (``truncate_middle_with_token_budget``: tokens are
UTF-8 bytes / 4, rounded up; the byte budget is split in half between the head and the tail, cut
at character boundaries, joined by ``…<N> tokens truncated…`` where N is the removed bytes / 4,
rounded up) and ``truncate_middle_chars`` (the ``Bytes`` policy: the same head and tail within
the byte budget, joined by ``…<N> chars truncated…`` where N is the removed characters).

Under ``Tokens(10_000)`` a text output longer than the budget (10,000 x 1.2 = 12,000 tokens =
48,000 bytes) keeps its first and last 24,000 bytes; under ``Bytes(10_000)`` one longer than
12,000 bytes keeps its first and last 6,000 bytes. A content list shares the budget (tokens, or bytes) across its text items in
order (an item that does not fit is itself truncated to what is left; later ones are dropped and
counted in ``[omitted N text items ...]``; empty text items are dropped); images are kept. The
truncation happens once, when the result is recorded, so the history never changes afterwards.
Nothing is recoverable (Codex keeps no copy for the model).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from benchmarks.strategies._base import Declaration, Messages, Unrecoverable
from benchmarks.strategies._common import PrefixMemo, tool_results, with_content
from benchmarks.trace import Trace, Usage
from budget._errors import ConfigError

__all__ = [
    "STRATEGY",
    "CodexConfig",
    "is_codex_model",
    "truncate_bytes",
    "truncate_content",
    "truncate_text",
]

BYTES_PER_TOKEN = 4
Mode = Literal["auto", "bytes", "tokens"]


def is_codex_model(model: str | None) -> bool:
    """Whether ``model`` is one of the Codex model families (policy ``Tokens``, not ``Bytes``)."""
    slug = (model or "").lower().rsplit("/", 1)[-1]
    return "codex" in slug


@dataclass(frozen=True, slots=True)
class CodexConfig:
    """Codex's default truncation policy."""

    limit: int = 10_000
    """The policy's limit: bytes under ``Bytes``, tokens under ``Tokens``."""
    mode: Mode = "auto"
    """``auto``: ``tokens`` for a Codex model, ``bytes`` for any other (``find_family_for_model``)."""
    serialization_allowance: float = 1.2
    """Multiplier ``process_item`` applies to the policy (rounded up)."""

    def __post_init__(self) -> None:
        if self.limit < 0 or self.serialization_allowance <= 0:
            raise ConfigError("CodexConfig.limit must be >= 0 and the allowance positive")
        if self.mode not in ("auto", "bytes", "tokens"):
            raise ConfigError(f"CodexConfig.mode must be auto, bytes or tokens, got {self.mode!r}")

    @property
    def budget(self) -> int:
        """The budget actually applied to one output (bytes or tokens, as the policy)."""
        return math.ceil(self.limit * self.serialization_allowance)

    def policy(self, model: str | None) -> Literal["bytes", "tokens"]:
        """The policy applied to a trace of ``model``."""
        if self.mode != "auto":
            return self.mode
        return "tokens" if is_codex_model(model) else "bytes"


def _approx_tokens(n_bytes: int) -> int:
    return (n_bytes + BYTES_PER_TOKEN - 1) // BYTES_PER_TOKEN


def _head_tail(data: bytes, max_bytes: int) -> tuple[str, str]:
    """The head of ``data`` within half of ``max_bytes`` and its tail within the rest."""
    left = max_bytes // 2
    right = max_bytes - left
    # Decoding with "ignore" drops the partial character at each cut: the head ends at the last
    # character boundary within ``left`` bytes, the tail starts at the first one within ``right``.
    head = data[:left].decode("utf-8", "ignore")
    tail = data[len(data) - right :].decode("utf-8", "ignore")
    return head, tail


def truncate_text(text: str, max_tokens: int) -> str:
    """``truncate_middle_with_token_budget``: head and tail within ``max_tokens * 4`` bytes."""
    data = text.encode("utf-8", "surrogatepass")
    max_bytes = max_tokens * BYTES_PER_TOKEN
    if not data or (max_tokens > 0 and len(data) <= max_bytes):
        return text
    if max_bytes == 0:
        return f"…{_approx_tokens(len(data))} tokens truncated…"
    head, tail = _head_tail(data, max_bytes)
    removed = _approx_tokens(len(data) - max_bytes)
    return f"{head}…{removed} tokens truncated…{tail}"


def truncate_bytes(text: str, max_bytes: int) -> str:
    """``truncate_middle_chars``: head and tail within ``max_bytes`` bytes, removed chars named."""
    data = text.encode("utf-8", "surrogatepass")
    if not data or len(data) <= max_bytes:
        return text
    if max_bytes == 0:
        return f"…{len(text)} chars truncated…"
    head, tail = _head_tail(data, max_bytes)
    removed = len(text) - len(head) - len(tail)
    return f"{head}…{removed} chars truncated…{tail}"


def truncate_content(
    content: Any, budget: int, policy: Literal["bytes", "tokens"] = "tokens"
) -> Any:
    """The recorded form of a tool result's content under ``Tokens(budget)`` or ``Bytes(budget)``."""
    cut = truncate_text if policy == "tokens" else truncate_bytes
    if isinstance(content, str):
        return cut(content, budget)
    if not isinstance(content, list):
        return content
    out: list[Any] = []
    remaining = budget
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
        size = len(text.encode("utf-8", "surrogatepass"))
        cost = _approx_tokens(size) if policy == "tokens" else size
        if cost <= remaining:
            out.append(block)
            remaining -= cost
            continue
        snippet = cut(text, remaining)
        if snippet:
            out.append({**block, "text": snippet})
        else:
            omitted += 1
        remaining = 0
    if omitted:
        out.append({"type": "text", "text": f"[omitted {omitted} text items ...]"})
    return out if out != content else content


class _Session(Unrecoverable):
    """Head+tail truncation of each tool output at record time: each result's recorded form is
    remembered, its policy chosen by the trace's model."""

    def __init__(self, config: CodexConfig, trace: Trace, workdir: Path) -> None:
        self.config = config
        self.policy = config.policy(trace.model)
        self.recorded: dict[str, Any] = {}
        """The truncated content of each result that changed when it was recorded."""
        self.seen: set[str] = set()
        self.memo = PrefixMemo()

    def prepare(self, messages: Messages, *, usage: Usage | None, now: float | None) -> Messages:
        start = self.memo.reusable(messages)
        edits: dict[int, dict[int, dict[str, Any]]] = {}
        budget = self.config.budget
        for ref in tool_results(messages, start):
            if ref.call_id not in self.seen:
                self.seen.add(ref.call_id)
                content = ref.data.get("content")
                new = truncate_content(content, budget, self.policy)
                if new is not content:
                    self.recorded[ref.call_id] = new
            recorded = self.recorded.get(ref.call_id)
            if recorded is not None:
                edits.setdefault(ref.msg, {})[ref.block] = with_content(ref.data, recorded)
        return self.memo.finish(messages, start, edits)


STRATEGY = Declaration("codex", CodexConfig, _Session)
