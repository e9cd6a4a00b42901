"""The line index of the read-back evidence: which result holds a quoted line (its latest holder).

Keys are the hashes of the results' stripped lines (without a numbered view's gutter), so the
index holds no text; a later holder of a line replaces an earlier one, since a quote is charged
to the latest (``budget.session._quotes``). A request's few fresh results are indexed at the
next request, once decided, and only while a quote could still be charged to a result
(:meth:`LineIndex.settle`); until then a quote is checked against them
(:meth:`LineIndex.held_by_deferred`). A history's results noted at once (a resume, a rebuild)
are indexed at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from budget._quoting import without_gutter
from budget._view import ToolResult

__all__ = ["DEFER_MAX", "LineIndex"]

DEFER_MAX = 16
"""Fresh results of a request indexed at the next request (see :meth:`LineIndex.add`); a
request bringing more (a first request, a rebuilt history) indexes them at once."""


class LineIndex:
    """Per hash of a stripped line, the call id of the latest result holding it, and the last
    request's fresh results not indexed yet."""

    def __init__(self) -> None:
        self._index: dict[int, str] = {}
        self._deferred: list[ToolResult] = []
        """The last request's fresh results, indexed once their decisions are known."""

    def __bool__(self) -> bool:
        return bool(self._index)

    def get(self, line: str) -> str | None:
        """The call id of the latest indexed result holding ``line`` (stripped), if any."""
        return self._index.get(hash(line))

    def add(self, new: Sequence[ToolResult], *, undecided: bool) -> None:
        """Index ``new`` (in history order), or keep them for :meth:`settle` when they are a
        request's few fresh results (``undecided``: none has a decision yet)."""
        if undecided and len(new) <= DEFER_MAX:
            self._deferred = list(new)
        else:
            for r in new:
                self._index_lines(r)

    def settle(self, chargeable: Callable[[], bool]) -> None:
        """Index the last request's fresh results, now decided, where a quote of a line they
        hold could still be charged (``chargeable()``: a weighed result is kept whole or not
        decided yet). Otherwise their lines are left out: the latest holder of each is one of
        them or a later result, or an earlier one that can never be charged again (a hidden one
        stays so until :meth:`reset`); a lookup finds an uncharged holder either way."""
        deferred, self._deferred = self._deferred, []
        if deferred and chargeable():
            for r in deferred:
                self._index_lines(r)

    def held_by_deferred(self, line: str) -> bool:
        """Whether a fresh result not indexed yet holds ``line`` (stripped, without a gutter):
        the latest holder then, not decided when its request looks, so never charged."""
        return any(
            line in r.text and line in map(str.strip, without_gutter(r.text).splitlines())
            for r in self._deferred
        )

    def reset(self) -> None:
        """Forget every line and the deferred results (the history is rescanned)."""
        self._index, self._deferred = {}, []

    def _index_lines(self, r: ToolResult) -> None:
        """Index every stripped line of ``r``, short ones too: they are never looked up (answers
        are searched for quotable lines only), and leaving them in takes no Python step per line
        (splitting, stripping, hashing and the update run in C: ~25 µs of CPU for a 7 kB,
        120-line result)."""
        lines = without_gutter(r.text).splitlines()
        self._index.update(dict.fromkeys(map(hash, map(str.strip, lines)), r.call_id))
