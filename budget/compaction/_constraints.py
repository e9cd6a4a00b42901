"""The user's constraints a compaction carries verbatim beside its summary
(docs/concepts/compaction.md).

The goal and the lines stating a rule, a format, a path or a command, from the first user
messages, as written, up to a limit: the line where it falls is cut at a word boundary, and what
is left out is counted for a note saying how much and where to read it (issue 28, item 5).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from budget.formats._common import field, is_record

__all__ = ["Constraints", "constraints_note", "extract_constraints"]

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


@dataclass(frozen=True, slots=True)
class Constraints:
    """The user's constraint lines as a summary message carries them, and what did not fit."""

    shown: tuple[str, ...] = ()
    """The lines carried, verbatim; the last one may be cut (at a word boundary when it has
    one) where the limit falls."""
    left_out: int = 0
    """Characters of the constraint lines not carried (0 when all of them are)."""
    full: str = ""
    """Every constraint line, one per line: what a note about the rest points to."""


def _cut(line: str, room: int) -> str:
    """``line``'s first ``room`` characters at most, cut after its last word that fits (mid-word
    only when no word boundary is in reach), trailing whitespace removed."""
    if len(line) <= room:
        return line
    head = line[: room + 1]  # a space just past the room is a boundary too
    at = max(head.rfind(" "), head.rfind("\t"))
    return (line[:at] if at > 0 else line[:room]).rstrip()


def extract_constraints(
    messages: Sequence[Any], *, limit_chars: int, first: int = 3
) -> Constraints:
    """The user's key constraints, verbatim, from the first ``first`` user messages with text.

    The first line of the first message is the goal and always comes first; then each line that
    states a requirement, a prohibition, a format, a path or a command (a cue word, a code span,
    a path), as written (only surrounding whitespace removed), once. They are carried in order
    up to ``limit_chars``: the line where the limit falls is cut at a word boundary, and what
    is left out is counted (:attr:`Constraints.left_out`), never dropped silently (issue 28).
    """
    texts = [t for m in messages for t in _user_texts(m)][:first]
    lines = [ln.strip() for t in texts for ln in t.splitlines()]
    lines = [ln for ln in lines if ln]
    picked: list[str] = []
    if lines:
        picked.append(lines[0])
    picked += [ln for ln in lines[1:] if _CONSTRAINT_RE.search(ln)]
    picked = list(dict.fromkeys(picked))
    out: list[str] = []
    used = 0
    for ln in picked:
        part = _cut(ln, limit_chars - used)
        if part:
            out.append(part)
            used += len(part)
        if len(part) < len(ln):
            break
    total = sum(len(ln) for ln in picked)
    return Constraints(tuple(out), total - used, "\n".join(picked))


def constraints_note(left_out: int, ref: str | None, read_tool: str) -> str:
    """The line standing for ``left_out`` characters of the user's constraints not carried:
    how many, and where to read them (the stored ``ref``, else that they could not be kept)."""
    said = f"[{left_out:,} more characters of the user's constraints are not shown here"
    if ref is None:
        return said + "; they could not be stored to read back: ask the user if they matter]"
    return said + f'; read them in full with the {read_tool} tool: {{"ref": "{ref}"}}]'
