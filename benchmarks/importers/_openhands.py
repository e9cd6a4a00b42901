"""OpenHands event histories: ``output.jsonl`` (one instance per line) and bare-array exports.

An action carrying ``tool_call_metadata`` is a tool call; the actions of one model response (same
``model_response.id``) share one assistant message, whose text is the response's content. An
observation whose ``cause`` is such an action is its result. An error observation without a cause
(a call that failed validation) is sent to the model as a user message, as OpenHands does.

Results are what the model was sent: OpenHands records observations whole but cuts them to the
LLM config's ``max_message_chars`` (:data:`DEFAULT_MAX_MESSAGE_CHARS` when the recording has no
config) when it builds the prompt. :func:`truncate_content` does what OpenHands'
``openhands/events/serialization/event.py::truncate_content`` does (All-Hands-AI/OpenHands at
commit 04e28400): a content longer than ``max_chars`` keeps its first ``max_chars // 2`` and last
``max_chars // 2`` characters around the line ``\n[... Observation truncated due to length
...]\n``. ``openhands/memory/conversation_memory.py::_process_observation`` (commit 0336a988)
applies it to every observation except file reads (``FileReadObservation``, already cut by the
file tool) and browser output; the importer does the same for ``read`` and ``browse``.

Older schemas are accepted: a ``history`` of ``[action, observation]`` pairs (OpenHands before
0.10), and actions without ``tool_call_metadata`` (CodeAct before function calling), each of
which is one model request whose call gets the id ``event-<id>``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.importers._common import (
    BadLine,
    Block,
    PartialTraceFile,
    TraceBuilder,
    TraceFileError,
    fail,
    jsonl_values,
    openai_usage,
    parse_arguments,
    parse_time,
    read_json,
    text_blocks,
)
from benchmarks.trace import Provider, Trace, Usage

FORMAT = "openhands"

DEFAULT_MAX_MESSAGE_CHARS = 30_000
"""OpenHands' ``LLMConfig.max_message_chars`` default in its pydantic config (2025 releases, and
the value the shared recordings carry); older dataclass configs used 10,000
(openhands/core/config/llm_config.py at commit 00ece0cc). Only used when a recording has none."""
TRUNCATION_MARKER = "\n[... Observation truncated due to length ...]\n"
_UNTRUNCATED = frozenset({"read", "browse", "browse_interactive"})
# Agent actions that ran a tool; without tool_call_metadata (older CodeAct) they are still calls.
_TOOL_ACTIONS = frozenset(
    {
        "run",
        "run_ipython",
        "read",
        "write",
        "edit",
        "browse",
        "browse_interactive",
        "delegate",
        "call_tool_mcp",
    }
)


def truncate_content(content: str, max_chars: int | None) -> str:
    """``content`` as OpenHands put it in the prompt: its middle cut when over ``max_chars``."""
    if max_chars is None or max_chars < 0 or len(content) <= max_chars:
        return content
    half = max_chars // 2
    return content[:half] + TRUNCATION_MARKER + content[-half:]


_INTERNAL_ARGS = frozenset(
    {
        "thought",
        "is_input",
        "blocking",
        "hidden",
        "confirmation_state",
        "impl_source",
        "translated_ipython_code",
        "security_risk",
    }
)


def _usage_from_response(raw: Any) -> Usage | None:
    if not isinstance(raw, dict) or raw.get("prompt_tokens") is None:
        return None
    details = raw.get("prompt_tokens_details") or {}
    read = raw.get("cache_read_input_tokens") or details.get("cached_tokens")
    return openai_usage(
        raw.get("prompt_tokens"),
        read,
        raw.get("completion_tokens"),
        raw.get("cache_creation_input_tokens") or 0,
    )


def _usage_from_metrics(raw: dict[str, Any]) -> Usage:
    return openai_usage(
        raw.get("prompt_tokens"),
        raw.get("cache_read_tokens"),
        raw.get("completion_tokens"),
        raw.get("cache_write_tokens"),
    )


def _tool_input(meta: dict[str, Any], args: Any) -> dict[str, Any]:
    """The call's arguments as the model wrote them, else the recorded action args."""
    response = meta.get("model_response")
    if isinstance(response, dict):
        for choice in response.get("choices") or []:
            for call in (choice.get("message") or {}).get("tool_calls") or []:
                if call.get("id") == meta.get("tool_call_id"):
                    return parse_arguments((call.get("function") or {}).get("arguments"))
    if isinstance(args, dict):
        return {k: v for k, v in args.items() if k not in _INTERNAL_ARGS}
    return {}


