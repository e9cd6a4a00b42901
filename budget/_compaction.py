"""Compaction's pure half: the transcript a summarizer reads, the tail kept, the copy projected.

Nothing here calls a model, touches a file or edits a message: the session (``Budget``) asks these
functions where to cut and what the copy is, and records the checkpoint itself (SPEC §11).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import xxhash

from budget._view import Format, scan_at
from budget.formats._common import field, is_record, to_dict

__all__ = [
    "Attachments",
    "Tail",
    "anchor_of",
    "attachments",
    "extract_constraints",
    "file_snapshots",
    "pinned_head",
    "project",
    "render_transcript",
    "resolve_anchor",
    "summary_message",
    "tail_start",
]

SNAPSHOT_NOTE = (
    "snapshot taken before the conversation was compacted; the file may have changed since: "
    "re-read it before relying on its exact content"
)
"""The note each file snapshot carries (SPEC §11.5: snapshots may be stale)."""


@dataclass(frozen=True, slots=True)
class Tail:
    """Where the retained tail starts, and what it holds."""

    start: int
    """Index of the first retained message; equal to ``head`` when nothing can be summarized."""
    head: int
    """Leading system / developer messages: never summarized, always sent first."""
    prefix_tokens: int
    """Estimated tokens of ``messages[head:start]``, what a summary would replace."""
    tail_tokens: int


@dataclass(frozen=True, slots=True)
class Attachments:
    """What is carried verbatim beside the summary."""

    constraints: tuple[str, ...] = ()
    files: tuple[tuple[str, str], ...] = ()
    """(path, snapshot text) of the most recently read files, most recent first."""


def pinned_head(messages: Sequence[Any]) -> int:
    """How many leading messages are system or developer instructions (Chat, Responses)."""
    i = 0
    while i < len(messages) and field(messages[i], "role") in ("system", "developer"):
        i += 1
    return i


def tail_start(
    messages: Sequence[Any],
    fmt: Format,
    *,
    min_tokens: int,
    min_messages: int,
    max_tokens: int,
    tokens: Callable[[Any], int],
) -> Tail:
    """Choose the retained tail from the end (SPEC §11.3).

    The tail grows backwards until it holds ``min_tokens`` and ``min_messages``, or until the
    next message would take it past ``max_tokens`` (it always holds the last message). Its start
    then moves earlier until no result in it answers a call made before it, and past the
    reasoning items a Responses call must be sent with: a tail never starts with an orphan.
    """
    n, head = len(messages), pinned_head(messages)
    sizes = [tokens(m) for m in messages]
    start, held = n, 0
    while start > head:
        size = sizes[start - 1]
        if start < n and held + size > max_tokens:
            break
        start, held = start - 1, held + size
        if held >= min_tokens and n - start >= min_messages:
            break
    called: dict[str, int] = {}
    scans = [scan_at(fmt, messages, i) for i in range(n)]
    for i, scanned in enumerate(scans):
        for call in scanned.calls:
            called.setdefault(call.call_id, i)
    moved = True
    while moved:
        moved = False
        earliest = min(
            (called.get(r.call_id, start) for s in scans[start:] for r in s.results),
            default=start,
        )
        if start > head and field(messages[start - 1], "type") == "reasoning":
            earliest = min(earliest, start - 1)
        if earliest < start:
            start, moved = max(earliest, head), True
    start = max(start, head)
    return Tail(
        start=start,
        head=head,
        prefix_tokens=sum(sizes[head:start]),
        tail_tokens=sum(sizes[start:]),
    )


_CONSTRAINT_RE = re.compile(
    r"(?i)\b(?:must|never|always|only|do not|don't|dont|should|shall|required?|requirements?|"
    r"ensure|avoid|without|forbidden|prohibited|format|acceptance|criteria|goal|constraint)\b"
    r"|`[^`]+`|(?:^|\s)(?:\$ |\./|/)\S+|\b[\w.-]+/[\w./-]+"
)


def _user_texts(message: Any) -> list[str]:
    """The text a user wrote in ``message``: none for tool results (they are not the user's)."""
    parts = None if is_record(message) else getattr(message, "parts", None)
    if isinstance(parts, list):  # a pydantic-ai ModelRequest: its user prompts
        return [
            p.content
            for p in parts
            if getattr(p, "part_kind", None) == "user-prompt" and isinstance(p.content, str)
        ]
    kind = field(message, "type")
    # LangChain's HumanMessage has a ``type`` of "human" and no role.
    if not (field(message, "role") == "user" and kind in (None, "message")) and kind != "human":
        return []
    content = field(message, "content")
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        t
        for b in content
        if is_record(b) and field(b, "type") in ("text", "input_text")
        for t in [field(b, "text")]
        if isinstance(t, str)
    ]


