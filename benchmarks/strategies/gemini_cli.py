"""Gemini CLI: shell output truncated at 40,000 characters, then masking of old bulky outputs.

Source: github.com/google-gemini/gemini-cli at commit 5411f113cafae26161b4969b0237b8e1e024e2c2
(``@google/gemini-cli-core`` 0.56.0-nightly.20260806).

1. Truncation, when a tool returns: ``packages/core/src/scheduler/tool-executor.ts``
   (``truncateOutputIfNeeded``), ``packages/core/src/config/config.ts``
   (``DEFAULT_TRUNCATE_TOOL_OUTPUT_THRESHOLD = 40_000``) and ``packages/core/src/utils/
   fileUtils.ts`` (``saveTruncatedToolOutput``, ``formatTruncatedToolOutput``). A string output
   of the shell tool longer than 40,000 characters is saved to ``tool-outputs/<tool>_<id>.txt``
   and replaced by ``Output too large. Showing first 8,000 and last 32,000 characters. For full
   output see: <path>``, the first 20% of the threshold, ``... [<N> characters omitted] ...``
   and the last 80%. (Gemini also truncates single-text MCP outputs; the traces do not mark MCP
   tools. ``getTruncateToolOutputThreshold`` lowers the threshold to 4 x the tokens left in the
   window when that is smaller; the replay's window is far from full when outputs return, so
   that clause is not modelled.) The shell tool of a trace is its shell-running tool, whatever
   the agent called it (:data:`SHELL_TOOLS`).
2. Masking, below.

Followed for masking: ``packages/core/src/context/toolOutputMaskingService.ts`` (earlier
``services/toolOutputMaskingService.ts``; ``DEFAULT_TOOL_PROTECTION_THRESHOLD = 50000``,
``DEFAULT_MIN_PRUNABLE_TOKENS_THRESHOLD = 30000``, ``DEFAULT_PROTECT_LATEST_TURN = true``,
``EXEMPT_TOOLS``) and ``core/client.ts`` (``mask`` runs before every model request and the masked
history replaces the chat history, so masking is persistent). The "Hybrid Backward Scanned FIFO":

* scan the history from the newest message, skipping the latest one (the turn just returned);
* for each function response (newest first) that is not exempt and not already masked, add its
  token estimate to a running total; the response that takes the total past ``protect`` and
  every older one are prunable;
* mask only if the prunable responses add up to at least ``minimum`` tokens: each is written to
  ``tool-outputs/<tool>_<call id>.txt`` (its response as indented JSON) and replaced by
  ``<tool_output_masked>`` with a preview (shell: the first and last 10 lines of the output
  section; other tools: the first and last 250 characters of the JSON when it is longer than 500)
  and ``Output too large. Full output available at: <path>``, provided that saves tokens.

Mapping: a tool_result is a function response whose response is ``{"output": text}`` (``{"error":
text}`` when it is an error); images stay beside the masked text as Gemini keeps sibling parts.
Token estimates use the injected counter on the tool_result block as sent (after truncation).
Deviations: the file name
drops Gemini's random suffix and the path shown is a fixed, configurable directory, for
byte-identical runs; the file is written under the session's ``workdir``. Truncated and masked
outputs are recoverable from their files, as in Gemini CLI.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._count import count_tokens
from benchmarks.strategies._base import Declaration, Messages
from benchmarks.strategies._common import (
    PrefixMemo,
    is_error,
    non_text_blocks,
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

__all__ = [
    "SHELL_TOOLS",
    "STRATEGY",
    "GeminiCliConfig",
    "masked_snippet",
    "truncated_output",
]

MASKING_INDICATOR_TAG = "tool_output_masked"
SHELL_TOOL_NAME = "run_shell_command"
SHELL_TOOLS = frozenset(
    {SHELL_TOOL_NAME, "Bash", "bash", "execute_bash", "exec_command", "shell", "write_stdin"}
)
"""The shell-running tools of the recorded agents, truncated as Gemini's ``run_shell_command``."""
EXEMPT_TOOLS = frozenset({"activate_skill", "ask_user", "enter_plan_mode", "exit_plan_mode"})

_SHELL_SECTION = re.compile(
    r"^(Output|Error|Exit Code|Signal|Background PIDs|Process Group PGID): ", re.MULTILINE
)


