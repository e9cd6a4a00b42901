"""Squeezr: a local proxy compressing the tool results of every request, deterministic stages only.

Followed: github.com/sergioramosv/squeezr at commit 2870ef1402296195fadf040840647b5379f8983d
(v1.46.3, 2026-05-28): ``src/compressor.ts`` (``compressAnthropicMessages``: the steps below, run
on every proxied request's ``messages``), ``src/deterministic.ts`` (``preprocessForTool``, in
``benchmarks/strategies/_squeezr_rules.py``), ``src/sessionCache.ts`` / ``src/expand.ts`` (the
dedup placeholder's id: the first 6 hex digits of the text's MD5) and ``squeezr.toml`` (the
shipped settings: no tool skipped). Re-implemented from that behaviour:

0. **dedup**: a ``Read``, ``Bash`` or ``Grep`` result of 200+ characters whose exact text comes
   again later becomes ``[same <what> in conversation — squeezr_expand(<id>) to retrieve]``
   (the latest copy stays);
1. **deterministic**: every other result, recent ones included, goes through
   ``preprocessForTool`` for its tool, at the request's *pressure*: the characters of the JSON of
   the messages plus the system prompt's, over 800,000, at most 1 (0.75 and 0.9 tighten the
   Grep, git and truncation caps). A changed result's content becomes that string;
1.5. the text of assistant messages before the last 3, and 1.6. the text of user messages
   before the last one (the live ask), when of 300+ characters, goes through
   ``preprocessAssistant`` (the base clean-up, then narration markers, verbose phrases and
   markdown emphasis out of the prose, a closing summary paragraph dropped);
1.7. in the calls of those older assistant messages, input fields of 200+ characters
   (``Bash`` command, ``Edit`` strings, ``Write`` content, ``NotebookEdit`` source,
   ``MultiEdit`` edits) go through the base clean-up.

Steps 1.5 to 1.7 run as ``compress_conversation`` is on by default; each keeps a clean-up only
where it is shorter. They too rewrite old bytes: an assistant message is cleaned once 3 newer
ones exist, a user text once another user message follows.

A result's text is its string, or its text blocks joined by newlines; a result carrying
``squeezr:skip`` in its call's input is left alone. Pressure grows with the conversation and a
dedup rewrites an old result when its text comes again: either changes old turns' bytes.

Left out: step 2, a model's compression (Haiku, GPT mini, Gemini Flash or a local Ollama
model: no model calls here) of results of 800+ characters outside the last 3 (``keep_recent``)
that sit in the request's last message (older ones it never sends to a model, it reuses its
earlier answers): at the shipped ``normal`` mode it fires only on a message carrying 4 or more
results, so the deterministic stages are what most requests get; the system prompt's
compression (a model too); the Bash families listed in the rules module's docstring. The dedup
placeholder's original can be read back with Squeezr's ``squeezr_expand`` tool, not modelled
here (the later copy of the same text is in the context anyway).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from benchmarks.strategies._base import Declaration, Messages, Unrecoverable
from benchmarks.strategies._common import apply_edits, result_text, tool_results
from benchmarks.strategies._squeezr_rules import (
    preprocess,
    preprocess_assistant,
    preprocess_for_tool,
)
from benchmarks.trace import Trace, Usage
from budget._errors import ConfigError

__all__ = ["STRATEGY", "SqueezrConfig", "pressure_of"]

_DEDUP: Final = {
    "read": "file content as a later read",
    "bash": "bash output as a later call",
    "grep": "grep result as a later search",
}
_SKIP: Final = re.compile(r"squeezr:\s*skip", re.IGNORECASE)
_INPUT_FIELDS: Final = {
    "bash": ("command",),
    "edit": ("old_string", "new_string"),
    "write": ("content",),
    "notebookedit": ("new_source",),
    "multiedit": ("edits",),
}
"""``TOOL_USE_INPUT_FIELDS``: the long fields of a call's input step 1.7 cleans, by tool."""


