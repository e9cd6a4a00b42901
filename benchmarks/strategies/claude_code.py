"""Claude Code's tool-result budget: spill large results to a file, leave a 2 KB head preview.

Followed: Claude Code's ``src/utils/toolResultStorage.ts`` (closed source; read from the public
reconstructions of the 2.1.x bundle: ``maybePersistLargeToolResult``, ``persistToolResult``,
``generatePreview``, ``buildLargeToolResultMessage``, ``enforceToolResultBudget`` with
``selectFreshToReplace``, ``MAX_TOOL_RESULTS_PER_MESSAGE_CHARS = 200_000``,
``PREVIEW_SIZE_BYTES = 2000``, the global ``DEFAULT_MAX_RESULT_SIZE_CHARS = 50_000``,
``getPersistenceThreshold``: a tool's cap is ``min(its maxResultSizeChars, 50_000)``, Infinity
meaning never persisted), and the tools' own ``maxResultSizeChars`` as shipped:
``src/tools/BashTool/BashTool.tsx`` 30,000, ``src/tools/GrepTool/GrepTool.ts`` 20,000,
``src/tools/FileReadTool/FileReadTool.ts`` Infinity, the other tools 100,000 (so 50,000). Checked
against the public reconstructions of the 2.1.88 bundle on GitHub (e.g. ``NanmiCoder/cc-haha`` at
commit 35e0445e2beafd01158c08a33c2623a68ea625e8, ``src/utils/toolResultStorage.ts``).

1. When a result is first seen (Claude Code does this as the tool returns): an empty result becomes
   ``(<Tool> completed with no output)``; a text result longer than the cap (strictly) is written
   (``min(tool cap, 50,000)``; Bash 30,000, Grep 20,000) is written
   to ``tool-results/<tool_use_id>.txt`` (``.json`` if it parses as JSON) and replaced by
   ``<persisted-output>`` with its size, the path and the first 2,000 characters cut back to the
   last newline if that newline lies past the middle. Results with images are never persisted.
   Tools whose own limit is infinite (``Read``) are exempt.
2. Per group (the user messages between two assistant messages, as the API sees them), if the
   frozen and fresh candidate results together exceed 200,000 characters, fresh ones are persisted
   largest first (stable order on ties) until the rest fits, counting a persisted result as 0.
   Candidates are non-empty, image-free results not already persisted.
3. Every decision is frozen by ``tool_use_id``: a replaced result gets the same text on every later
   request, a kept one is never replaced later. No staleness pass.

Deviations: the file path shown is a fixed, configurable directory (the real one is under
``~/.claude/projects/<project>/<session>/``) so runs are byte-identical across machines; the file
itself is written under the session's ``workdir``. A content array of text blocks is persisted as
its texts joined by newlines (the real tool may write a JSON dump). Sizes are Python ``len``
(UTF-16 units in the real one).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from benchmarks.strategies._base import Declaration, Messages
from benchmarks.strategies._common import (
    PrefixMemo,
    content_chars,
    has_non_text,
    result_text,
    results_in,
    safe_name,
    tool_calls,
    tool_results,
    with_content,
    write_text,
)
from benchmarks.trace import Trace, Usage
from budget._errors import ConfigError

__all__ = ["STRATEGY", "ClaudeCodeConfig", "build_message", "format_file_size", "preview"]

PERSISTED_OUTPUT_TAG = "<persisted-output>"
PERSISTED_OUTPUT_CLOSING_TAG = "</persisted-output>"


@dataclass(frozen=True, slots=True)
class ClaudeCodeConfig:
    """Claude Code's defaults."""

    cap_chars: int = 50_000
    """A result longer than this (strictly) is persisted when first seen."""
    preview_chars: int = 2_000
    """Head preview kept inline (``PREVIEW_SIZE_BYTES``)."""
    group_budget_chars: int = 200_000
    """Budget for the results of one group (``MAX_TOOL_RESULTS_PER_MESSAGE_CHARS``)."""
    tool_caps: tuple[tuple[str, int], ...] = (("Bash", 30_000), ("Grep", 20_000))
    """Per-tool ``maxResultSizeChars`` below the global cap; a tool's cap is
    ``min(its own, cap_chars)`` (``getPersistenceThreshold``)."""
    exempt_tools: frozenset[str] = frozenset({"Read"})
    """Tools whose results are never persisted (their own limit is infinite)."""
    empty_marker: bool = True
    """Replace empty results by ``(<Tool> completed with no output)``."""
    shown_dir: str = "/home/user/.claude/projects/-home-user-project/session/tool-results"
    """Directory named in the replacement text."""

    def __post_init__(self) -> None:
        for name in ("cap_chars", "preview_chars", "group_budget_chars"):
            if getattr(self, name) < 0:
                raise ConfigError(f"ClaudeCodeConfig.{name} must be >= 0")

    def cap_for(self, tool: str) -> int:
        """The persistence threshold of ``tool``: its own cap, never above ``cap_chars``."""
        return min(dict(self.tool_caps).get(tool, self.cap_chars), self.cap_chars)


def format_file_size(size: int) -> str:
    """Claude Code's ``formatFileSize``: bytes below 1 KB, else KB/MB/GB with one decimal."""
    kb = size / 1024
    if kb < 1:
        return f"{size} bytes"
    for unit, value in (("KB", kb), ("MB", kb / 1024), ("GB", kb / 1024 / 1024)):
        if value < 1024 or unit == "GB":
            text = f"{value:.1f}"
            return f"{text.removesuffix('.0')}{unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def preview(text: str, limit: int) -> tuple[str, bool]:
    """``generatePreview``: the first ``limit`` chars, cut at the last newline past the middle."""
    if len(text) <= limit:
        return text, False
    head = text[:limit]
    newline = head.rfind("\n")
    cut = newline if newline > limit * 0.5 else limit
    return text[:cut], True


