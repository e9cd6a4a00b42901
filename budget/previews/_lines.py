"""Line-based previews: pick line ranges by priority within a budget, render them numbered.

Every line shape (errors, tables, diffs, NDJSON) is a list of line ranges in priority order; the
picker takes them greedily while the rendered preview fits, and the renderer shows them in line
order, each block under a ``--- lines a–b ---`` header, so the model knows where every shown line
sits and which ranges to read back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Picker", "Shaped", "gaps", "render_blocks", "span_text"]

BLOCK_HEADER_CHARS = 32
"""Room one block header takes at most (``--- lines 1,234,567–1,234,999 ---`` is 31 characters):
charged whenever a picked line starts a new block, so the rendered preview never exceeds the
budget the picker was given (merged blocks only make it shorter)."""
LINE_SHARE = 4
"""One line shows at most a quarter of the budget: a minified line must not take a whole preview
(the rest of the line is left out, marked with an ellipsis and the characters cut)."""


@dataclass(frozen=True, slots=True)
class Shaped:
    """A preview of one shape: its body and the 1-based, inclusive line ranges it leaves out."""

    shape: str
    body: str
    left_out: tuple[tuple[int, int], ...]
    note: str = ""
    """What else the shape says about the text (a row count, a record count, the earlier ref)."""
    left_chars: int | None = None
    """Characters the preview leaves out, where the shape counts them (a head and a tail: all
    that lies between them); None where it does not."""


def span_text(ranges: Iterable[tuple[int, int]]) -> str:
    """``1–3, 7, 9–12``: 1-based inclusive ranges as a model reads them."""
    return ", ".join(f"{a:,}" if a == b else f"{a:,}–{b:,}" for a, b in ranges)


def gaps(shown: Sequence[int], total: int) -> tuple[tuple[int, int], ...]:
    """The 1-based inclusive ranges of lines ``1..total`` not in sorted 1-based ``shown``."""
    out: list[tuple[int, int]] = []
    prev = 0
    for n in shown:
        if n > prev + 1:
            out.append((prev + 1, n - 1))
        prev = n
    if prev < total:
        out.append((prev + 1, total))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Window:
    """The lines a shape looks at: all of a text's, or (a long text) those of its first and its
    last :data:`WINDOW_CHARS` characters, numbered as in the whole text."""

    lines: Sequence[str]
    total: int
    """Lines of the whole text."""
    tail_at: int | None = None
    """Index in ``lines`` where the last window's lines start (None: ``lines`` is every line)."""
    cut: tuple[tuple[int, int], ...] = ()
    """(index in ``lines``, length in the whole text) of each line a window holds only the
    start of (a line longer than the window)."""

    def length(self, i: int) -> int:
        """Characters of ``lines[i]`` in the whole text."""
        return next((n for k, n in self.cut if k == i), len(self.lines[i]))

    def number(self, i: int) -> int:
        """The 1-based line number of ``lines[i]`` in the whole text."""
        if self.tail_at is None or i < self.tail_at:
            return i + 1
        return self.total - (len(self.lines) - i) + 1


class Picker:
    """Chooses lines of ``lines`` (without their newlines) while the preview fits ``budget``."""

    __slots__ = ("_line_chars", "budget", "lines", "shown", "used", "window")

    def __init__(self, lines: Sequence[str] | Window, budget: int) -> None:
        self.window = lines if isinstance(lines, Window) else Window(lines, len(lines))
        self.lines = self.window.lines
        self.budget = budget
        self.used = 0
        self.shown: set[int] = set()
        self._line_chars = max(budget // LINE_SHARE, 40)

    def shown_line(self, i: int) -> str:
        """Line ``i`` as the preview shows it (cut when it is over a quarter of the budget)."""
        line = self.lines[i]
        # The whole line's length: a window may hold only its start, and the count must say
        # what a read-back of the line would add.
        full = self.window.length(i)
        if full <= self._line_chars:
            return line
        shown = line[: self._line_chars]
        return f"{shown}… [{full - len(shown):,} more characters]"

    def cost(self, i: int) -> int:
        """Characters line ``i`` adds to the preview, with a block header if it starts one."""
        c = len(self.shown_line(i)) + 1
        if not (self._joins(i - 1, i) and i - 1 in self.shown) and not (
            self._joins(i, i + 1) and i + 1 in self.shown
        ):
            c += BLOCK_HEADER_CHARS
        return c

    def _joins(self, i: int, j: int) -> bool:
        """Whether lines ``i`` and ``j = i + 1`` are consecutive in the whole text."""
        at = self.window.tail_at
        return at is None or j != at or self.window.number(j) == self.window.number(i) + 1

    def take(self, i: int) -> bool:
        """Show line ``i`` if it fits; whether it is shown."""
        if i in self.shown:
            return True
        if not 0 <= i < len(self.lines):
            return False
        c = self.cost(i)
        if self.used + c > self.budget:
            return False
        self.used += c
        self.shown.add(i)
        return True

    def take_range(self, a: int, b: int, *, limit: int | None = None) -> int:
        """Show lines ``a..b-1`` in order until one does not fit (or ``limit`` characters are
        spent by this call); how many were newly shown."""
        start, n = self.used, 0
        for i in range(max(a, 0), min(b, len(self.lines))):
            if i in self.shown:
                continue
            if limit is not None and self.used - start + self.cost(i) > limit:
                break
            if not self.take(i):
                break
            n += 1
        return n

    def take_back(self, a: int, b: int, *, limit: int | None = None) -> int:
        """Show lines ``b-1`` down to ``a`` until one does not fit; how many were newly shown."""
        start, n = self.used, 0
        for i in range(min(b, len(self.lines)) - 1, max(a, 0) - 1, -1):
            if i in self.shown:
                continue
            if limit is not None and self.used - start + self.cost(i) > limit:
                break
            if not self.take(i):
                break
            n += 1
        return n

    def render(self, shape: str, note: str = "") -> Shaped:
        """The picked lines in line order, one header per block, and the ranges left out."""
        order = sorted(self.shown)
        w = self.window
        body = render_blocks(order, self.shown_line, w.number)
        return Shaped(shape, body, gaps([w.number(i) for i in order], w.total), note)


def render_blocks(
    order: Sequence[int], get: Callable[[int], str], number: Callable[[int], int]
) -> str:
    """Lines ``order`` (sorted) rendered as blocks of consecutive line numbers (``number(i)``,
    1-based), each under its header; ``get(i)`` gives line ``i``."""
    out: list[str] = []
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and number(order[j + 1]) == number(order[j]) + 1:
            j += 1
        a, b = number(order[i]), number(order[j])
        out.append(f"--- line {a:,} ---" if a == b else f"--- lines {a:,}–{b:,} ---")
        out.extend(get(k) for k in order[i : j + 1])
        i = j + 1
    return "\n".join(out)
