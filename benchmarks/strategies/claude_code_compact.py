"""Claude Code's auto-compact, modelled: summarize the whole conversation near the window.

Followed: Claude Code's ``src/services/compact/autoCompact.ts`` and ``compact.ts`` (closed source;
read from the public reconstructions of the 2.1.x bundle, e.g. ``NanmiCoder/cc-haha`` at commit
f4eee4e3a5b2683ddae9207034354dc653f3a1d3): ``getEffectiveContextWindowSize`` is the window minus
``min(max output tokens, MAX_OUTPUT_TOKENS_FOR_SUMMARY = 20_000)``, ``getAutoCompactThreshold``
that minus ``AUTOCOMPACT_BUFFER_TOKENS = 13_000``; ``MAX_CONSECUTIVE_AUTOCOMPACT_FAILURES = 3``;
after a compaction the recently read files are restored (``POST_COMPACT_MAX_FILES_TO_RESTORE =
5``, ``POST_COMPACT_MAX_TOKENS_PER_FILE = 5_000``, ``POST_COMPACT_TOKEN_BUDGET = 50_000``).

The model, request by request:

1. The conversation the agent holds is what it sent last plus the trace's new messages.
2. Its size is estimated (the header, i.e. system prompt and tools, plus every message); when
   it reaches the threshold the whole conversation is summarized: the summary request is the
   conversation as held, with the summary prompt as a last user turn, under the agent's own
   system prompt (so it reads the conversation from the prompt cache, as Claude Code's forked
   compact agent does). The summary is the extractive one (:func:`budget.summarizers.extractive`)
   so its size equals the other compacting strategies'.
3. The conversation becomes one user message with the summary, then one with the restored files,
   and the trace's later messages are appended to it (the compaction is destructive: nothing is
   recoverable).

Deviations: tokens are the library's estimate, not the last usage plus an estimate (the usage
the replay reports is of this strategy's own copies now, but this peer keeps its estimate); the extractive summarizer never
fails, so the breaker never opens; session-memory compaction, microcompact and the multi-level
percentage thresholds of some builds are not modelled; Claude Code's tool-result budget is the
``claude-code`` strategy's, not applied here (this one is compaction alone).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.strategies._base import Declaration, Messages, SideCall, Unrecoverable
from benchmarks.trace import Trace, Usage
from budget import estimate_tokens, get_format, summarizers
from budget.compaction._compaction import file_snapshots

__all__ = ["CONTINUATION", "STRATEGY", "ClaudeCodeCompactConfig"]

CONTINUATION = (
    "This session is being continued from a previous conversation that ran out of context. "
    "The conversation is summarized below:\n"
)
"""The opening of Claude Code's post-compact summary message (``getCompactUserSummaryMessage``)."""

CHARS_PER_TOKEN = 4
"""Claude Code's rough estimate (``roughTokenCountEstimation``): 4 characters a token."""


@dataclass(frozen=True, slots=True)
class ClaudeCodeCompactConfig:
    """Claude Code's constants; ``window`` is the bench's ``--window``."""

    window: int = 200_000
    max_output_tokens: int = 32_000
    """The model's max output (Claude Code's default for Sonnet 4.x is 32,000; above 20,000
    either way, so the reserve is 20,000)."""
    summary_reserve: int = 20_000
    buffer: int = 13_000
    files: int = 5
    file_tokens: int = 5_000
    files_budget: int = 50_000

    @property
    def threshold(self) -> int:
        """Tokens at which auto-compact fires: window - min(max output, 20k) - 13k."""
        return self.window - min(self.max_output_tokens, self.summary_reserve) - self.buffer


class _Session(Unrecoverable):
    """One trace's conversation as Claude Code would hold it, compacted in place."""

    def __init__(self, config: ClaudeCodeCompactConfig, trace: Trace, workdir: Path) -> None:
        self.config = config
        self.trace = trace
        self.header = trace.header_tokens + estimate_tokens(trace.system)
        self.held: Messages = []
        self.absorbed = 0
        self.fresh = 0
        """Messages appended since the last compaction: none means nothing new to summarize."""
        self.summarize = summarizers.extractive()
        self.calls: list[SideCall] = []
        self.compactions = 0
        self.breaker_openings = 0
        self._sizes: dict[int, tuple[Any, int]] = {}

    def _tokens(self, messages: Messages) -> int:
        sizes: dict[int, tuple[Any, int]] = {}
        total = self.header
        for m in messages:
            hit = self._sizes.get(id(m))
            size = hit[1] if hit is not None and hit[0] is m else estimate_tokens(m)
            sizes[id(m)] = (m, size)
            total += size
        self._sizes = sizes
        return total

    def prepare(self, messages: Messages, *, usage: Usage | None, now: float | None) -> Messages:
        """The conversation as held, compacted first when it reached the threshold."""
        new = messages[self.absorbed :]
        self.held = [*self.held, *new]
        self.absorbed = len(messages)
        self.fresh += len(new)
        if self.fresh and self._tokens(self.held) >= self.config.threshold:
            self._compact()
        return list(self.held)

    def _compact(self) -> None:
        summary = self.summarize(self.held)
        assert isinstance(summary, str)
        prompt = {"role": "user", "content": summarizers.PROMPT}
        self.calls.append(SideCall([*self.held, prompt], summary, self.trace.system))
        cfg = self.config
        files = file_snapshots(
            self.held,
            get_format("anthropic"),
            len(self.held),
            files=cfg.files,
            file_chars=cfg.file_tokens * CHARS_PER_TOKEN,
        )
        restored: list[str] = []
        used = 0
        for path, text in files:
            if used + len(text) > cfg.files_budget * CHARS_PER_TOKEN:
                break
            used += len(text)
            restored.append(f"Called the Read tool with {path}; result:\n{text}")
        held: Messages = [{"role": "user", "content": CONTINUATION + summary}]
        if restored:
            held.append({"role": "user", "content": "\n\n".join(restored)})
        self.held = held
        self.fresh = 0
        self.compactions += 1

    def take_side_calls(self) -> list[SideCall]:
        """The summary requests made since the last call."""
        calls, self.calls = self.calls, []
        return calls


STRATEGY = Declaration("claude-code-compact", ClaudeCodeCompactConfig, _Session)
