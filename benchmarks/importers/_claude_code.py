"""Claude Code session transcripts (``~/.claude/projects/<project>/<session>.jsonl``).

One API response is spread over several lines (one per content block, sharing ``message.id``), and
recent versions run tools while the answer still streams, so tool results interleave with the
blocks of their own response; merging by ``message.id`` and placing each result after its call
rebuilds the request sequence. The thread is followed from the last line back through
``parentUuid``; parallel calls hang results off sibling lines, which are pulled back in through
their shared ``message.id``; a parent missing from the file (a line lost) with model responses
before it is an error, not a session replayed as its tail. A ``compact_boundary`` restarts the
history: each stretch between boundaries becomes its own trace (a request can only see a prefix of
one trace's messages).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.importers import _anthropic
from benchmarks.importers._common import (
    TraceBuilder,
    TraceFileError,
    as_int,
    fail,
    parse_time,
    read_json,
    read_jsonl,
    short_id,
)
from benchmarks.trace import Trace, Usage

FORMAT = "claude-code"

_CONVERSATION = frozenset({"user", "assistant"})
BOOKKEEPING = frozenset(
    {
        "summary",
        "file-history-snapshot",
        "queue-operation",
        "system",
        "attachment",
        "permission-mode",
        "last-prompt",
        "progress",
    }
)
_AGENT_NAME = re.compile(r"^agent-([0-9a-f]{8})")


def _usage(raw: Any) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    creation = raw.get("cache_creation")
    one_hour = creation.get("ephemeral_1h_input_tokens") if isinstance(creation, dict) else 0
    return Usage(
        input_tokens=as_int(raw.get("input_tokens")),
        cache_read_tokens=as_int(raw.get("cache_read_input_tokens")),
        cache_write_tokens=as_int(raw.get("cache_creation_input_tokens")),
        output_tokens=as_int(raw.get("output_tokens")),
        cache_write_1h_tokens=as_int(one_hour),
    )


def _is_boundary(line: dict[str, Any]) -> bool:
    return line.get("type") == "system" and line.get("subtype") == "compact_boundary"


def _block_keys(
    lines: list[dict[str, Any]], chosen: set[int], line_type: str, block_type: str, key: str
) -> set[Any]:
    """The ``key`` of every ``block_type`` block in the chosen lines of ``line_type``."""
    return {
        block.get(key)
        for i in chosen
        if lines[i].get("type") == line_type
        for block in _content(lines[i])
        if isinstance(block, dict) and block.get("type") == block_type
    }


def _thread(lines: list[dict[str, Any]], path: Path) -> list[int]:
    """Indices (file order) of the lines that make up the conversation the model saw."""
    conversation = [i for i, d in enumerate(lines) if d.get("type") in _CONVERSATION]
    if not conversation:
        raise fail(path, "no user or assistant lines (bookkeeping only)")
    main = [i for i in conversation if not lines[i].get("isSidechain")]
    # Sidechain lines in a main session belong to subagents, whose own files are their traces.
    candidates = main or conversation
    by_uuid = {d["uuid"]: i for i, d in enumerate(lines) if isinstance(d.get("uuid"), str)}

    spine: set[int] = set()
    cur: int | None = candidates[-1]
    first, parent = candidates[-1], None
    while cur is not None and cur not in spine:
        spine.add(cur)
        first, line = cur, lines[cur]
        parent = line.get("parentUuid")
        if parent is None and _is_boundary(line):
            parent = line.get("logicalParentUuid")
        cur = by_uuid.get(parent) if isinstance(parent, str) else None

    chosen = {i for i in spine if lines[i].get("type") in _CONVERSATION or _is_boundary(lines[i])}
    # Parallel tool calls of one response fork the uuid chain; the branch not followed still
    # belongs to the same response (same message.id), and so do the results of its calls.
    responses = {_message_id(lines[i]) for i in chosen if lines[i].get("type") == "assistant"} - {
        None
    }
    if isinstance(parent, str) and parent not in by_uuid:
        _refuse_broken_thread(lines, candidates, responses, (first, parent), path)
    for i in candidates:
        if lines[i].get("type") == "assistant" and _message_id(lines[i]) in responses:
            chosen.add(i)
    calls = _block_keys(lines, chosen, "assistant", "tool_use", "id")
    answered = _block_keys(lines, chosen, "user", "tool_result", "tool_use_id")
    for i in candidates:
        if i in chosen or lines[i].get("type") != "user":
            continue
        results = [
            b.get("tool_use_id")
            for b in _content(lines[i])
            if isinstance(b, dict) and b.get("type") == "tool_result"
        ]
        if results and all(r in calls and r not in answered for r in results):
            chosen.add(i)
            answered.update(results)
    return sorted(chosen)


def _refuse_broken_thread(
    lines: list[dict[str, Any]],
    candidates: list[int],
    responses: set[Any],
    broken: tuple[int, str],
    path: Path,
) -> None:
    """Fail when the thread stops at a parent missing from the file (a line lost or cut out)
    while model responses before that line are on no branch of it: scored, the session would
    replay as its tail alone, far shorter than the one recorded. ``broken`` is the thread's
    first line and the parent it names."""
    first, parent = broken
    lost = {
        _message_id(lines[i])
        for i in candidates
        if i < first
        and lines[i].get("type") == "assistant"
        and (lines[i].get("message") or {}).get("model") != "<synthetic>"
    } - responses
    if lost:
        raise fail(
            path,
            f"line {first + 1}'s parent {parent!r:.60} is not in the file: the thread breaks "
            f"there, and the {len(lost)} model response(s) before it would be left out",
        )


def _content(line: dict[str, Any]) -> list[Any]:
    content = (line.get("message") or {}).get("content")
    return content if isinstance(content, list) else []


def _message_id(line: dict[str, Any]) -> str | None:
    mid = (line.get("message") or {}).get("id")
    return mid if isinstance(mid, str) else None


def _base_name(path: Path) -> str:
    stem = path.stem
    agent = _AGENT_NAME.match(stem)
    if agent:
        return f"{FORMAT}/agent-{agent.group(1)}"
    return f"{FORMAT}/{short_id(stem)}"


def _agent(sidecar: Path) -> dict[str, Any]:
    """What a subagent's sidecar says it was asked to do (worth keeping next to its trace), as
    the trace's ``agent`` metadata; nothing without one."""
    if not sidecar.is_file():
        return {}
    try:
        agent = read_json(sidecar)
    except (TraceFileError, OSError) as exc:
        # Only a description: a torn or unreadable one costs the note, not the session.
        return {"agent_sidecar": f"not read: {exc}"}
    return {"agent": agent} if isinstance(agent, dict) else {}


