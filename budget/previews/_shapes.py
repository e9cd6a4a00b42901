"""The preview of each shape, within a budget of characters (markers and headers included)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

from budget.previews._detect import _HUNK, _MD_SEP, Shape, detect, is_failure, is_summary
from budget.previews._json import LADDER, skeleton_text
from budget.previews._lines import Picker, Shaped

__all__ = ["shape_preview"]

SUMMARY_SHARE: Final = 0.25
"""Most of the budget summary lines take (pytest's short summary can list every failed test)."""
FAILURE_SHARE: Final = 0.25
"""Most of the budget the failure lines themselves take, before their context and the tail."""
CONTEXT_LINES: Final = 6
"""Lines shown after a failure line (pytest's ``E`` lines, a compiler's ``-->`` and caret)."""
_DIFF_HEADER: Final = ("diff ", "--- ", "+++ ", "Index: ", "index ", "new file", "deleted file")


def _errors(lines: Sequence[str], budget: int, tail_share: float) -> Shaped:
    p = Picker(lines, budget)
    summary = [i for i, line in enumerate(lines) if is_summary(line)]
    failures = [i for i, line in enumerate(lines) if is_failure(line) and i not in summary]
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
        p.take_range(i + 1, i + 1 + CONTEXT_LINES)
    p.take_back(0, len(lines))
    p.take_range(0, len(lines))
    n_fail = len(failures)
    return p.render("errors", f"{n_fail:,} failure or error lines, {len(summary):,} summary lines")


def _table(lines: Sequence[str], budget: int, tail_share: float) -> Shaped:
    p = Picker(lines, budget)
    first = next((i for i, line in enumerate(lines) if line.strip()), 0)
    head = first + 2 if first + 1 < len(lines) and _MD_SEP.match(lines[first + 1]) else first + 1
    p.take_range(first, head)
    rows = [i for i in range(head, len(lines)) if lines[i].strip()]
    body_budget = budget - p.used
    p.take_range(head, len(lines), limit=int(body_budget * (1 - tail_share)))
    p.take_back(head, len(lines))
    p.take_range(head, len(lines))
    return p.render("table", f"{len(rows):,} rows under a {head - first}-line header")


def _diff(lines: Sequence[str], budget: int) -> Shaped:
    p = Picker(lines, budget)
    files = [i for i, line in enumerate(lines) if line.startswith(_DIFF_HEADER)]
    hunks = [i for i, line in enumerate(lines) if _HUNK.match(line)]
    for i in sorted({*files, *hunks}):
        if not p.take(i):
            break
    p.take_range(0, len(lines))
    n_files = sum(1 for i in files if lines[i].startswith(("diff ", "Index: "))) or sum(
        1 for i in files if lines[i].startswith("+++ ")
    )
    return p.render("diff", f"{n_files:,} files, {len(hunks):,} hunks")


def _ndjson(lines: Sequence[str], budget: int, tail_share: float) -> Shaped:
    p = Picker(lines, budget)
    p.take_range(0, len(lines), limit=int(budget * (1 - tail_share)))
    p.take_back(0, len(lines))
    p.take_range(0, len(lines))
    records = sum(1 for line in lines if line.strip())
    return p.render("ndjson", f"{records:,} records, one per line")


def _json(text: str, budget: int) -> Shaped | None:
    value = json.loads(text)
    for lim in LADDER:
        body = skeleton_text(value, lim)
        if len(body) <= budget:
            return Shaped("json", body, (), "a skeleton (valid JSON): items and characters cut")
    return None


def shape_preview(
    text: str, budget: int, *, tail_share: float, shape: Shape | None = None
) -> Shaped | None:
    """The preview of ``text`` in its shape (detected unless given) within ``budget``
    characters; None for head + tail (the envelope's own), or when the shape does not fit."""
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()  # a final newline ends the last line; it does not start another
    kind = detect(text, lines) if shape is None else shape
    if kind == "json":
        return _json(text, budget)
    if kind == "errors":
        shaped = _errors(lines, budget, tail_share)
    elif kind == "table":
        shaped = _table(lines, budget, tail_share)
    elif kind == "diff":
        shaped = _diff(lines, budget)
    elif kind == "ndjson":
        shaped = _ndjson(lines, budget, tail_share)
    else:
        return None
    return shaped if shaped.body and len(shaped.body) <= budget else None
