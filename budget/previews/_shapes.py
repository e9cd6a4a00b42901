"""The preview of each shape, within a budget of characters (markers and headers included).

The shares and line counts below are design choices, not fitted to any recorded output: the
summary and the failure lines take at most a quarter of the preview each, so the tail keeps at
least what head + tail gives it (half, or three quarters for an error result) of the rest.
"""

from __future__ import annotations

import json
from typing import Any, Final

from budget.previews._detect import _HUNK, Shape, classify, is_md_separator, marks
from budget.previews._json import LADDER, indented, skeleton
from budget.previews._lines import Picker, Shaped, Window

__all__ = ["shape_preview"]


def _n(k: int, word: str) -> str:
    return f"{k:,} {word}" if k == 1 else f"{k:,} {word}s"


SUMMARY_SHARE: Final = 0.25
"""Most of the budget summary lines take (pytest's short summary can list every failed test)."""
FAILURE_SHARE: Final = 0.25
"""Most of the budget the failure lines themselves take, before their context and the tail."""
CONTEXT_AFTER: Final = 6
"""Lines shown after a failure line (a traceback's frames, a compiler's ``-->`` and caret)."""


def _errors(view: str, w: Window, budget: int, tail_share: float) -> Shaped:
    lines = w.lines
    p = Picker(w, budget)
    summary, failures = marks(view)
    for i in summary:
        if not p.take_range(i, i + 1, limit=int(budget * SUMMARY_SHARE) - p.used):
            break
    spent = p.used
    taken: list[int] = []
    for i in failures:
        if p.used - spent + p.cost(i) > budget * FAILURE_SHARE or not p.take(i):
            break
        taken.append(i)
    # The tail next (exit codes, the last error), then the first failures' context, then more.
    p.take_back(0, len(lines), limit=int((budget - p.used) * tail_share))
    for i in taken:
        p.take_range(i + 1, i + 1 + CONTEXT_AFTER)
    p.take_back(0, len(lines))
    p.take_range(0, len(lines))
    n_fail = len(failures)
    found = f"{_n(n_fail, 'failure or error line')}, {_n(len(summary), 'summary line')}"
    return p.render("errors", found + _windowed(w))


def _windowed(w: Window) -> str:
    """What a count of a windowed text covers."""
    return "" if w.tail_at is None else f" in its first and last {WINDOW_CHARS // 1024} KB"


def _table(w: Window, budget: int, tail_share: float) -> Shaped:
    lines = w.lines
    p = Picker(w, budget)
    first = next((i for i, line in enumerate(lines) if line.strip()), 0)
    head = first + 2 if first + 1 < len(lines) and is_md_separator(lines[first + 1]) else first + 1
    p.take_range(first, head)
    rows = sum(1 for i in range(head, len(lines)) if lines[i].strip())
    if w.tail_at is not None:  # the lines between the windows are rows too (blank or not)
        rows += w.number(w.tail_at) - w.tail_at - 1
    body_budget = budget - p.used
    p.take_range(head, len(lines), limit=int(body_budget * (1 - tail_share)))
    p.take_back(head, len(lines))
    p.take_range(head, len(lines))
    return p.render("table", f"{_n(rows, 'row')} under a {head - first}-line header")


INDEX_SHARE: Final = 0.5
"""Most of the budget a diff's index (its files and hunk headers, with their line numbers)
takes; the rest shows the hunks from both ends."""


def _diff(w: Window, budget: int, tail_share: float) -> Shaped:
    lines = w.lines
    files = [i for i, line in enumerate(lines) if line.startswith(("diff ", "Index: "))]
    if not files:
        files = [i for i, line in enumerate(lines) if line.startswith("+++ ")]
    hunks = [i for i, line in enumerate(lines) if line.startswith("@@ ") and _HUNK.match(line)]
    # The index: one short row per file and hunk, numbered, instead of scattered one-line
    # blocks (each would cost a block header of its own).
    rows = ["--- files and hunks (line: header) ---"]
    used = len(rows[0]) + 1
    listed = 0
    picked: list[int] = []
    # Every file first (the file list), then the hunk headers, while the index has room.
    for i in (*files, *hunks):
        row = f"{w.number(i):,}: {lines[i][:120]}"
        if used + len(row) + 1 > budget * INDEX_SHARE:
            break
        picked.append(i)
        used += len(row) + 1
        listed += 1
    rows += [f"{w.number(i):,}: {lines[i][:120]}" for i in sorted(picked)]
    if listed < len(files) + len(hunks):
        more = f"(and {len(files) + len(hunks) - listed:,} more: grep '^(diff |@@ )')"
        rows.append(more)
        used += len(more) + 1
    p = Picker(w, budget - used)
    # Then the hunks from both ends, as head + tail would cut them: the last file's change is
    # as likely to be the one asked about as the first's.
    p.take_range(0, len(lines), limit=int(p.budget * (1 - tail_share)))
    p.take_back(0, len(lines))
    p.take_range(0, len(lines))
    shaped = p.render("diff", f"{_n(len(files), 'file')}, {_n(len(hunks), 'hunk')}")
    return Shaped("diff", "\n".join(rows) + "\n" + shaped.body, shaped.left_out, shaped.note)


