"""mini-SWE-agent trajectories (``*.traj.json``, ``trajectory_format: mini-swe-agent-1``).

The agent has no native tool calling: an assistant message holding exactly one ```` ```bash ````
block is a call, and the next user message is its output. A synthetic ``tool_use`` (``call_<n>``,
``bash``, ``{"command": ...}``) follows the assistant's text, which stays as recorded; the next user
message becomes its ``tool_result``. Answers with zero or several blocks are not executed (the agent
replies with a format error), so their reply stays a plain user message.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from benchmarks.importers._common import (
    TraceBuilder,
    fail,
    openai_usage,
    parse_time,
    parts_text,
    read_json,
    text_blocks,
)
from benchmarks.trace import Trace, Usage

FORMAT = "mini-swe-agent"

# The agent's own action regex (mini-swe-agent 1.x, DefaultAgent.parse_action).
_ACTION = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)


def _usage(extra: Any) -> tuple[Usage | None, float | None, str | None]:
    response = extra.get("response") if isinstance(extra, dict) else None
    if not isinstance(response, dict):
        return None, None, None
    raw = response.get("usage")
    usage = None
    if isinstance(raw, dict):
        details = raw.get("prompt_tokens_details") or {}
        usage = openai_usage(
            raw.get("prompt_tokens"), details.get("cached_tokens"), raw.get("completion_tokens")
        )
    model = response.get("model")
    return usage, parse_time(response.get("created")), model if isinstance(model, str) else None


def load(path: Path, root: Path) -> list[Trace]:
    """One trace per trajectory file."""
    doc = read_json(path)
    messages = doc.get("messages") if isinstance(doc, dict) else None
    if not isinstance(messages, list) or len(messages) < 2:
        raise fail(path, "expected an object with at least a system and a task message")
    if messages[0].get("role") != "system":
        raise fail(path, f"message 0 has role {messages[0].get('role')!r}, not 'system'")
    body = list(messages[1:])
    dropped_final = False
    if len(body) > 1 and body[-1].get("role") == "user" and body[-2].get("role") == "assistant":
        # The last output (usually the submit step's git diff) was never sent to the model.
        body.pop()
        dropped_final = True

    builder = TraceBuilder()
    pending: str | None = None  # the call the next user message answers
    calls = 0
    models: set[str] = set()
    for i, msg in enumerate(body, start=1):
        role = msg.get("role")
        text = parts_text(msg.get("content"))
        if role == "assistant":
            usage, stamp, model = _usage(msg.get("extra"))
            if model:
                models.add(model)
            blocks = text_blocks(text)
            actions = _ACTION.findall(text)
            pending = None
            if len(actions) == 1:
                calls += 1
                pending = f"call_{calls}"
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": pending,
                        "name": "bash",
                        "input": {"command": actions[0].strip()},
                    }
                )
            else:
                builder.stats["answers_without_one_action"] += 1
            builder.assistant(str(i), blocks, stamp)
            builder.set_usage(str(i), usage)
        elif role == "user":
            if pending is not None:
                builder.user(
                    [{"type": "tool_result", "tool_use_id": pending, "content": text_blocks(text)}]
                )
                pending = None
            else:
                builder.user(text_blocks(text))
        else:
            raise fail(path, f"message {i} has role {role!r}")

    info = doc.get("info") if isinstance(doc.get("info"), dict) else {}
    meta: dict[str, Any] = {
        "instance_id": doc.get("instance_id"),
        "exit_status": info.get("exit_status"),
        "mini_version": info.get("mini_version"),
        "dropped_final_output": dropped_final,
    }
    instance = doc.get("instance_id") or path.name.removesuffix(".traj.json")
    return [
        builder.build(
            name=f"{FORMAT}/{instance}",
            path=path.relative_to(root).as_posix(),
            format=FORMAT,
            provider="openai",
            system=parts_text(messages[0].get("content")),
            model=sorted(models)[0] if models else None,
            meta={k: v for k, v in meta.items() if v is not None},
        )
    ]
