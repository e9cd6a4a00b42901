"""Compaction's pure half: the tail kept, the attachments, the copy projected.

Nothing here calls a model, touches a file or edits a message: the session (``Budget``) asks these
functions where to cut and what the copy is, and records the checkpoint itself
(docs/concepts/compaction.md). The transcript a summarizer reads is
``budget.compaction._transcript``'s (``render_transcript`` re-exported).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import xxhash

from budget._view import Format, Scanned, scan_at
from budget.compaction._constraints import Constraints, constraints_note, extract_constraints
from budget.compaction._transcript import name_args, render_transcript
from budget.formats._common import field, is_record, to_dict

__all__ = [
    "Attachments",
    "Constraints",
    "Tail",
    "anchor_of",
    "attachments",
    "carry_over",
    "constraint_lines",
    "constraints_note",
    "drop_oldest_rounds",
    "extract_constraints",
    "file_snapshots",
    "paired_start",
    "pinned_head",
    "project",
    "render_transcript",
    "resolve_anchor",
    "summary_message",
    "tail_start",
    "tool_names",
]

SNAPSHOT_NOTE = (
    "snapshot taken before the conversation was compacted; the file may have changed since: "
    "re-read it before relying on its exact content"
)
"""The note each file snapshot carries (snapshots may be stale)."""

TOOLS_NOTE = "tools called earlier in this conversation; they are still available"
"""The note of the tool list (the list of available tools)."""


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
    tools: tuple[str, ...] = ()
    """Names of the tools the conversation called, in order of first use (the tool
    list: the request's ``tools`` still define them; this tells the model which it was using)."""


def pinned_head(messages: Sequence[Any]) -> int:
    """How many leading messages are system or developer instructions (Chat, Responses)."""
    i = 0
    while i < len(messages) and field(messages[i], "role") in ("system", "developer"):
        i += 1
    return i


def _answered_calls(scans: Sequence[Scanned]) -> list[int]:
    """Per message, the first message holding a call its results answer (its own index when it
    answers none, or none made before it). A result answers the latest call made with its id
    up to its message: where a server names every turn's call ``call_0``, each result pairs with
    its own turn's call, not with the first turn's."""
    latest: dict[str, int] = {}
    out: list[int] = []
    for i, scanned in enumerate(scans):
        for call in scanned.calls:
            latest[call.call_id] = i
        out.append(min((latest.get(r.call_id, i) for r in scanned.results), default=i))
    return out


def tail_start(
    messages: Sequence[Any],
    fmt: Format,
    *,
    min_tokens: int,
    min_messages: int,
    max_tokens: int,
    tokens: Callable[[Any], int],
) -> Tail:
    """Choose the retained tail from the end (docs/concepts/compaction.md).

    The tail grows backwards until it holds ``min_tokens`` and ``min_messages``, or until the
    next message would take it past ``max_tokens`` (it always holds the last message). Its start
    then moves earlier until no result in it answers a call made before it, past the reasoning
    items a Responses call must be sent with, and to the first of parallel Responses calls
    (whose results may not be in yet): a tail never starts with an orphan, now or later.
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
    answered = _answered_calls([scan_at(fmt, messages, i) for i in range(n)])
    moved = True
    while moved:
        moved = False
        earliest = min(answered[start:], default=start)
        before = field(messages[start - 1], "type") if start > head else None
        if before == "reasoning" or (
            # Parallel Responses calls are items of one turn: a tail never starts between
            # them, or a result arriving later for a call left behind would be an orphan.
            before == "function_call"
            and start < n
            and field(messages[start], "type") == "function_call"
        ):
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


_READ_TOOL_RE = re.compile(
    r"(?i)^(?:read|read_?file|view|view_?file|cat|open_?file|str_replace_based_edit_tool)$"
)
_PATH_KEYS = ("path", "file_path", "filename", "file")


def _calls_with_args(message: Any) -> list[tuple[str, str, Any]]:
    """(call id, tool name, arguments) of the calls ``message`` makes, in any of the formats."""
    out: list[tuple[str, str, Any]] = []
    parts = None if is_record(message) else getattr(message, "parts", None)
    if isinstance(parts, list):  # a pydantic-ai ModelResponse: its ToolCallParts
        for p in parts:
            if getattr(p, "part_kind", None) == "tool-call":
                out.append((str(p.tool_call_id), str(p.tool_name), p.args))
        return out
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
        name, args = name_args(tc)
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
    latest = _latest_reads(messages, fmt)
    before = sorted(
        ((i, path, text) for path, (i, text) in latest.items() if i < start), reverse=True
    )
    return tuple((path, text[:file_chars]) for _, path, text in before[:files])


def _latest_reads(messages: Sequence[Any], fmt: Format) -> dict[str, tuple[int, str]]:
    """Per path read (and answered by a result that is not an error): where, and its text.

    A result answers the latest call before it with its id: servers that name every call
    ``call_0`` reuse a read's id for later calls, whose outputs are not the file's."""
    reads: dict[str, str | None] = {}
    latest: dict[str, tuple[int, str]] = {}
    for i, message in enumerate(messages):
        for r in scan_at(fmt, messages, i).results:
            path = reads.get(r.call_id)
            if path is not None and not r.is_error:
                latest[path] = (i, r.text)
        for call_id, tool, args in _calls_with_args(message):
            reads[call_id] = _path_arg(args) if _READ_TOOL_RE.match(tool) else None
    return latest


def carry_over(
    view: Sequence[Any],
    fmt: Format,
    new: Attachments,
    old: Attachments,
    *,
    files: int,
    file_chars: int,
) -> Attachments:
    """The attachments of a checkpoint made over a compacted ``view``, ``new`` those read from
    it, ``old`` the last checkpoint's. The user's constraints are the last checkpoint's (the
    early user messages they came from are summarized; read from the view now, they would be
    lines of the summary message itself; the compactor reads them again from the caller's
    history where the checkpoint's anchor is found). The tools called accumulate. The file snapshots are
    those the view read before its tail (most recent first), then those the last checkpoint
    carried that the view does not read again: read before everything in the view, they are
    still among the most recently read. At most ``files``, each cut to ``file_chars``."""
    again = _latest_reads(view, fmt)
    kept = [
        *new.files,
        *((path, text[:file_chars]) for path, text in old.files if path not in again),
    ]
    return Attachments(
        old.constraints,
        tuple(kept[:files]) if file_chars else (),
        tuple(dict.fromkeys((*old.tools, *new.tools))),
    )


def tool_names(messages: Sequence[Any]) -> tuple[str, ...]:
    """The names of the tools ``messages`` call, in order of first use, each once."""
    names = (tool for m in messages for _, tool, _ in _calls_with_args(m))
    return tuple(dict.fromkeys(n for n in names if n and n != "None"))


def paired_start(messages: Sequence[Any], fmt: Format, start: int, end: int) -> int:
    """The first message from ``start`` on whose part ``messages[i:end]`` holds no result of a
    call made before it (``end`` when none): the summarizer's transcript never opens on a result
    whose call it does not show (a provider refuses such a request, and the summary would fail)."""
    answered = _answered_calls([scan_at(fmt, messages, i) for i in range(end)])
    first, earliest = end, end
    for i in range(end - 1, start - 1, -1):
        earliest = min(earliest, answered[i])
        if earliest >= i:
            first = i
    return first


def drop_oldest_rounds(
    messages: Sequence[Any], fmt: Format, tokens: Callable[[Any], int], *, share: float = 0.25
) -> int:
    """How many leading messages to drop so at least ``share`` of the tokens go, whole rounds.

    Used when a summary request is refused as too long. The cut never leaves a
    result whose call was dropped at the front (the transcript would name an unknown call); 0
    when no cut is possible (a single round, or nothing past the first message).
    """
    n = len(messages)
    answered = _answered_calls([scan_at(fmt, messages, i) for i in range(n)])
    # earliest[i]: the earliest call answered by a result at or after i (n when none).
    earliest = [n] * (n + 1)
    for i in range(n - 1, -1, -1):
        earliest[i] = min(earliest[i + 1], answered[i])
    goal = sum(tokens(m) for m in messages) * share
    dropped = 0
    for i, message in enumerate(messages):
        if i > 0 and dropped >= goal and earliest[i] >= i:
            return i
        dropped += tokens(message)
    return 0


def attachments(
    messages: Sequence[Any],
    fmt: Format,
    start: int,
    *,
    constraint_chars: int,
    files: int,
    file_chars: int,
    keep: Callable[[str], str | None] | None = None,
    read_tool: str = "toolbudget_read",
    note: bool = True,
) -> Attachments:
    """The constraints and file snapshots carried beside a summary of ``messages[:start]``.

    Constraints that do not fit in ``constraint_chars`` are stored with ``keep`` (it returns
    their ref, or None when they could not be stored) and a last line says how much was left
    out and how to read it with ``read_tool`` (:func:`constraints_note`); ``note=False`` (the
    section turned off by a setting of 0) carries none.
    """
    return Attachments(
        constraints=constraint_lines(
            messages[:start], constraint_chars, keep=keep, read_tool=read_tool, note=note
        ),
        files=file_snapshots(messages, fmt, start, files=files, file_chars=file_chars),
        tools=tool_names(messages),
    )


def constraint_lines(
    messages: Sequence[Any],
    constraint_chars: int,
    *,
    keep: Callable[[str], str | None] | None = None,
    read_tool: str = "toolbudget_read",
    note: bool = True,
) -> tuple[str, ...]:
    """The user's constraints in ``messages`` as a summary message carries them: those that
    fit in ``constraint_chars``, then (with ``note``) the line saying how much was left out and
    the ref ``keep`` stored it at (see :func:`attachments`)."""
    found = extract_constraints(messages, limit_chars=constraint_chars)
    if not (found.left_out and note):
        return found.shown
    ref = None if keep is None else keep(found.full)
    return (*found.shown, constraints_note(found.left_out, ref, read_tool))


def summary_message(summary: str, extra: Attachments) -> dict[str, Any]:
    """The one user message standing for the summarized prefix, in every format.

    ``{"role": "user", "content": text}`` is valid as is in the Anthropic Messages API, Chat
    Completions and the Responses API, so the three formats share it. The sections come in the
    order docs/concepts/compaction.md gives: summary, the user's constraints verbatim, file
    snapshots, the tools.
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
    if extra.tools:
        parts.append(f'<tools note="{TOOLS_NOTE}">\n{", ".join(extra.tools)}\n</tools>')
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
    """Where the message ``anchor`` names is now: tried at ``hint`` first, then outwards from it.

    Nearest first: a digest anchor of a message whose content repeats names every copy, and
    the one nearest where it was is the one meant (histories grow at the end).
    """
    n = len(messages)
    pivot = min(max(hint, 0), n)
    # Lazily, nearest first: the hint almost always holds, and then nothing else is digested.
    order = (
        i
        for d in range(n + 1)
        for i in ((pivot - d, pivot + d) if d else (pivot,))
        if 0 <= i < n and (d == 0 or i != pivot)
    )
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