def extract_constraints(
    messages: Sequence[Any], *, limit_chars: int, first: int = 3
) -> tuple[str, ...]:
    """The user's key constraints, verbatim, from the first ``first`` user messages with text.

    The first line of the first message is the goal and always comes first; then each line that
    states a requirement, a prohibition, a format, a path or a command (a cue word, a code span,
    a path), as written (only surrounding whitespace removed), once, up to ``limit_chars``.
    """
    texts = [t for m in messages for t in _user_texts(m)][:first]
    lines = [ln.strip() for t in texts for ln in t.splitlines()]
    lines = [ln for ln in lines if ln]
    picked: list[str] = []
    if lines:
        picked.append(lines[0])
    picked += [ln for ln in lines[1:] if _CONSTRAINT_RE.search(ln)]
    out: list[str] = []
    used = 0
    for ln in dict.fromkeys(picked):
        if used + len(ln) > limit_chars:
            break
        out.append(ln)
        used += len(ln)
    return tuple(out)


_READ_TOOL_RE = re.compile(
    r"(?i)^(?:read|read_?file|view|view_?file|cat|open_?file|str_replace_based_edit_tool)$"
)
_PATH_KEYS = ("path", "file_path", "filename", "file")


def _calls_with_args(message: Any) -> list[tuple[str, str, Any]]:
    """(call id, tool name, arguments) of the calls ``message`` makes, in any of the formats."""
    out: list[tuple[str, str, Any]] = []
    if field(message, "type") == "function_call":
        out.append(
            (
                str(field(message, "call_id")),
                str(field(message, "name")),
                field(message, "arguments"),
            )
        )
    content = field(message, "content")
    if isinstance(content, list):
        for b in content:
            if is_record(b) and field(b, "type") == "tool_use":
                out.append((str(field(b, "id")), str(field(b, "name")), field(b, "input")))
    for tc in field(message, "tool_calls") or []:
        name, args = _name_args(tc)
        out.append((str(field(tc, "id")), str(name), args))
    return out


def _path_arg(arguments: Any) -> str | None:
    if isinstance(arguments, str):
        try:
            arguments = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return None
    if not is_record(arguments):
        return None
    for key in _PATH_KEYS:
        value = field(arguments, key)
        if isinstance(value, str) and value:
            return value
    return None


def file_snapshots(
    messages: Sequence[Any], fmt: Format, start: int, *, files: int, file_chars: int
) -> tuple[tuple[str, str], ...]:
    """The files read before ``start`` and not again after it, most recent first, cut to size.

    A read is a call to a file-reading tool (``read``, ``read_file``, ``view``, ``cat``...) with
    a path argument, answered by a result that is not an error; the last read of a path wins.
    """
    if files == 0 or file_chars == 0:
        return ()
    reads: dict[str, str] = {}
    for message in messages:
        for call_id, tool, args in _calls_with_args(message):
            path = _path_arg(args)
            if path is not None and _READ_TOOL_RE.match(tool):
                reads[call_id] = path
    latest: dict[str, tuple[int, str]] = {}
    for i in range(len(messages)):
        for r in scan_at(fmt, messages, i).results:
            path = reads.get(r.call_id)
            if path is not None and not r.is_error:
                latest[path] = (i, r.text)
    before = sorted(
        ((i, path, text) for path, (i, text) in latest.items() if i < start), reverse=True
    )
    return tuple((path, text[:file_chars]) for _, path, text in before[:files])


def attachments(
    messages: Sequence[Any],
    fmt: Format,
    start: int,
    *,
    constraint_chars: int,
    files: int,
    file_chars: int,
) -> Attachments:
    """The constraints and file snapshots carried beside a summary of ``messages[:start]``."""
    return Attachments(
        constraints=extract_constraints(messages[:start], limit_chars=constraint_chars),
        files=file_snapshots(messages, fmt, start, files=files, file_chars=file_chars),
    )


def summary_message(summary: str, extra: Attachments) -> dict[str, Any]:
    """The one user message standing for the summarized prefix, in every format.

    ``{"role": "user", "content": text}`` is valid as is in the Anthropic Messages API, Chat
    Completions and the Responses API, so the three formats share it. The sections come in the
    order SPEC §11.5 gives: summary, the user's constraints verbatim, file snapshots.
    """
    parts = [
        "This conversation was compacted: the summary below stands for its earlier part.",
        f"<summary>\n{summary}\n</summary>",
    ]
    if extra.constraints:
        lines = "\n".join(extra.constraints)
        parts.append(
            f'<user-constraints note="the user\'s own words">\n{lines}\n</user-constraints>'
        )
    for path, text in extra.files:
        parts.append(
            f'<file path={orjson.dumps(path).decode()} note="{SNAPSHOT_NOTE}">\n{text}\n</file>'
        )
    return {"role": "user", "content": "\n\n".join(parts)}


def project(messages: Sequence[Any], head: int, start: int, summary: dict[str, Any]) -> list[Any]:
    """The copy: the pinned head, the summary message, the retained tail (the caller's objects)."""
    return [*messages[:head], summary, *messages[start:]]