def load(path: Path, root: Path) -> list[Trace]:
    """The main thread of one session file; one trace per stretch between compactions."""
    lines = [d for d in read_jsonl(path) if isinstance(d, dict)]
    rel = path.relative_to(root).as_posix()
    meta: dict[str, Any] = {}
    for line in lines:
        if isinstance(line.get("sessionId"), str):
            meta["session_id"] = line["sessionId"]
            break
    versions = sorted({str(d["version"]) for d in lines if d.get("version")})
    if versions:
        meta["cli_versions"] = versions
    meta.update(_agent(path.with_suffix(".meta.json")))

    segments: list[tuple[TraceBuilder, Counter[str]]] = [(TraceBuilder(), Counter())]
    usage_of: dict[str, tuple[int, Usage | None]] = {}
    for i in _thread(lines, path):
        line = lines[i]
        builder, models = segments[-1]
        if _is_boundary(line):
            segments.append((TraceBuilder(), Counter()))
            continue
        msg = line.get("message")
        if not isinstance(msg, dict):
            raise fail(path, f"line {i + 1} ({line.get('type')}) has no message object")
        role = line["type"]
        try:
            content = _anthropic.blocks(msg.get("content"), role, builder.stats)
        except ValueError as exc:
            raise fail(path, f"line {i + 1}: {exc}") from exc
        if role == "user":
            builder.user(content)
            continue
        if msg.get("model") == "<synthetic>":
            # Claude Code's own placeholders (API errors, "no response requested"): no model call.
            builder.stats["synthetic_assistant_lines"] += 1
            continue
        key = _message_id(line) or f"line-{i}"
        if not builder.has_request(key):
            models[str(msg.get("model"))] += 1
        builder.assistant(key, content, parse_time(line.get("timestamp")))
        # Split lines repeat the usage, except that output_tokens grows as the answer streams.
        usage = _usage(msg.get("usage"))
        best = usage_of.get(key)
        out = usage.output_tokens if usage else -1
        if best is None or out >= best[0]:
            usage_of[key] = (out, usage)
            builder.set_usage(key, usage)

    base = _base_name(path)
    kept = [(b, m) for b, m in segments if b.request_count]
    traces: list[Trace] = []
    for n, (builder, models) in enumerate(kept, start=1):
        seg_meta = dict(meta)
        if len(kept) > 1:
            seg_meta["segment"] = n
        seg_meta["models"] = dict(sorted(models.items()))
        traces.append(
            builder.build(
                name=base if n == 1 else f"{base}#{n}",
                path=rel,
                format=FORMAT,
                provider="anthropic",
                model=models.most_common(1)[0][0] if models else None,
                meta=seg_meta,
            )
        )
    if not traces:
        raise fail(path, "no model response on the main thread")
    return traces