@dataclass(frozen=True, slots=True)
class SqueezrConfig:
    """``compressor.ts``'s constants."""

    pressure_chars: int = 800_000
    """``estimatePressure``: the characters at which the context counts as full."""
    dedup_min_chars: int = 200
    """Shorter results are not deduplicated (``Skip tiny outputs``)."""
    compress_conversation: bool = True
    """``squeezr.toml``'s ``compress_conversation``: steps 1.5 to 1.7."""
    keep_recent_assistant: int = 3
    """``keep_recent_assistant``: the last assistant messages left whole by steps 1.5 and 1.7."""
    assistant_threshold: int = 300
    """``assistant_threshold``: shorter assistant and user texts are left whole."""
    input_min_chars: int = 200
    """``compressToolUseInputDet``: shorter tool input fields are left whole."""

    def __post_init__(self) -> None:
        numbers = (self.dedup_min_chars, self.keep_recent_assistant, self.assistant_threshold)
        if self.pressure_chars <= 0 or min(*numbers, self.input_min_chars) < 0:
            raise ConfigError("SqueezrConfig: pressure_chars positive, the other sizes >= 0")


def pressure_of(messages: Messages, system_chars: int, full_chars: int = 800_000) -> float:
    """``estimatePressure``: ``JSON.stringify(messages).length`` plus the system prompt's, over
    ``full_chars``, at most 1."""
    chars = len(json.dumps(list(messages), ensure_ascii=False, separators=(",", ":")))
    return min((chars + system_chars) / full_chars, 1.0)


def _bucket(pressure: float) -> float:
    """The pressure as the rules read it: only 0.75 and 0.9 change an outcome."""
    return 0.9 if pressure >= 0.9 else 0.75 if pressure >= 0.75 else 0.0


