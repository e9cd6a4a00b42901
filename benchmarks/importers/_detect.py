"""Recognizing a trace file's format from its content, never from a guess.

A plain list of user/assistant text messages reads the same as Anthropic or OpenAI, but the two
imply different prompt-cache rules, so it is reported as ambiguous rather than picked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from benchmarks._jsonbytes import loads
from benchmarks.importers._claude_code import BOOKKEEPING
from benchmarks.importers._common import without_bom

_SNIFF_LINES = 20
_CODEX_LINES = frozenset(
    {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
)
_CLAUDE_LINES = BOOKKEEPING | {"user", "assistant"}
_CLAUDE_KEYS = frozenset({"uuid", "sessionId", "leafUuid", "messageId"})
_ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking"})
_OPENAI_PARTS = frozenset(
    {"image_url", "input_image", "input_text", "output_text", "refusal", "input_audio"}
)
_OPENAI_ROLES = frozenset({"system", "developer", "tool", "function"})
_RESPONSES_ITEMS = frozenset(
    {"function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output"}
    | {"reasoning"}
)
"""Item types only a Responses input list holds (not ``message``: an Anthropic SDK dump of a
message has ``type: message`` too)."""


def sniff(path: Path) -> tuple[str | None, str]:
    """The format of ``path``, or None and why it is not recognized.

    Never raises: a file of any content gives a format or a reason (a recording is foreign input,
    and a corpus of thousands always holds one of an odd shape).
    """
    name = path.name.lower()
    try:
        if name.endswith(".jsonl"):
            return _sniff_jsonl(path)
        if name.endswith(".json"):
            return _sniff_json(loads(without_bom(path.read_bytes())))
    except OSError as exc:
        return None, f"cannot read ({exc.strerror or exc})"
    except orjson.JSONDecodeError as exc:
        return None, f"not valid JSON ({exc})"
    except Exception as exc:
        return None, f"not a recording of a known shape ({type(exc).__name__}: {exc})"
    return None, "not a .json or .jsonl file"


def _name(value: Any) -> str | None:
    """``value`` when it is a string (a ``type`` or ``role`` field as recordings write it), else
    None: a list, an object or a number there names no known line or message kind."""
    return value if isinstance(value, str) else None


def _sniff_jsonl(path: Path) -> tuple[str | None, str]:
    heads: list[Any] = []
    with path.open("rb") as handle:
        for k, line in enumerate(handle):
            if not line.strip():
                continue
            try:
                heads.append(loads(without_bom(line) if k == 0 else line))
            except orjson.JSONDecodeError as exc:
                if heads:
                    # The lines before it say the format; the loader then drops a torn last line
                    # (a short session cut mid-write is still scored) or names this one.
                    break
                return None, f"line {k + 1} is not valid JSON ({exc})"
            if len(heads) >= _SNIFF_LINES:
                break
    if not heads:
        return None, "empty file"
    objects = [h for h in heads if isinstance(h, dict)]
    if len(objects) != len(heads):
        return None, "JSON lines that are not all objects"
    first = objects[0]
    if isinstance(first.get("payload"), dict) and _name(first.get("type")) in _CODEX_LINES:
        return "codex-cli", ""
    if isinstance(first.get("history"), list):
        return "openhands", ""
    if all(_name(d.get("type")) in _CLAUDE_LINES for d in objects) and any(
        _CLAUDE_KEYS & d.keys() for d in objects
    ):
        return "claude-code", ""
    return None, "JSON lines of no known recording (Claude Code, Codex CLI, OpenHands)"


def _sniff_json(doc: Any) -> tuple[str | None, str]:
    if isinstance(doc, dict):
        info = doc.get("info")
        if str(doc.get("trajectory_format", "")).startswith("mini-swe-agent") or (
            isinstance(info, dict) and "mini_version" in info and "messages" in doc
        ):
            return "mini-swe-agent", ""
        messages = doc.get("messages")
        if (
            isinstance(messages, list)
            and "sessionId" in doc
            and all(isinstance(m, dict) and "type" in m for m in messages)
        ):
            return "gemini-cli", ""
        if isinstance(doc.get("history"), list):
            return "openhands", ""
        if isinstance(doc.get("input"), list) and _responses(doc["input"]):
            return "openai-responses", ""
        if isinstance(messages, list):
            found, why = _sniff_messages(messages)
            if found is None and "system" in doc and why.startswith("plain"):
                return "anthropic", ""  # a top-level system prompt is the Anthropic request shape
            return found, why
        return None, "a JSON object of no known recording"
    if isinstance(doc, list):
        if doc and all(
            isinstance(e, dict) and "source" in e and ("action" in e or "observation" in e)
            for e in doc[:_SNIFF_LINES]
        ):
            return "openhands", ""
        if _responses(doc):
            return "openai-responses", ""
        return _sniff_messages(doc)
    return None, "a JSON value that is neither an object nor a list"


def _responses(items: list[Any]) -> bool:
    """Whether ``items`` is a Responses input list: an item of a type only it holds."""
    return any(isinstance(i, dict) and _name(i.get("type")) in _RESPONSES_ITEMS for i in items)


def _sniff_messages(messages: list[Any]) -> tuple[str | None, str]:
    if not messages:
        return None, "an empty message list"
    openai = anthropic = False
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            return None, f"item {i} is not a message with a role"
        role = msg["role"]
        if role in _OPENAI_ROLES:
            openai = True
        elif role not in ("user", "assistant"):
            return None, f"message {i} has unknown role {role!r}"
        if "tool_calls" in msg or "function_call" in msg or "tool_call_id" in msg:
            openai = True
        content = msg.get("content")
        if content is None:
            openai = True  # OpenAI allows a null content beside tool calls; Anthropic never
        for block in content if isinstance(content, list) else []:
            kind = _name(block.get("type")) if isinstance(block, dict) else None
            if kind in _ANTHROPIC_BLOCKS or (kind == "image" and "source" in block):
                anthropic = True
            elif kind in _OPENAI_PARTS:
                openai = True
    if openai and anthropic:
        return None, "a message list mixing OpenAI and Anthropic features"
    if openai:
        return "openai-chat", ""
    if anthropic:
        return "anthropic", ""
    return None, (
        "plain user/assistant text messages, valid as Anthropic and as OpenAI; "
        "name the format (anthropic or openai-chat)"
    )
