"""opencode: every tool output truncated at 2,000 lines / 50 KB, then ``prune`` of old outputs.

Source: github.com/sst/opencode (now ``anomalyco/opencode``), commit
4860f008766f00edb26fb784b09b8f252f991a35.

1. ``packages/opencode/src/tool/truncation.ts`` (``Truncate.output``, ``MAX_LINES = 2000``,
   ``MAX_BYTES = 50 * 1024``, direction ``head``), which ``Tool.define`` applies to the output
   of every tool when it returns: an output of more than 2,000 lines or more than 51,200 UTF-8
   bytes keeps its first lines while both limits hold (a line costs its bytes plus 1 for the
   newline before it), the full output is saved to ``tool-output/<id>``, and the kept lines are
   followed by ``...<N> lines truncated...`` (``bytes`` when the byte limit stopped it; N the
   removed lines, or the removed bytes) and the hint naming the file (the variant for an agent
   with the Task tool, as the default ``build`` agent has). Errored tools are not truncated
   (their error text is sent instead). Truncated outputs are recoverable from their files.
2. ``prune``, below.

Followed for prune: ``packages/opencode/src/session/compaction.ts`` (``SessionCompaction.prune``,
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
injected counter on the output text as sent (after truncation; opencode: ``round(chars / 4)``).
Deviation: the saved file's path shown is a fixed, configurable directory and its name is the
call id (opencode: a fresh ascending id), for byte-identical runs; the file is written under the
session's ``workdir``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._count import count_tokens
from benchmarks.strategies._base import Declaration, Messages
from benchmarks.strategies._common import (
    PrefixMemo,
    is_error,
    is_prompt,
    non_text_blocks,
    result_text,
    safe_name,
    tool_results,
    with_content,
    write_text,
)
from benchmarks.trace import Trace, Usage
from budget._errors import ConfigError

__all__ = ["STRATEGY", "OpenCodeConfig", "truncate_output"]

PLACEHOLDER = "[Old tool result content cleared]"
MAX_LINES = 2000
MAX_BYTES = 50 * 1024


def truncate_output(text: str, path: str, max_lines: int, max_bytes: int) -> str | None:
    """``Truncate.output`` (direction head): the message sent, or None when ``text`` fits."""
    lines = text.split("\n")
    total = len(text.encode("utf-8", "surrogatepass"))
    if len(lines) <= max_lines and total <= max_bytes:
        return None
    out: list[str] = []
    size = 0
    hit_bytes = False
    for i, line in enumerate(lines[:max_lines]):
        cost = len(line.encode("utf-8", "surrogatepass")) + (1 if i > 0 else 0)
        if size + cost > max_bytes:
            hit_bytes = True
            break
        out.append(line)
        size += cost
    removed = total - size if hit_bytes else len(lines) - len(out)
    unit = "bytes" if hit_bytes else "lines"
    hint = (
        f"The tool call succeeded but the output was truncated. Full output saved to: {path}\n"
        "Use the Task tool to have explore agent process this file with Grep and Read (with "
        "offset/limit). Do NOT read the full file yourself - delegate to save context."
    )
    return "\n".join(out) + f"\n\n...{removed} {unit} truncated...\n\n{hint}"


@dataclass(frozen=True, slots=True)
class OpenCodeConfig:
    """opencode's constants."""

    protect: int = 40_000
    """Newest tool-output tokens never pruned (``PRUNE_PROTECT``)."""
    minimum: int = 20_000
    """Prune only when more than this many tokens would be cleared (``PRUNE_MINIMUM``)."""
    protected_tools: frozenset[str] = frozenset({"skill"})
    max_lines: int = MAX_LINES
    """``Truncate.MAX_LINES``: an output with more lines is truncated when it returns."""
    max_bytes: int = MAX_BYTES
    """``Truncate.MAX_BYTES``: an output of more UTF-8 bytes is truncated when it returns."""
    shown_dir: str = "/home/user/.local/share/opencode/tool-output"
    """Directory named in the truncation hint."""
    placeholder: str = PLACEHOLDER
    count: Callable[[Any], int] = count_tokens
    """Token estimate of one output text."""

    def __post_init__(self) -> None:
        if self.protect < 0 or self.minimum < 0:
            raise ConfigError("OpenCodeConfig.protect and .minimum must be >= 0")
        if self.max_lines < 1 or self.max_bytes < 0:
            raise ConfigError("OpenCodeConfig.max_lines must be >= 1 and .max_bytes >= 0")


class _Session:
    """opencode's ``Truncate.output`` on every tool, and ``prune`` at the end of each user turn;
    truncated outputs are saved in ``workdir/tool-output``, prunes remembered."""

    def __init__(self, config: OpenCodeConfig, trace: Trace, workdir: Path) -> None:
        self.config = config
        self.workdir = workdir
        self.truncated: dict[str, Any] = {}
        """The content sent for each output ``Truncate.output`` cut, by call id."""
        self.files: dict[str, Path] = {}
        self.seen: set[str] = set()
        self.compacted: set[str] = set()
        self.pruned_prompts = 0
        """Prompts (after the first) whose preceding turn end has been pruned."""
        self.memo = PrefixMemo()
        self._tokens: dict[str, int] = {}

    def _truncate(self, call_id: str, block: dict[str, Any]) -> None:
        """``Truncate.output`` on an output met for the first time (as the tool returns)."""
        if call_id in self.seen:
            return
        self.seen.add(call_id)
        if is_error(block):
            return
        content = block.get("content")
        text = result_text(content)
        name = f"tool_{safe_name(call_id)}"
        config = self.config
        message = truncate_output(
            text, f"{config.shown_dir}/{name}", config.max_lines, config.max_bytes
        )
        if message is None:
            return
        path = self.workdir / "tool-output" / name
        write_text(path, text)
        self.files[call_id] = path
        extra = non_text_blocks(content)
        self.truncated[call_id] = [{"type": "text", "text": message}, *extra] if extra else message

    def _estimate(self, call_id: str, content: Any) -> int:
        tokens = self._tokens.get(call_id)
        if tokens is None:
            content = self.truncated.get(call_id, content)
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
        for ref in tool_results(messages, self.memo.reusable(messages)):
            self._truncate(ref.call_id, ref.data)
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
            elif ref.call_id in self.truncated:
                edits.setdefault(ref.msg, {})[ref.block] = with_content(
                    ref.data, self.truncated[ref.call_id]
                )
        return self.memo.finish(messages, start, edits)

    def recover(self, call_id: str) -> str | None:
        path = self.files.get(call_id)
        return path.read_text(encoding="utf-8") if path is not None else None


STRATEGY = Declaration("opencode", OpenCodeConfig, _Session)