def _ndjson(w: Window, budget: int, tail_share: float) -> Shaped:
    lines = w.lines
    p = Picker(w, budget)
    p.take_range(0, len(lines), limit=int(budget * (1 - tail_share)))
    p.take_back(0, len(lines))
    p.take_range(0, len(lines))
    records = sum(1 for line in lines if line.strip())
    if w.tail_at is not None:  # the lines between the windows are records too
        records += w.number(w.tail_at) - w.tail_at - 1
    return p.render("ndjson", f"{_n(records, 'record')}, one per line")


def _json(value: Any, budget: int) -> Shaped | None:
    for lim in LADDER:
        kept = skeleton(value, lim)
        body = indented(kept)
        if len(body) <= budget:
            # A document spilled for its indentation alone is shown whole: the note must not
            # send the model to read back what it already has. (The skeleton shares its
            # leaves, so a NaN compares equal to itself, and a cut one differs at its first cut.)
            if kept == value:
                return Shaped("json", body, (), "the whole document (valid JSON), re-indented")
            return Shaped("json", body, (), "a skeleton (valid JSON): items and characters cut")
    return None


WINDOW_CHARS: Final = 65_536
"""A text longer than twice this is shaped from its first and its last this-many characters
(whole lines, numbered as in the whole text): the shape's cost stays flat however large the
output (docs/performance.md: new output is processed at 1 GB/s or more), and what lies between
is left out anyway. The JSON skeleton is the exception: it parses the whole document (up to
:data:`budget.previews._detect.JSON_CHARS`)."""


def _window(text: str, newlines: int | None, split: list[str] | None = None) -> tuple[str, Window]:
    """(the text a shape's detectors read, the lines its preview picks from); ``split``:
    ``text.split("\\n")`` when the caller has split it (taken over, not copied)."""
    if len(text) <= 2 * WINDOW_CHARS:
        lines = text.split("\n") if split is None else split
        if text.endswith("\n"):
            lines.pop()  # a final newline ends the last line; it does not start another
        return text, Window(lines, len(lines))
    nl = text.count("\n") if newlines is None else newlines
    total = nl + (0 if text.endswith("\n") else 1)
    head = text[:WINDOW_CHARS]
    cut = head.rfind("\n")
    head_lines = head[:cut].split("\n") if cut >= 0 else [head]
    long_lines: list[tuple[int, int]] = []
    if cut < 0:  # the first line is longer than the window: the window holds its start
        first_end = text.find("\n")
        long_lines.append((0, first_end if first_end >= 0 else len(text)))
    tail = text[-WINDOW_CHARS:].removesuffix("\n")
    nl = tail.find("\n")
    if nl >= 0:
        tail_lines = tail[nl + 1 :].split("\n")
    else:
        # The last line is longer than the window: its start, not a piece of its middle shown
        # as if it began the line (or nothing more, when it is the first line too).
        end = len(text) - text.endswith("\n")
        start = text.rfind("\n", 0, end) + 1
        tail_lines = [text[start : min(end, start + WINDOW_CHARS)]] if start else []
        if start:
            long_lines.append((len(head_lines), end - start))
    lines = [*head_lines, *tail_lines]
    window = Window(lines, total, tail_at=len(head_lines), cut=tuple(long_lines))
    return "\n".join(lines), window


def shape_preview(
    text: str,
    budget: int,
    *,
    tail_share: float,
    shape: Shape | None = None,
    newlines: int | None = None,
    split: list[str] | None = None,
) -> Shaped | None:
    """The preview of ``text`` in its shape (detected unless given) within ``budget``
    characters; None for head + tail (the envelope's own), or when the shape does not fit.
    ``newlines``: ``text.count("\\n")`` when the caller has counted; ``split``:
    ``text.split("\\n")`` when it has split (a list this function may change)."""
    view, w = _window(text, newlines, split)
    if shape is None:
        kind, value = classify(view, w.lines, whole=text)
    else:
        kind, value = shape, None
    if kind == "json":
        if value is None:
            try:
                value = json.loads(text)
            except (ValueError, RecursionError):  # RecursionError: deeper than Python parses
                return None
        return _json(value, budget)
    if kind == "errors":
        shaped = _errors(view, w, budget, tail_share)
    elif kind == "table":
        shaped = _table(w, budget, tail_share)
    elif kind == "diff":
        shaped = _diff(w, budget, tail_share)
    elif kind == "ndjson":
        shaped = _ndjson(w, budget, tail_share)
    else:
        return None
    return shaped if shaped.body and len(shaped.body) <= budget else None