class _Session(Unrecoverable):
    """Steps 0 and 1 over the whole history, on every request."""

    def __init__(self, config: SqueezrConfig, trace: Trace, workdir: Path) -> None:
        self.config = config
        self._system_chars = len(trace.system)
        self._memo: dict[tuple[str, float, str], str] = {}
        self._prose_memo: dict[tuple[bool, str], str] = {}

    def _det(self, text: str, tool: str, pressure: float) -> str:
        key = (tool.lower(), _bucket(pressure), text)
        out = self._memo.get(key)
        if out is None:
            out = self._memo[key] = preprocess_for_tool(text, tool, key[1])
        return out

    def prepare(self, messages: Messages, *, usage: Usage | None, now: float | None) -> Messages:
        names: dict[str, str] = {}
        skipped: set[str] = set()
        for message in messages:
            if message.get("role") != "assistant" or not isinstance(message.get("content"), list):
                continue
            for block in message["content"]:
                if isinstance(block, dict) and block.get("type") == "tool_use" and "id" in block:
                    names[str(block["id"])] = str(block.get("name", ""))
                    if _SKIP.search(json.dumps(block.get("input", ""), ensure_ascii=False)):
                        skipped.add(str(block["id"]))
        results = []
        for ref in tool_results(messages):
            content = ref.data.get("content")
            text = result_text(content) if isinstance(content, str | list) else ""
            if text and ref.call_id not in skipped:
                results.append((ref, text, names.get(ref.call_id, "unknown")))
        if not results:
            return list(messages)  # a copy, never the caller's list
        pressure = pressure_of(messages, self._system_chars, self.config.pressure_chars)
        edits: dict[int, dict[int, dict[str, Any]]] = {}
        latest: set[str] = set()
        deduped: set[tuple[int, int]] = set()
        for ref, text, tool in reversed(results):  # newest first: the latest copy stays
            label = _DEDUP.get(tool.lower())
            if label is None or len(text) < self.config.dedup_min_chars:
                continue
            digest = hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()
            if digest not in latest:
                latest.add(digest)
                continue
            stub = f"[same {label} in conversation — squeezr_expand({digest[:6]}) to retrieve]"
            edits.setdefault(ref.msg, {})[ref.block] = {**ref.data, "content": stub}
            deduped.add((ref.msg, ref.block))
        for ref, text, tool in results:
            if (ref.msg, ref.block) in deduped:
                continue
            det = self._det(text, tool, pressure)
            if det != text:
                edits.setdefault(ref.msg, {})[ref.block] = {**ref.data, "content": det}
        if not self.config.compress_conversation:
            return apply_edits(messages, edits)
        strings = self._conversation(messages, edits)
        out = apply_edits(messages, edits)
        for i, text in strings.items():
            out[i] = {**out[i], "content": text}
        return out

    def _shorter(self, text: str, clean: Callable[[str], str]) -> str | None:
        """``clean(text)`` where it is shorter (as there: a clean-up that grows is dropped)."""
        out = self._prose_memo.get((clean is preprocess, text))
        if out is None:
            out = self._prose_memo[(clean is preprocess, text)] = clean(text)
        return out if len(out) < len(text) else None

    def _conversation(
        self, messages: Messages, edits: dict[int, dict[int, dict[str, Any]]]
    ) -> dict[int, str]:
        """Steps 1.5 to 1.7 into ``edits``; the messages whose whole string content changes."""
        cfg = self.config
        strings: dict[int, str] = {}
        assistants = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
        users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
        old = assistants[: max(0, len(assistants) - cfg.keep_recent_assistant)]
        # 1.5 old assistant text and 1.6 user text but the last user message's: the prose clean-up.
        for i in [*old, *users[:-1]]:
            content = messages[i].get("content")
            if isinstance(content, str):
                if len(content) >= cfg.assistant_threshold:
                    new = self._shorter(content, preprocess_assistant)
                    if new is not None:
                        strings[i] = new
                continue
            if not isinstance(content, list):
                continue
            for j, block in enumerate(content):
                if not isinstance(block, dict) or block.get("type") != "text":
                    continue
                text = block.get("text")
                text = text if isinstance(text, str) else ""
                if len(text) >= cfg.assistant_threshold:
                    new = self._shorter(text, preprocess_assistant)
                    if new is not None:
                        edits.setdefault(i, {})[j] = {**block, "text": new}
        # 1.7 the long fields of old calls' inputs: the base clean-up.
        for i in old:
            content = messages[i].get("content")
            if not isinstance(content, list):
                continue
            for j, block in enumerate(content):
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    args = self._input(block.get("input"), str(block.get("name", "unknown")))
                    if args is not None:
                        edits.setdefault(i, {})[j] = {**block, "input": args}
        return strings

    def _input(self, args: object, tool: str) -> dict[str, Any] | None:
        """``compressToolUseInputDet``: the call's input with its long fields cleaned, or None."""
        fields = _INPUT_FIELDS.get(tool.lower())
        if fields is None or not isinstance(args, dict) or not args:
            return None
        out = dict(args)
        changed = False
        for name in fields:
            value = args.get(name)
            if isinstance(value, str) and len(value) >= self.config.input_min_chars:
                new = self._shorter(value, preprocess)
                if new is not None:
                    out[name], changed = new, True
            elif isinstance(value, list) and name == "edits":
                edited = []
                for edit in value:
                    if not isinstance(edit, dict):
                        edited.append(edit)
                        continue
                    copy = dict(edit)
                    for key in ("old_string", "new_string"):
                        text = edit.get(key)
                        if isinstance(text, str) and len(text) >= self.config.input_min_chars:
                            new = self._shorter(text, preprocess)
                            if new is not None:
                                copy[key], changed = new, True
                    edited.append(copy)
                if changed:
                    out[name] = edited
        return out if changed else None


STRATEGY = Declaration("squeezr", SqueezrConfig, _Session)
"""Squeezr's deterministic stages at its shipped settings."""