@dataclass(frozen=True, slots=True)
class GeminiCliConfig:
    """Gemini CLI's masking defaults."""

    truncate_threshold: int = 40_000
    """Shell outputs longer than this many characters are truncated when they return."""
    protect: int = 50_000
    """Newest tool-output tokens never masked."""
    minimum: int = 30_000
    """Mask only when at least this many tokens are prunable."""
    protect_latest_turn: bool = True
    exempt_tools: frozenset[str] = EXEMPT_TOOLS
    shown_dir: str = "/home/user/.gemini/tmp/project/tool-outputs"
    """Directory named in the masked text."""
    count: Callable[[Any], int] = count_tokens
    """Token estimate of one function response (a tool_result block)."""

    def __post_init__(self) -> None:
        if self.protect < 0 or self.minimum < 0 or self.truncate_threshold < 0:
            raise ConfigError("GeminiCliConfig.protect, .minimum, .truncate_threshold must be >= 0")


def truncated_output(content: str, path: str, max_chars: int) -> str:
    """``formatTruncatedToolOutput``: the first 20% and last 80% of ``max_chars`` characters."""
    if len(content) <= max_chars:
        return content
    head_chars = max_chars // 5
    tail_chars = max_chars - head_chars
    omitted = len(content) - head_chars - tail_chars
    tail = content[len(content) - tail_chars :] if tail_chars else ""
    return (
        f"Output too large. Showing first {head_chars:,} and last {tail_chars:,} characters. "
        f"For full output see: {path}\n{content[:head_chars]}\n\n"
        f"... [{omitted:,} characters omitted] ...\n\n{tail}"
    )


def _simple_preview(content: str) -> str:
    lines = content.split("\n")
    if len(lines) <= 20:
        return content
    head, tail = lines[:10], lines[-10:]
    omitted = len(lines) - len(head) - len(tail)
    return "\n".join(head) + f"\n\n... [{omitted} lines omitted] ...\n\n" + "\n".join(tail)


def _shell_preview(output: str) -> str:
    parts = _SHELL_SECTION.split(output)
    if len(parts) < 3:
        return _simple_preview(output)
    previews: list[str] = []
    if parts[0].strip():
        previews.append(_simple_preview(parts[0].strip()))
    for i in range(1, len(parts), 2):
        name = parts[i]
        section = parts[i + 1].strip() if i + 1 < len(parts) else ""
        if name == "Output":
            previews.append(f"Output: {_simple_preview(section)}")
        else:
            previews.append(f"{name}: {section}")
    return "\n".join(previews)


def masked_snippet(tool: str, response: dict[str, str], path: str) -> str:
    """The masked text Gemini CLI leaves in place of a function response."""
    content = json.dumps(response, indent=2, ensure_ascii=False)
    if tool == SHELL_TOOL_NAME:
        shown = _shell_preview(response.get("output") or response.get("stdout") or "")
    elif len(content) > 500:
        shown = f"{content[:250]}\n... [TRUNCATED] ...\n{content[-250:]}"
    else:
        shown = content
    return (
        f"<{MASKING_INDICATOR_TAG}>\n{shown}\n\n"
        f"Output too large. Full output available at: {path}\n</{MASKING_INDICATOR_TAG}>"
    )


def _response(block: dict[str, Any]) -> dict[str, str]:
    text = result_text(block.get("content"))
    return {"error": text} if is_error(block) else {"output": text}


def _masked_content(block: dict[str, Any], snippet: str) -> Any:
    extra = non_text_blocks(block.get("content"))
    return [{"type": "text", "text": snippet}, *extra] if extra else snippet


