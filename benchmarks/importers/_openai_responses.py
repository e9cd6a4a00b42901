"""Generic OpenAI Responses input lists: ``[items]`` or ``{"model": ..., "input": [...]}``.

The items a Responses request's ``input`` holds: messages (``{"role", "content"}``, with or
without ``"type": "message"``), ``function_call`` / ``custom_tool_call`` items and their
``function_call_output`` / ``custom_tool_call_output`` items; ``reasoning`` items (the model's,
encrypted or summarized) are left out, as the other importers leave thinking out. Each run of
output items (an assistant message, the calls after it) is one model call, as a Responses turn
is; leading ``system`` / ``developer`` messages become the system prompt.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.importers._codex_cli import _call_block, _output_text
from benchmarks.importers._common import Block, TraceBuilder, fail, read_json, text_blocks
from benchmarks.importers._openai_chat import content_blocks
from benchmarks.trace import Trace

__all__ = ["CALLS", "FORMAT", "OUTPUTS", "load"]

FORMAT = "openai-responses"

CALLS = frozenset({"function_call", "custom_tool_call"})
"""Item types of a tool call the model made."""
OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})
"""Item types of a tool's output sent back."""
SKIPPED = frozenset({"reasoning"})


def load(path: Path, root: Path) -> list[Trace]:
    """One trace: one request per run of output items, plus one if the list ends on input."""
    doc = read_json(path)
    model = None
    if isinstance(doc, dict):
        model = doc.get("model") if isinstance(doc.get("model"), str) else None
        doc = doc.get("input")
    if not isinstance(doc, list):
        raise fail(path, "expected a list of items or an object with 'input'")
    builder = TraceBuilder()
    system: list[str] = []
    turn: str | None = None  # the model call the latest output items belong to
    for i, item in enumerate(doc):
        if not isinstance(item, dict):
            raise fail(path, f"item {i} is not an object")
        kind, role = item.get("type", "message"), item.get("role")
        if kind in SKIPPED:
            continue
        if kind in CALLS:
            turn = turn or str(i)
            builder.assistant(turn, [_call_block(kind, item)])
        elif kind in OUTPUTS:
            turn = None
            text = text_blocks(_output_text(item.get("output")))
            call = str(item.get("call_id"))
            builder.user([{"type": "tool_result", "tool_use_id": call, "content": text}])
        elif kind == "message" and role in ("user", "assistant", "system", "developer"):
            try:
                blocks: list[Block] = content_blocks(item.get("content"))
            except ValueError as exc:
                raise fail(path, f"item {i}: {exc}") from exc
            turn = _message(builder, system, role, blocks, turn, str(i))
        else:
            raise fail(path, f"item {i} is of type {kind!r} with role {role!r}")
    return builder.plain(FORMAT, path, root, "openai", "\n\n".join(s for s in system if s), model)


def _message(
    builder: TraceBuilder,
    system: list[str],
    role: Any,
    blocks: list[Block],
    turn: str | None,
    key: str,
) -> str | None:
    """Add one message item; the model call that output items after it belong to."""
    if role == "assistant":
        turn = turn or key
        builder.assistant(turn, blocks)
        return turn
    if role in ("system", "developer") and not builder.messages:
        system.append("\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text"))
    else:
        if role in ("system", "developer"):
            builder.stats["late_system_as_user"] += 1
        builder.user(blocks)
    return None