def _response_text(meta: dict[str, Any], args: Any) -> str:
    response = meta.get("model_response")
    if isinstance(response, dict):
        for choice in response.get("choices") or []:
            content = (choice.get("message") or {}).get("content")
            if isinstance(content, str):
                return content
    thought = args.get("thought") if isinstance(args, dict) else None
    return thought if isinstance(thought, str) else ""


def _observation_text(event: dict[str, Any]) -> str:
    content = event.get("content")
    if isinstance(content, str):
        return content
    message = event.get("message")
    return message if isinstance(message, str) else ""


def _trace(
    events: list[Any],
    *,
    name: str,
    rel: str,
    metrics: dict[str, Any] | None,
    meta: dict[str, Any],
    model: str | None,
    max_chars: int | None = DEFAULT_MAX_MESSAGE_CHARS,
) -> Trace:
    builder = TraceBuilder()
    events = _flatten(events)
    for event in events:
        if _is_legacy_call(event):
            # No tool_call_metadata: the action was parsed from the model's text (older
            # CodeAct); one request per action, with a call id derived from the event id.
            args = event.get("args")
            thought = args.get("thought") if isinstance(args, dict) else None
            event["tool_call_metadata"] = {
                "function_name": event.get("action"),
                "tool_call_id": f"event-{event.get('id')}",
                "model_response": {"choices": [{"message": {"content": thought or ""}}]},
                "legacy": True,
            }
    by_id = {e.get("id"): e for e in events if isinstance(e, dict)}
    metric_usage = {
        u.get("response_id"): _usage_from_metrics(u)
        for u in (metrics or {}).get("token_usages") or []
        if isinstance(u, dict) and u.get("response_id")
    }
    system = ""
    models: set[str] = set()
    for event in events:
        if not isinstance(event, dict):
            continue
        action = event.get("action")
        args = event.get("args")
        call = event.get("tool_call_metadata")
        if action is not None and isinstance(call, dict):
            response = call.get("model_response")
            response = response if isinstance(response, dict) else {}
            if call.get("legacy"):
                builder.stats["calls_without_tool_call_metadata"] += 1
            key = str(response.get("id") or call.get("tool_call_id"))
            blocks: list[Block] = []
            if not builder.has_request(key):
                blocks.extend(text_blocks(_response_text(call, args)))
                if isinstance(response.get("model"), str):
                    models.add(response["model"])
            blocks.append(
                {
                    "type": "tool_use",
                    "id": str(call.get("tool_call_id")),
                    "name": str(call.get("function_name")),
                    "input": _tool_input(call, args),
                }
            )
            stamp = parse_time(response.get("created")) or parse_time(event.get("timestamp"))
            builder.assistant(key, blocks, stamp)
            usage = _usage_from_response(response.get("usage")) or metric_usage.get(key)
            builder.set_usage(key, usage)
        elif action == "system":
            content = args.get("content") if isinstance(args, dict) else None
            system = content if isinstance(content, str) else str(event.get("message") or "")
        elif action == "message":
            content = args.get("content") if isinstance(args, dict) else None
            text = content if isinstance(content, str) else str(event.get("message") or "")
            if event.get("source") == "agent":
                key = f"event-{event.get('id')}"
                builder.assistant(key, text_blocks(text), parse_time(event.get("timestamp")))
            else:
                builder.user(text_blocks(text))
        elif action is not None:
            builder.stats[f"skipped_{action}_actions"] += 1
        elif "observation" in event:
            observation = event.get("observation")
            cause = by_id.get(event.get("cause"))
            cause_call = cause.get("tool_call_metadata") if isinstance(cause, dict) else None
            if isinstance(cause_call, dict):
                text = _observation_text(event)
                if observation not in _UNTRUNCATED:
                    cut = truncate_content(text, max_chars)
                    if cut != text:
                        builder.stats["results_truncated_to_max_message_chars"] += 1
                    text = cut
                result: Block = {
                    "type": "tool_result",
                    "tool_use_id": str(cause_call.get("tool_call_id")),
                    "content": text_blocks(text),
                }
                if observation == "error":
                    result["is_error"] = True
                builder.user([result])
            elif observation == "error" and event.get("cause") is None:
                builder.stats["errors_as_user_messages"] += 1
                builder.user(text_blocks(truncate_content(_observation_text(event), max_chars)))
            else:
                builder.stats[f"skipped_{observation}_observations"] += 1
    model = model or (sorted(models)[0] if models else None)
    provider: Provider = "anthropic" if model and "claude" in model else "openai"
    return builder.build(
        name=name,
        path=rel,
        format=FORMAT,
        provider=provider,
        system=system,
        model=model,
        meta=meta,
    )