class _Session:
    """Gemini CLI's shell output truncation, and masking run before every request, persistent;
    masked outputs are offloaded into ``workdir/tool-outputs``."""

    def __init__(self, config: GeminiCliConfig, trace: Trace, workdir: Path) -> None:
        self.config = config
        self.workdir = workdir
        self.masked: dict[str, str] = {}
        self.files: dict[str, Path] = {}
        self.truncated: dict[str, str] = {}
        """The text sent for each shell output truncated when it returned, by call id."""
        self.originals: dict[str, Path] = {}
        self.seen: set[str] = set()
        self.names: dict[str, str] = {}
        self.memo = PrefixMemo()
        self._sized: dict[str, tuple[int, bool]] = {}

    def _truncate(self, call_id: str, block: dict[str, Any]) -> None:
        """``truncateOutputIfNeeded`` on an output met for the first time (as the tool returns)."""
        if call_id in self.seen:
            return
        self.seen.add(call_id)
        tool = self.names.get(call_id, "")
        content = block.get("content")
        threshold = self.config.truncate_threshold
        if tool not in SHELL_TOOLS or not isinstance(content, str) or threshold <= 0:
            return
        if len(content) <= threshold:
            return
        name = f"{safe_name(tool).lower()}_{safe_name(call_id).lower()}.txt"
        path = self.workdir / "tool-outputs" / name
        write_text(path, content)
        self.originals[call_id] = path
        self.truncated[call_id] = truncated_output(
            content, f"{self.config.shown_dir}/{name}", threshold
        )

    def _sent(self, call_id: str, block: dict[str, Any]) -> dict[str, Any]:
        """The block as it entered the history (truncated if it was)."""
        text = self.truncated.get(call_id)
        return block if text is None else with_content(block, text)

    def _size(self, call_id: str, block: dict[str, Any]) -> tuple[int, bool]:
        """Token estimate of a response, and whether it already carries the masking tag."""
        sized = self._sized.get(call_id)
        if sized is None:
            tagged = f"<{MASKING_INDICATOR_TAG}" in result_text(block.get("content"))
            sized = (self.config.count(block), tagged)
            self._sized[call_id] = sized
        return sized

    def _mask(self, messages: Messages) -> bool:
        config = self.config
        cumulative = 0
        reached = False
        prunable_tokens = 0
        prunable: list[tuple[str, dict[str, Any], int]] = []
        scan_from = len(messages) - (2 if config.protect_latest_turn else 1)
        for i in range(scan_from, -1, -1):
            for ref in reversed(list(results_in(messages[i], i))):
                tool = self.names.get(ref.call_id, "")
                if tool in config.exempt_tools or ref.call_id in self.masked:
                    continue
                sent = self._sent(ref.call_id, ref.data)
                tokens, tagged = self._size(ref.call_id, sent)
                if tagged:
                    continue
                if not reached:
                    cumulative += tokens
                    if cumulative > config.protect:
                        reached = True
                        prunable_tokens += tokens
                        prunable.append((ref.call_id, sent, tokens))
                else:
                    prunable_tokens += tokens
                    prunable.append((ref.call_id, sent, tokens))
        if prunable_tokens < config.minimum:
            return False
        masked_any = False
        for call_id, block, tokens in prunable:
            tool = self.names.get(call_id) or "unknown_tool"
            response = _response(block)
            name = f"{safe_name(tool).lower()}_{safe_name(call_id).lower()}.txt"
            snippet = masked_snippet(tool, response, f"{config.shown_dir}/{name}")
            masked_block = with_content(block, _masked_content(block, snippet))
            if tokens - config.count(masked_block) > 0:
                path = self.workdir / "tool-outputs" / name
                write_text(path, json.dumps(response, indent=2, ensure_ascii=False))
                self.files[call_id] = path
                self.masked[call_id] = snippet
                masked_any = True
        return masked_any

    def prepare(self, messages: Messages, *, usage: Usage | None, now: float | None) -> Messages:
        start = self.memo.reusable(messages)
        for call in tool_calls(messages, max(0, start - 1)):
            self.names[call.call_id] = call.name
        for ref in tool_results(messages, start):
            self._truncate(ref.call_id, ref.data)
        if self._mask(messages):
            start = 0
        edits: dict[int, dict[int, dict[str, Any]]] = {}
        for ref in tool_results(messages, start):
            snippet = self.masked.get(ref.call_id)
            if snippet is not None:
                edits.setdefault(ref.msg, {})[ref.block] = with_content(
                    ref.data, _masked_content(ref.data, snippet)
                )
            elif ref.call_id in self.truncated:
                edits.setdefault(ref.msg, {})[ref.block] = self._sent(ref.call_id, ref.data)
        return self.memo.finish(messages, start, edits)

    def recover(self, call_id: str) -> str | None:
        original = self.originals.get(call_id)
        if original is not None:
            return original.read_text(encoding="utf-8")
        path = self.files.get(call_id)
        if path is None:
            return None
        response = json.loads(path.read_text(encoding="utf-8"))
        return str(response.get("output", response.get("error", "")))


STRATEGY = Declaration("gemini-cli", GeminiCliConfig, _Session)
