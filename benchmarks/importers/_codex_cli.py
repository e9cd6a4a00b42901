"""OpenAI Codex CLI rollouts (``~/.codex/sessions/.../rollout-*.jsonl``).

``response_item`` lines are what the model saw or emitted. A model call is the run of output items
(reasoning, assistant message, function and custom tool calls, web searches) up to the
``token_count`` event that closes it with ``last_token_usage``, or, in rollouts without
``token_count`` events, up to the next tool output or user turn (each answer to new input is a
request, with no usage recorded). A ``local_shell_call`` (the built-in shell tool: no name, an
``action`` for its arguments) is a call of ``local_shell``, as toolbudget's Responses format counts
it; Codex CLI answers it with a ``function_call_output`` naming its ``call_id``, the API with a
``local_shell_call_output``. Encrypted reasoning is skipped, and
so are web searches: the provider ran them inside the response, and their results are not in the
recording.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.importers._common import (
    Block,
    TraceBuilder,
    fail,
    openai_usage,
    parse_arguments,
    parse_time,
    read_jsonl,
    short_id,
    text_blocks,
)
from benchmarks.trace import Trace

FORMAT = "codex-cli"

_OUTPUT_ITEMS = frozenset({"reasoning", "function_call", "custom_tool_call", "web_search_call"})
_LOCAL_SHELL = "local_shell"
"""The tool name of a ``local_shell_call`` (the item has none; budget/formats/openai_responses.py
counts it under the same name)."""
_SHELL_OUTPUT = "local_shell_call_output"


def _message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, dict) and isinstance(output.get("content"), str):
        return str(output["content"])
    if isinstance(output, list):
        return _message_text(output)
    return ""


def _shell_id(payload: dict[str, Any]) -> str:
    """The id a local shell call or its output names the call by: ``call_id``, else ``id``."""
    return str(payload.get("call_id") or payload.get("id"))


def _call_block(item: Any, payload: dict[str, Any]) -> Block:
    """The ``tool_use`` block of a function, custom tool or local shell call item."""
    if item == "local_shell_call":
        action = payload.get("action")
        # A call like any other: left out, its output would be text for an unknown call, a result
        # no strategy could budget, and the session replayed as if it called no tool.
        arguments = action if isinstance(action, dict) else {"input": action}
        return {
            "type": "tool_use",
            "id": _shell_id(payload),
            "name": _LOCAL_SHELL,
            "input": arguments,
        }
    # Custom tools take free text (apply_patch's patch), never a JSON object.
    arguments = (
        parse_arguments(payload.get("arguments"))
        if item == "function_call"
        else {"input": str(payload.get("input", ""))}
    )
    return {
        "type": "tool_use",
        "id": str(payload.get("call_id")),
        "name": str(payload.get("name")),
        "input": arguments,
    }


def load(path: Path, root: Path) -> list[Trace]:
    """One trace per rollout file."""
    lines = [d for d in read_jsonl(path) if isinstance(d, dict)]
    builder = TraceBuilder()
    system = ""
    session_id = path.stem
    meta: dict[str, Any] = {}
    models: list[str] = []
    calls = 0
    current: str | None = None  # the open model call, until its token_count arrives
    # A call closed by its tool outputs before any token_count: a late token_count is its usage.
    unpaid: str | None = None

    def open_call(stamp: float | None) -> str:
        nonlocal calls, current, unpaid
        if current is None:
            calls += 1
            current = f"response-{calls}"
            unpaid = None
            builder.begin_request(current, stamp)
        return current

    def close_call() -> None:
        # Input for the model (a tool output, a user turn) ends its answer even when the rollout
        # has no token_count events (older CLIs): the next output item is a new request.
        nonlocal current, unpaid
        if current is not None:
            unpaid = current
            current = None

    for n, line in enumerate(lines, start=1):
        kind = line.get("type")
        payload = line.get("payload")
        if not isinstance(payload, dict):
            continue
        stamp = parse_time(line.get("timestamp"))
        item = payload.get("type")
        if kind == "session_meta":
            base = payload.get("base_instructions")
            if isinstance(base, dict) and isinstance(base.get("text"), str):
                system = base["text"]
            elif isinstance(base, str):
                system = base
            session_id = str(payload.get("id") or session_id)
            meta["session_id"] = session_id
            if payload.get("cli_version"):
                meta["cli_version"] = payload["cli_version"]
        elif kind == "turn_context":
            if isinstance(payload.get("model"), str) and payload["model"] not in models:
                models.append(payload["model"])
        elif kind == "event_msg" and item == "token_count":
            info = payload.get("info")
            last = info.get("last_token_usage") if isinstance(info, dict) else None
            target = current if current is not None else unpaid
            if target is not None and isinstance(last, dict):
                builder.set_usage(
                    target,
                    openai_usage(
                        last.get("input_tokens"),
                        last.get("cached_input_tokens"),
                        last.get("output_tokens"),
                    ),
                )
                current = unpaid = None
        elif kind == "response_item":
            if item == "message":
                role = payload.get("role")
                text = _message_text(payload.get("content"))
                if role == "assistant":
                    builder.assistant(open_call(stamp), text_blocks(text))
                elif role in ("user", "developer", "system"):
                    close_call()
                    builder.user(text_blocks(text))
                else:
                    raise fail(path, f"line {n}: message role {role!r}")
            elif item in ("function_call", "custom_tool_call", "local_shell_call"):
                builder.assistant(open_call(stamp), [_call_block(item, payload)])
            elif item in ("function_call_output", "custom_tool_call_output", _SHELL_OUTPUT):
                close_call()
                call = _shell_id(payload) if item == _SHELL_OUTPUT else str(payload.get("call_id"))
                builder.user(
                    [
                        {
                            "type": "tool_result",
                            "tool_use_id": call,
                            "content": text_blocks(_output_text(payload.get("output"))),
                        }
                    ]
                )
            elif item in _OUTPUT_ITEMS:
                open_call(stamp)
                builder.stats[f"skipped_{item}_items"] += 1
            else:
                builder.stats[f"skipped_{item}_items"] += 1
    if calls == 0:
        raise fail(path, "no model call (no assistant output or tool call)")
    return [
        builder.build(
            name=f"{FORMAT}/{short_id(session_id)}",
            path=path.relative_to(root).as_posix(),
            format=FORMAT,
            provider="openai",
            system=system,
            model=models[0] if models else None,
            meta=meta,
        )
    ]