def anchor_of(messages: Sequence[Any], fmt: Format, index: int) -> str:
    """What identifies ``messages[index]`` across requests: a call id it makes or answers, else
    a digest of its content (indices alone shift when a caller edits an earlier message)."""
    scanned = scan_at(fmt, messages, index)
    if scanned.calls:
        return "call:" + scanned.calls[0].call_id
    if scanned.results:
        return "result:" + scanned.results[0].call_id
    return "digest:" + _digest(messages[index])


def resolve_anchor(messages: Sequence[Any], fmt: Format, anchor: str, hint: int) -> int | None:
    """Where the message ``anchor`` names is now: tried at ``hint`` first, then everywhere."""
    order = [hint] if 0 <= hint < len(messages) else []
    order += [i for i in range(len(messages)) if i != hint]
    for i in order:
        if anchor_of(messages, fmt, i) == anchor:
            return i
    return None


def _plain(value: Any) -> Any:
    if is_record(value):
        return to_dict(value)
    raise TypeError(type(value).__name__)


def _digest(message: Any) -> str:
    data = orjson.dumps(
        to_dict(message) if is_record(message) else str(message),
        default=_plain,
        option=orjson.OPT_SORT_KEYS,
    )
    return xxhash.xxh3_128_hexdigest(data)


def render_transcript(messages: Sequence[Any]) -> str:
    """The messages as plain text, one ``[role]`` paragraph per part, in any of the three formats.

    Tool calls show as ``[tool call <id>] name(arguments)``, results as ``[tool result <id>]``
    followed by their text: what a summarizer needs, without the wire format's structure.
    """
    out: list[str] = []
    for message in messages:
        if not is_record(message):
            parts = getattr(message, "parts", None)
            if isinstance(parts, list):  # pydantic-ai's ModelRequest and ModelResponse
                out += [_part(p) for p in parts]
            else:
                out.append(f"[unknown] {message!s}")
            continue
        role = str(field(message, "role") or field(message, "type") or "unknown")
        kind = field(message, "type")
        if kind == "function_call":
            out.append(
                _call(
                    field(message, "call_id"), field(message, "name"), field(message, "arguments")
                )
            )
        elif kind == "function_call_output":
            out.append(
                f"[tool result {field(message, 'call_id')}] {_text(field(message, 'output'))}"
            )
        elif role == "tool":
            out.append(
                f"[tool result {field(message, 'tool_call_id')}] {_text(field(message, 'content'))}"
            )
        else:
            content = field(message, "content")
            if isinstance(content, str):
                out.append(f"[{role}] {content}")
            elif isinstance(content, list):
                out += [_block(role, b) for b in content]
            for tc in field(message, "tool_calls") or []:
                out.append(_call(field(tc, "id"), *_name_args(tc)))
    return "\n".join(p for p in out if p)


def _name_args(tool_call: Any) -> tuple[object, object]:
    """A Chat Completions tool call's function name and arguments; LangChain's ``tool_calls``
    hold them at the top (``name``, ``args``)."""
    fn = field(tool_call, "function")
    if fn is None:
        return field(tool_call, "name"), field(tool_call, "args")
    return field(fn, "name"), field(fn, "arguments")


_PART_ROLES = {"system-prompt": "system", "user-prompt": "user", "text": "assistant"}


def _part(part: Any) -> str:
    """One part of a pydantic-ai message, as the transcript shows it."""
    kind = getattr(part, "part_kind", None)
    if kind == "tool-call":
        return _call(part.tool_call_id, part.tool_name, part.args)
    if kind in ("tool-return", "retry-prompt"):
        return f"[tool result {part.tool_call_id}] {_text(part.content)}"
    role = _PART_ROLES.get(str(kind))
    content = getattr(part, "content", None)
    if role is not None and isinstance(content, str):
        return f"[{role}] {content}"
    return f"[{role or 'part'}] <{kind or 'part'}>"


def _block(role: str, block: Any) -> str:
    if isinstance(block, str):
        return f"[{role}] {block}"
    kind = field(block, "type")
    if kind == "tool_use":
        return _call(field(block, "id"), field(block, "name"), field(block, "input"))
    if kind == "tool_result":
        return f"[tool result {field(block, 'tool_use_id')}] {_text(field(block, 'content'))}"
    text = field(block, "text")
    if isinstance(text, str):
        return f"[{role}] {text}" if text else ""
    # Images, thinking and other parts: named, not rendered (a summary has no use for base64).
    return f"[{role}] <{kind or 'part'}>"


def _call(call_id: object, name: object, arguments: object) -> str:
    args = arguments if isinstance(arguments, str) else _json(arguments)
    return f"[tool call {call_id}] {name}({args})"


def _text(content: object) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [field(p, "text") if is_record(p) else p for p in content]
        return "\n".join(p if isinstance(p, str) else "<part>" for p in parts)
    return _json(content)


def _json(value: object) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return str(value)
