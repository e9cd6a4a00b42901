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
   Grep, git and truncation caps). A changed result's content becomes that string.

A result's text is its string, or its text blocks joined by newlines; a result carrying
``squeezr:skip`` in its call's input is left alone. Pressure grows with the conversation and a
dedup rewrites an old result when its text comes again: either changes old turns' bytes.

Left out: step 2, a model's compression (Haiku, GPT mini, Gemini Flash or a local Ollama
model: no model calls here) of results of 800+ characters outside the last 3 (``keep_recent``)
that sit in the request's last message (older ones it never sends to a model, it reuses its
earlier answers): at the shipped ``normal`` mode it fires only on a message carrying 4 or more
results, so the deterministic stages are what most requests get; the system prompt's
compression (a model too); steps 1.5 to 1.7 (``compress_conversation``, on by default: the
prose clean-up of assistant and user text and of old ``tool_use`` inputs), not re-implemented
yet, so Squeezr's savings there are not counted; the Bash families listed in the rules module's
docstring. The dedup placeholder's original can be read back with Squeezr's ``squeezr_expand``
tool, not modelled here (the later copy of the same text is in the context anyway).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from benchmarks.strategies._base import Declaration, Messages, Unrecoverable
from benchmarks.strategies._common import apply_edits, result_text, tool_results
from benchmarks.strategies._squeezr_rules import preprocess_for_tool
from benchmarks.trace import Trace, Usage
from budget._errors import ConfigError

__all__ = ["STRATEGY", "SqueezrConfig", "pressure_of"]

_DEDUP: Final = {
    "read": "file content as a later read",
    "bash": "bash output as a later call",
    "grep": "grep result as a later search",
}
_SKIP: Final = re.compile(r"squeezr:\s*skip", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class SqueezrConfig:
    """``compressor.ts``'s constants."""

    pressure_chars: int = 800_000
    """``estimatePressure``: the characters at which the context counts as full."""
    dedup_min_chars: int = 200
    """Shorter results are not deduplicated (``Skip tiny outputs``)."""

    def __post_init__(self) -> None:
        if self.pressure_chars <= 0 or self.dedup_min_chars < 0:
            raise ConfigError("SqueezrConfig: pressure_chars positive, dedup_min_chars >= 0")


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
        return apply_edits(messages, edits)


STRATEGY = Declaration("squeezr", SqueezrConfig, _Session)
"""Squeezr's deterministic stages at its shipped settings."""