def _is_legacy_call(event: Any) -> bool:
    return (
        isinstance(event, dict)
        and event.get("action") in _TOOL_ACTIONS
        and event.get("source", "agent") == "agent"
        and not isinstance(event.get("tool_call_metadata"), dict)
    )


def _flatten(history: list[Any]) -> list[Any]:
    """Events in order; ``[action, observation]`` pairs (the pre-0.10 schema) become two events.

    Every event is a copy (the ids and links below are added to it, never to the parsed file),
    pair members without an id get one, and a paired observation without a cause answers its pair.
    """
    out: list[Any] = []
    for n, item in enumerate(history):
        if isinstance(item, list) and len(item) == 2 and all(isinstance(e, dict) for e in item):
            action, observation = dict(item[0]), dict(item[1])
            action.setdefault("id", f"pair-{n}")
            if observation.get("observation") is not None:
                observation.setdefault("cause", action["id"])
            out.extend([action, observation])
        elif isinstance(item, dict):
            out.append(dict(item))
        else:
            out.append(item)
    return out


def _instance(doc: Any, n: int, path: Path) -> tuple[list[Any], dict[str, Any]]:
    if not isinstance(doc, dict) or not isinstance(doc.get("history"), list):
        raise fail(path, f"instance {n} has no 'history' list")
    return doc["history"], doc


def load(path: Path, root: Path) -> list[Trace]:
    """One trace per instance (``output.jsonl`` line or object), or one for a bare event array.

    An evaluation's ``output.jsonl`` holds hundreds of independent instances: one that cannot be
    read is named (:class:`PartialTraceFile`) and the others are still scored.
    """
    rel = path.relative_to(root).as_posix()
    docs = jsonl_values(path) if path.suffix == ".jsonl" else [read_json(path)]
    if len(docs) == 1 and isinstance(docs[0], list):
        return [
            _trace(
                docs[0],
                name=f"{FORMAT}/{path.stem}",
                rel=rel,
                metrics=None,
                meta={"max_message_chars": DEFAULT_MAX_MESSAGE_CHARS},
                model=None,
            )
        ]
    traces: list[Trace] = []
    bad: list[str] = []
    for n, raw in enumerate(docs, start=1):
        try:
            traces.append(_instance_trace(raw, n, path, rel))
        except Exception as exc:
            # Any exception, as load_file turns a whole file's into its reason: this instance's.
            why = str(exc) if isinstance(exc, TraceFileError) else f"{type(exc).__name__}: {exc}"
            bad.append(why.removeprefix(f"{path}: "))
    if bad and not traces:
        raise fail(path, "; ".join(bad))
    if bad:
        raise PartialTraceFile(
            f"{path}: {len(bad)} instance(s) not scored: {'; '.join(bad)}", traces
        )
    return traces


def _instance_trace(raw: Any, n: int, path: Path, rel: str) -> Trace:
    """The trace of instance ``n`` of an ``output.jsonl`` (or of a single-object file)."""
    if isinstance(raw, BadLine):
        raise fail(path, f"instance {n}: {raw.why}")
    history, doc = _instance(raw, n, path)
    llm = (doc.get("metadata") or {}).get("llm_config") or {}
    meta: dict[str, Any] = {"instance_id": doc.get("instance_id")}
    recorded = llm.get("max_message_chars")
    max_chars = recorded if isinstance(recorded, int) else DEFAULT_MAX_MESSAGE_CHARS
    meta["max_message_chars"] = max_chars
    metrics = doc.get("metrics")
    return _trace(
        history,
        name=f"{FORMAT}/{doc.get('instance_id') or f'{path.stem}-{n}'}",
        rel=rel,
        metrics=metrics if isinstance(metrics, dict) else None,
        meta=meta,
        model=llm.get("model") if isinstance(llm.get("model"), str) else None,
        max_chars=max_chars,
    )
