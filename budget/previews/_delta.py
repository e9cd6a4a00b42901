"""Re-run deltas: a line diff of a result against an earlier result, and its exact application.

The diff is a unified diff without context lines (``@@ -a,b +c,d @@`` hunks of ``-`` and ``+``
lines): the smallest text that says what changed. A line without a final newline is followed by
``\\ No newline at end of file``, as ``diff -u`` writes it, so applying the delta to the earlier
text gives the new text exactly (:func:`apply_delta`; a hypothesis property checks it).
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from itertools import accumulate
from typing import Final

from budget._errors import InputError

__all__ = ["apply_delta", "line_delta"]

NO_NEWLINE: Final = "\\ No newline at end of file"
_HUNK: Final = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@$")


def _split_nl(text: str) -> list[str]:
    """Lines split at ``\n`` only, each keeping it (the last may lack it)."""
    if not text:
        return []
    parts = text.split("\n")
    last = parts.pop()
    out = [p + "\n" for p in parts]
    if last:
        out.append(last)
    return out


def _lines(text: str) -> int:
    """``len(_split_nl(text))``, counted without splitting."""
    return text.count("\n") + (not text.endswith("\n") and bool(text))


def _emit(out: list[str], mark: str, line: str) -> None:
    if line.endswith("\n"):
        out.append(mark + line[:-1])
    else:
        out.append(mark + line)
        out.append(NO_NEWLINE)


def _range(start: int, n: int) -> str:
    # diff -u numbers an empty range by the line before it.
    return f"{start + 1 if n else start},{n}"


MATCH_WORK: Final = 3_000_000
"""Most steps the longest-match searches of a diff may take (a step: one candidate pair of
equal lines looked at, or one line of a searched range). ``difflib``'s matcher is quadratic
on repeated lines: the re-run of a 40,000-line log of alternating ``PASSED``/``ok`` lines took
85 s before this bound (10,000 lines: 5 s), on the request path. A diff that would take more is
not computed and the re-run gets its own preview. The bound is the work of that log at 2,000
lines (0.2 s, measured in this session on the project's 2-core machine), which version 1
diffed before: below it the diff is ``difflib``'s, line for line, so version-1 previews keep
their bytes."""


def _changes(a: list[str], b: list[str]) -> list[tuple[int, int, int, int]] | None:
    """The non-equal ranges ``(i1, i2, j1, j2)`` of ``difflib.SequenceMatcher(None, a, b,
    autojunk=False).get_opcodes()``, in order, or None once :data:`MATCH_WORK` would be passed.

    The loop is ``get_matching_blocks``' own (CPython 3.11-3.13 ``Lib/difflib.py``), with each
    ``find_longest_match`` call charged before it runs: that search visits, for each line of
    its ``a`` range, every position of that line in ``b`` (it skips those before its ``b``
    range one by one), so its cost is known from a prefix sum of those counts."""
    in_b = Counter(b)
    visits = [0, *accumulate(in_b[line] for line in a)]
    if visits[-1] + len(a) + len(b) > MATCH_WORK:
        return None  # the first search alone would pass the bound: no index of ``b`` built
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    work = 0
    queue = [(0, len(a), 0, len(b))]
    blocks: list[tuple[int, int, int]] = []
    while queue:
        alo, ahi, blo, bhi = queue.pop()
        work += visits[ahi] - visits[alo] + (ahi - alo) + (bhi - blo)
        if work > MATCH_WORK:
            return None
        i, j, k = sm.find_longest_match(alo, ahi, blo, bhi)
        if k:
            blocks.append((i, j, k))
            if alo < i and blo < j:
                queue.append((alo, i, blo, j))
            if i + k < ahi and j + k < bhi:
                queue.append((i + k, ahi, j + k, bhi))
    blocks.sort()
    blocks.append((len(a), len(b), 0))
    out: list[tuple[int, int, int, int]] = []
    i = j = 0
    for ai, bj, size in blocks:
        # Adjacent blocks need no merging here: only the ranges between them are wanted.
        if i < ai or j < bj:
            out.append((i, ai, j, bj))
        i, j = ai + size, bj + size
    return out


def line_delta(old: str, new: str, *, limit: int | None = None) -> str | None:
    """The hunks turning ``old`` into ``new``, one line each; None once longer than ``limit``."""
    if limit is not None and abs(len(new) - len(old)) > limit:
        return None  # the diff holds at least the characters one side has more of: no split
    if _lines(old) + _lines(new) > MATCH_WORK:
        # The matcher's first search alone is charged both texts' lines: counted at C speed,
        # the refusal costs no split, count or index of millions of lines (2.4 s for 5 million).
        return None
    a, b = _split_nl(old), _split_nl(new)
    if limit is not None:
        # A floor on the diff's size in one linear pass: the lines one side has more of than
        # the other must all appear in it. Over the limit, the quadratic matcher is not run.
        ca, cb = Counter(a), Counter(b)
        floor = sum((len(x) + 1) * n for x, n in (ca - cb).items())
        floor += sum((len(x) + 1) * n for x, n in (cb - ca).items())
        if floor > limit:
            return None
    changes = _changes(a, b)
    if changes is None:
        return None
    out: list[str] = []
    size = 0
    for i1, i2, j1, j2 in changes:
        start = len(out)
        out.append(f"@@ -{_range(i1, i2 - i1)} +{_range(j1, j2 - j1)} @@")
        for line in a[i1:i2]:
            _emit(out, "-", line)
        for line in b[j1:j2]:
            _emit(out, "+", line)
        size += sum(len(x) + 1 for x in out[start:])
        if limit is not None and size > limit:
            return None
    return "\n".join(out)


def apply_delta(old: str, delta: str) -> str:
    """``old`` with the hunks of ``delta`` (from :func:`line_delta`) applied."""
    a = _split_nl(old)
    out: list[str] = []
    pos = 0
    rows = delta.split("\n") if delta else []
    k = 0
    while k < len(rows):
        m = _HUNK.match(rows[k])
        if m is None:
            raise InputError(f"delta line {k + 1} is not a hunk header: {rows[k][:80]!r}")
        old_start, old_n = int(m.group(1)), int(m.group(2) or "1")
        first = old_start - 1 if old_n else old_start
        out.extend(a[pos:first])
        pos = first + old_n
        k += 1
        added: list[str] = []
        while k < len(rows) and not rows[k].startswith("@@ "):
            row = rows[k]
            nl_missing = k + 1 < len(rows) and rows[k + 1] == NO_NEWLINE
            if row.startswith("+"):
                added.append(row[1:] + ("" if nl_missing else "\n"))
            k += 2 if nl_missing else 1
        out.extend(added)
    out.extend(a[pos:])
    return "".join(out)
