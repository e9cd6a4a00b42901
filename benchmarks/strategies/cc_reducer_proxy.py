"""cc-reducer-proxy: a local proxy re-compressing Claude Code's whole history on every request.

Followed: github.com/mickoallen/cc-reducer-proxy at commit
1191bb4f7a44de17149438b002934382503dc166 (2026-03-28; the repository has no version tags),
``compression.py`` (``compress_messages``: the pipeline below, applied to every proxied request's
``messages``), ``rules/tool_results.py`` (stage 1, in ``benchmarks/strategies/_cc_reducer_rules.py``),
``rules/deduplication.py`` (stage 2) and ``rules/truncation.py`` (stages 3 and 4, with its
constants). Re-implemented from that behaviour, at its shipped constants:

1. **recompress** every tool result's text by the tool that produced it;
2. **dedup**: results of ``Read`` (same ``file_path``, ``offset``, ``limit``), ``Bash`` (same
   ``command``), ``Grep`` (same ``pattern``, ``path``, ``glob``) and ``Glob`` (same ``pattern``,
   ``path``) calls repeated later become ``[deduplicated — superseded by later <label>]``;
3. **stale**: a result more than ``stale_turns`` (10) assistant turns old and over
   ``stale_chars`` (500) keeps its first 500 characters and ``[truncated — result from N turns
   ago]``;
4. **cap**: a result more than ``cap_turns`` (5) turns old and over ``cap_chars`` (4,000) keeps
   its first 4,000 and ``[capped — result from N turns ago exceeded 4000 char limit]``.

A result's text is its string, or its text blocks joined by newlines; an edited list becomes one
text block (images dropped), as there. Turns are counted in assistant messages, so every stage
slides with the conversation: the copy of an old result changes as turns pass.

Everything the proxy does is deterministic (no model call): all of it is here. Nothing is
recoverable: the originals are not kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.strategies._base import Declaration, Messages, Unrecoverable
from benchmarks.strategies._cc_reducer_rules import recompress
from benchmarks.strategies._common import apply_edits, content_chars, result_text, tool_results
from benchmarks.trace import Trace, Usage
from budget._errors import ConfigError

__all__ = ["STRATEGY", "CcReducerConfig", "dedup_key"]


@dataclass(frozen=True, slots=True)
class CcReducerConfig:
    """``rules/truncation.py``'s constants."""

    cap_chars: int = 4_000
    cap_turns: int = 5
    stale_turns: int = 10
    stale_chars: int = 500

    def __post_init__(self) -> None:
        if min(self.cap_chars, self.cap_turns, self.stale_turns, self.stale_chars) < 0:
            raise ConfigError("CcReducerConfig settings must be non-negative")


def dedup_key(tool: str, args: dict[str, Any]) -> tuple[str, str] | None:
    """(key, label) of a call whose later repeats supersede it, or None."""
    if tool == "Read" and args.get("file_path"):
        path = args["file_path"]
        ranged = args.get("offset") is not None or args.get("limit") is not None
        key = f"Read:{path}:{args.get('offset')}:{args.get('limit')}" if ranged else f"Read:{path}"
        return key, f"Read of {path}"
    if tool == "Bash" and args.get("command"):
        return f"Bash:{args['command']}", f"Bash: {str(args['command'])[:80]}"
    if tool == "Grep" and args.get("pattern"):
        key = f"Grep:{args['pattern']}:{args.get('path', '')}:{args.get('glob', '')}"
        return key, f"Grep for {args['pattern']}"
    if tool == "Glob" and args.get("pattern"):
        return f"Glob:{args['pattern']}:{args.get('path', '')}", f"Glob {args['pattern']}"
    return None


def _calls(messages: Messages) -> dict[str, tuple[str, dict[str, Any]]]:
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    for message in messages:
        if message.get("role") == "assistant" and isinstance(message.get("content"), list):
            for block in message["content"]:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    args = block.get("input")
                    found[str(block.get("id", ""))] = (
                        str(block.get("name", "")),
                        args if isinstance(args, dict) else {},
                    )
    return found


def _set_text(block: dict[str, Any], text: str) -> dict[str, Any]:
    copy = dict(block)
    copy["content"] = (
        text if isinstance(block.get("content"), str) else [{"type": "text", "text": text}]
    )
    return copy


class _Session(Unrecoverable):
    """The four stages over the whole history, on every request (stateless)."""

    def __init__(self, config: CcReducerConfig, trace: Trace, workdir: Path) -> None:
        self.config = config

    def prepare(self, messages: Messages, *, usage: Usage | None, now: float | None) -> Messages:
        calls = _calls(messages)
        total = sum(1 for m in messages if m.get("role") == "assistant")
        turn, turn_of = 0, {}
        for i, message in enumerate(messages):
            turn += message.get("role") == "assistant"
            turn_of[i] = total - turn
        refs = list(tool_results(messages))
        blocks: dict[tuple[int, int], dict[str, Any]] = {}
        last_of: dict[str, tuple[int, int]] = {}
        for ref in refs:
            tool, args = calls.get(ref.call_id, ("", {}))
            block = ref.data
            text = result_text(block.get("content"))
            if text.strip():
                new = recompress(tool, text, str(args.get("command", "")))
                if new != text:
                    block = _set_text(block, new)
            blocks[(ref.msg, ref.block)] = block
            keyed = dedup_key(tool, args)
            if keyed is not None:
                last_of[keyed[0]] = (ref.msg, ref.block)
        for ref in refs:
            tool, args = calls.get(ref.call_id, ("", {}))
            keyed = dedup_key(tool, args)
            where = (ref.msg, ref.block)
            if keyed is not None and last_of[keyed[0]] != where:
                # Always a plain string there, whatever the content was.
                stub = f"[deduplicated — superseded by later {keyed[1]}]"
                blocks[where] = {**blocks[where], "content": stub}
        for (i, j), block in list(blocks.items()):
            blocks[(i, j)] = self._truncated(block, turn_of[i])
        edits: dict[int, dict[int, dict[str, Any]]] = {}
        for ref in refs:
            block = blocks[(ref.msg, ref.block)]
            if block is not ref.data:
                edits.setdefault(ref.msg, {})[ref.block] = block
        return apply_edits(messages, edits)

    def _truncated(self, block: dict[str, Any], ago: int) -> dict[str, Any]:
        cfg = self.config
        text = result_text(block.get("content"))
        # The stale check counts the text blocks' characters; the cut, their joined text.
        if ago > cfg.stale_turns and content_chars(block.get("content")) > cfg.stale_chars:
            block = _set_text(
                block, f"{text[: cfg.stale_chars]}\n[truncated — result from {ago} turns ago]"
            )
            text = result_text(block["content"])
        if ago > cfg.cap_turns and len(text) > cfg.cap_chars:
            note = f"[capped — result from {ago} turns ago exceeded {cfg.cap_chars} char limit]"
            block = _set_text(block, f"{text[: cfg.cap_chars]}\n{note}")
        return block


STRATEGY = Declaration("cc-reducer-proxy", CcReducerConfig, _Session)
"""cc-reducer-proxy at its shipped constants."""
