"""Gemini CLI chat recordings (``~/.gemini/tmp/<project>/chats/session-*.json``).

A ``gemini`` message holds its tool calls and their results in one object; the calls become
``tool_use`` blocks of that assistant message and the results a following user message. Each
``gemini`` message is one request with its recorded ``tokens``. The recorder may append the calls
of later text-less answers to the same message; that is kept as recorded (one request).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.importers._common import (
    Block,
    TraceBuilder,
    count_sum,
    fail,
    json_text,
    openai_usage,
    parse_time,
    parts_text,
    read_json,
    short_id,
    text_blocks,
)
from benchmarks.trace import Trace, Usage

FORMAT = "gemini-cli"


def _usage(tokens: Any) -> Usage | None:
    if not isinstance(tokens, dict):
        return None
    # Gemini bills thinking as output; its prompt count includes the cached part.
    output = count_sum(tokens.get("output"), tokens.get("thoughts"))
    return openai_usage(tokens.get("input"), tokens.get("cached"), output)


def _result_text(call: dict[str, Any]) -> str:
    parts: list[str] = []
    result = call.get("result")
    for part in result if isinstance(result, list) else []:
        response = (part.get("functionResponse") or {}).get("response")
        if isinstance(response, dict):
            if "output" in response:
                parts.append(str(response["output"]))
            elif "error" in response:
                parts.append(str(response["error"]))
            else:
                parts.append(json_text(response))
        elif isinstance(part, dict) and "text" in part:
            parts.append(str(part["text"]))
    return "\n".join(parts)


def load(path: Path, root: Path) -> list[Trace]:
    """One trace per session file."""
    doc = read_json(path)
    messages = doc.get("messages") if isinstance(doc, dict) else None
    if not isinstance(messages, list):
        raise fail(path, "expected an object with a 'messages' list")
    builder = TraceBuilder()
    models: list[str] = []
    for n, msg in enumerate(messages):
        kind = msg.get("type") if isinstance(msg, dict) else None
        if kind == "user":
            builder.user(text_blocks(parts_text(msg.get("content"), "")))
        elif kind == "gemini":
            key = str(msg.get("id") or n)
            calls = [c for c in msg.get("toolCalls") or [] if isinstance(c, dict)]
            blocks: list[Block] = text_blocks(parts_text(msg.get("content"), ""))
            for call in calls:
                args = call.get("args")
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": str(call.get("id")),
                        "name": str(call.get("name")),
                        "input": args if isinstance(args, dict) else {},
                    }
                )
            builder.assistant(key, blocks, parse_time(msg.get("timestamp")))
            builder.set_usage(key, _usage(msg.get("tokens")))
            for call in calls:
                result: Block = {
                    "type": "tool_result",
                    "tool_use_id": str(call.get("id")),
                    "content": text_blocks(_result_text(call)),
                }
                if call.get("status") == "error":
                    result["is_error"] = True
                builder.user([result])
            model = msg.get("model")
            if isinstance(model, str) and model not in models:
                models.append(model)
        else:
            # info / error / warning lines are shown to the user, not sent to the model.
            builder.stats[f"skipped_{kind}_messages"] += 1
    if not builder.request_count:
        raise fail(path, "no gemini message")
    session = str(doc.get("sessionId") or path.stem)
    return [
        builder.build(
            name=f"{FORMAT}/{short_id(session)}",
            path=path.relative_to(root).as_posix(),
            format=FORMAT,
            provider="google",
            model=models[0] if models else None,
            meta={"session_id": session},
        )
    ]
