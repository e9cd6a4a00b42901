"""What counts as a quote of a tool result's line: the one rule the cost policy learns its
read-back rate by (``budget.session._quotes``) and the benchmark charges read-backs by
(``benchmarks/readbacks.py``), so that what the policy learns is what it is billed for.

A line is quotable when, stripped, it has at least :data:`MIN_QUOTE_CHARS` characters (shorter
ones recur by chance in code and logs). A numbered view of a file (Claude Code's ``Read``:
``     12→code``; ``cat -n``, ``nl``, OpenHands' editor: ``     12<TAB>code``) is quoted without
its line numbers: an edit's old text, or a remark on line 12, quotes ``code``; so the number
gutter is not part of the line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = ["MIN_QUOTE_CHARS", "quotable", "without_gutter"]

MIN_QUOTE_CHARS = 30
"""The shortest stripped line that counts as a quote."""

_GUTTER = re.compile(r"^[ \t]*\d+(?:→|\t)", re.MULTILINE)
"""A line number and its separator at the start of a line: Claude Code's ``Read`` (``→``) and
``cat -n`` / ``nl`` / OpenHands' editor views (a tab)."""


def without_gutter(text: str) -> str:
    """``text`` without the line numbers of its numbered lines (a view may follow a header, or
    share a message with other results); a text with neither separator as it is (two scans
    in C, where the substitution takes ~40 µs for 8 kB)."""
    if "→" not in text and "\t" not in text:
        return text
    return _GUTTER.sub("", text)


def quotable(text: str) -> Iterator[str]:
    """The stripped lines of ``text`` (without a numbered view's gutter) long enough to count
    as a quote."""
    for line in without_gutter(text).splitlines():
        if len(line) >= MIN_QUOTE_CHARS:
            stripped = line.strip()
            if len(stripped) >= MIN_QUOTE_CHARS:
                yield stripped