def build_message(text: str, path: str, limit: int) -> str:
    """``buildLargeToolResultMessage`` for a result of ``text`` saved at ``path``."""
    shown, more = preview(text, limit)
    return (
        f"{PERSISTED_OUTPUT_TAG}\n"
        f"Output too large ({format_file_size(len(text))}). Full output saved to: {path}\n\n"
        f"Preview (first {format_file_size(limit)}):\n"
        f"{shown}{chr(10) + '...' + chr(10) if more else chr(10)}"
        f"{PERSISTED_OUTPUT_CLOSING_TAG}"
    )


def _is_json(text: str) -> bool:
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return False
    try:
        orjson.loads(stripped)
    except orjson.JSONDecodeError:
        return False
    return True


def _is_empty(content: Any) -> bool:
    if content is None:
        return True
    if isinstance(content, str):
        return not content.strip()
    if isinstance(content, list):
        return all(
            isinstance(b, dict) and b.get("type") == "text" and not str(b.get("text", "")).strip()
            for b in content
        )
    return False


@dataclass(slots=True)
class _Candidate:
    msg: int
    block: int
    call_id: str
    size: int


class _Session:
    """Claude Code's per-result cap and per-group budget, frozen per call id; spills into
    ``workdir/tool-results``."""

    def __init__(self, config: ClaudeCodeConfig, trace: Trace, workdir: Path) -> None:
        self.config = config
        self.workdir = workdir
        self.replacements: dict[str, str] = {}
        self.files: dict[str, Path] = {}
        self.seen: set[str] = set()
        self.names: dict[str, str] = {}
        self.memo = PrefixMemo()

    def _persist(self, call_id: str, text: str) -> str:
        ext = "json" if _is_json(text) else "txt"
        name = f"{safe_name(call_id)}.{ext}"
        path = self.workdir / "tool-results" / name
        write_text(path, text)
        self.files[call_id] = path
        return build_message(text, f"{self.config.shown_dir}/{name}", self.config.preview_chars)

    def prepare(self, messages: Messages, *, usage: Usage | None, now: float | None) -> Messages:
        start = self.memo.reusable(messages)
        # The group of the first new message may begin among the reused ones.
        group_start = start
        while group_start > 0 and messages[group_start - 1].get("role") != "assistant":
            group_start -= 1
        for call in tool_calls(messages, group_start):
            self.names[call.call_id] = call.name
        self._decide_fresh(messages, group_start)
        self._enforce_groups(messages, group_start)

        edits: dict[int, dict[int, dict[str, Any]]] = {}
        for ref in tool_results(messages, group_start):
            text = self.replacements.get(ref.call_id)
            if text is not None and ref.data.get("content") != text:
                edits.setdefault(ref.msg, {})[ref.block] = with_content(ref.data, text)
        return self.memo.finish(messages, group_start, edits)

    def _decide_fresh(self, messages: Messages, start: int) -> None:
        config = self.config
        for ref in tool_results(messages, start):
            call_id = ref.call_id
            if call_id in self.seen or call_id in self.replacements:
                continue
            tool = self.names.get(call_id, "")
            content = ref.data.get("content")
            if config.empty_marker and _is_empty(content) and not has_non_text(content):
                self.replacements[call_id] = f"({tool or 'Tool'} completed with no output)"
                continue
            if tool in config.exempt_tools or has_non_text(content):
                continue
            text = result_text(content)
            if text.startswith(PERSISTED_OUTPUT_TAG):
                continue
            if len(text) > config.cap_for(tool):
                self.replacements[call_id] = self._persist(call_id, text)
                # Persisted at the source: frozen, and never a budget candidate.
                self.seen.add(call_id)

    def _enforce_groups(self, messages: Messages, start: int) -> None:
        group: list[_Candidate] = []
        for i in range(start, len(messages) + 1):
            if i == len(messages) or messages[i].get("role") == "assistant":
                if group:
                    self._enforce(messages, group)
                group = []
                continue
            for ref in results_in(messages[i], i):
                content = ref.data.get("content")
                # Persisted results (at the source, or by an earlier budget pass) are re-applied
                # verbatim and count in neither the frozen nor the fresh size.
                if ref.call_id in self.files or _is_empty(content) or has_non_text(content):
                    continue
                if result_text(content).startswith(PERSISTED_OUTPUT_TAG):
                    continue
                group.append(_Candidate(ref.msg, ref.block, ref.call_id, content_chars(content)))

    def _enforce(self, messages: Messages, group: list[_Candidate]) -> None:
        config = self.config
        frozen = [c for c in group if c.call_id in self.seen]
        fresh = [c for c in group if c.call_id not in self.seen]
        if not fresh:
            return
        eligible = [c for c in fresh if self.names.get(c.call_id, "") not in config.exempt_tools]
        frozen_size = sum(c.size for c in frozen)
        fresh_size = sum(c.size for c in eligible)
        selected: set[str] = set()
        if frozen_size + fresh_size > config.group_budget_chars:
            remaining = frozen_size + fresh_size
            for c in sorted(eligible, key=lambda c: -c.size):
                if remaining <= config.group_budget_chars:
                    break
                selected.add(c.call_id)
                remaining -= c.size
        for c in group:
            if c.call_id in selected:
                text = result_text(messages[c.msg]["content"][c.block].get("content"))
                self.replacements[c.call_id] = self._persist(c.call_id, text)
            self.seen.add(c.call_id)

    def recover(self, call_id: str) -> str | None:
        path = self.files.get(call_id)
        return path.read_text(encoding="utf-8") if path is not None else None


STRATEGY = Declaration("claude-code", ClaudeCodeConfig, _Session)
