"""Read-back evidence from the results the session kept: would their previews have done?

A session that hides nothing learns nothing from read-backs, so the cost policy's chance that a
spilled result is read back would stay at its prior for as long as that prior keeps it from
spilling. Every result the cost model weighed and kept whole is evidence too: the agent saw it
all, and its later answers show whether it needed more than the preview a spill would have left
it. An answer (the assistant's text and tool inputs) *quotes* a line of a result when it holds
that line, stripped, and the line is long enough not to match by chance
(``budget._quoting``). A kept result whose line is quoted and is not in the envelope its
spill would have shown counts once as *needed*; over the results weighed and kept
(``Observed.exposed``) that is the session's own read-back rate for results it never hid
(:func:`budget.policy.readback_chance`).

The index is built from the history alone (every result over the weighing size, in history
order), so a resumed session rebuilds the same one; the results found needed are logged with
their request record (``q``) and restored, so a resumed session counts each one once, as the
session that went on does. Work per request: the new results' lines and the new answers' lines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import orjson
from pydantic import BaseModel

from budget._config import BudgetConfig
from budget._ledger import Ledger
from budget._quoting import MIN_QUOTE_CHARS, quotable, without_gutter
from budget._view import ToolResult
from budget.passes._context import spill_envelope
from budget.passes.cap import ENVELOPE_FRAME_CHARS
from budget.policy import Observed
from spill import ref_for

__all__ = ["MIN_QUOTE_CHARS", "Quotes", "answer_strings", "quotable"]

_ASKER_ROLES = frozenset({"user", "system", "developer", "tool", "function"})
"""Roles whose messages are not the model's answers (a user's paste is no evidence that the
model needed a line)."""


def answer_strings(message: Any) -> Iterator[str]:
    """Every string of an answer message (text, tool inputs; a JSON-encoded input decoded), or
    nothing when ``message`` is not the model's (a user, system or tool message)."""
    if isinstance(message, BaseModel):
        message = message.model_dump(mode="json")
    if not isinstance(message, dict) or message.get("role") in _ASKER_ROLES:
        return
    yield from _strings(message, depth=0)


def _strings(value: Any, depth: int) -> Iterator[str]:
    # Answers are shallow (content blocks, tool inputs); a bound keeps a hostile one cheap.
    if depth > 32:
        return
    if isinstance(value, str):
        if value[:1] in ("{", "[") and len(value) >= MIN_QUOTE_CHARS:
            # OpenAI's tool-call arguments are a JSON string: its strings hold the quotes.
            try:
                decoded = orjson.loads(value)
            except orjson.JSONDecodeError:
                yield value
            else:
                yield from _strings(decoded, depth + 1)
            return
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item, depth + 1)


class Quotes:
    """The quotable lines of the history's results the cost model weighs, the kept results
    found needed, and the evidence per tool. A session part: ``config`` and ``ledger`` say which
    results are weighed, which are still kept whole, and what a spill would show.

    The counts are kept per tool: one agent's file reads may be quoted line by line in its
    edits while its test runs are read once (each tool's rate is its own; the rest of the
    session is its prior: :func:`budget.policy.readback_chance`). Per tool, three counts:
    results weighed and kept whole once answered (*exposed*), those found needed, and those the
    last request kept, not answered yet.
    """

    def __init__(
        self,
        config: BudgetConfig,
        ledger: Ledger,
        needed: Iterable[str] = (),
        kinds: Mapping[str, tuple[int, int, int]] | None = None,
    ) -> None:
        self._config, self._ledger = config, ledger
        self._index: dict[int, str] = {}
        """Per hash of a stripped line, the call id of the latest indexed result holding it."""
        self._results: dict[str, ToolResult] = {}
        """The indexed results by call id (each indexed once, whatever rescans the history)."""
        self.needed: set[str] = set(needed)
        """Kept results an answer quoted outside their would-be preview (restored from ``q``)."""
        self.found: list[str] = []
        """The results found needed by the last :meth:`look` (logged with its request)."""
        self._kinds: dict[str, list[int]] = {t: list(c) for t, c in (kinds or {}).items()}
        """Per tool: [exposed, needed, unanswered] (restored from the request records' ``k``)."""
        self._changed: set[str] = set()
        """Tools whose counts changed since the last request record (logged in its ``k``)."""

    def note(self, results: Iterable[ToolResult], answers: Sequence[Any], *, retry: bool) -> None:
        """Index the new ``results``, look for quotes in the new ``answers``, then count the
        results the last request kept as exposed: ``answers`` hold the model's answer to them
        (a ``retry`` repeats that request: not yet). Nothing is weighed without priced spills:
        then nothing."""
        self.found = []
        if not self._config.price_spills:
            return  # no result is weighed: keeping one whole was no choice
        self.index(results, self._weighable)
        self.look(answers, self._kept_whole, self._would_show)
        if not retry:
            for tool, counts in self._kinds.items():
                if counts[2]:
                    counts[0], counts[2] = counts[0] + counts[2], 0
                    self._changed.add(tool)

    def kept(self, tool: str) -> None:
        """A result of ``tool`` was weighed and kept whole: an exposure once it is answered."""
        self._count(tool, 2)

    def evidence(self, tool: str) -> tuple[int, int]:
        """(exposed, needed) of ``tool``: what :func:`budget.policy.readback_chance` reads."""
        counts = self._kinds.get(tool)
        return (0, 0) if counts is None else (counts[0], counts[1])

    def pooled(self, observed: Observed) -> Observed:
        """``observed`` with the session's totals over every tool (the pooled rate's counts)."""
        exposed = needed = unanswered = 0
        for e, n, u in self._kinds.values():
            exposed, needed, unanswered = exposed + e, needed + n, unanswered + u
        seen = (observed.exposed, observed.needed, observed.unanswered)
        if seen == (exposed, needed, unanswered):
            return observed
        return replace(observed, exposed=exposed, needed=needed, unanswered=unanswered)

    def record(self) -> dict[str, list[int]]:
        """The counts of the tools changed since the last call (a request record's ``k``)."""
        changed = {tool: list(self._kinds[tool]) for tool in sorted(self._changed)}
        self._changed.clear()
        return changed

    def _count(self, tool: str, which: int) -> None:
        counts = self._kinds.get(tool)
        if counts is None:
            counts = self._kinds[tool] = [0, 0, 0]
        counts[which] += 1
        self._changed.add(tool)

    def _weighable(self, result: ToolResult) -> bool:
        """Whether the cost model weighs a fresh result like ``result`` (``passes.cap.weigh``)."""
        cfg = self._config
        limit = cfg.cap_for(result.tool)
        chars = len(result.text)
        return (
            limit is not None
            and cfg.preview_chars + ENVELOPE_FRAME_CHARS < chars <= limit
            and cfg.policy(result.tool).cap is None
        )

    def _kept_whole(self, call_id: str) -> bool:
        """Whether the result of ``call_id`` was kept whole (and still is)."""
        d = self._ledger.get(call_id)
        return d is not None and d.kind == "kept"

    def _would_show(self, result: ToolResult) -> str:
        """The envelope a spill of ``result`` would show (its preview, no file path)."""
        return spill_envelope(
            self._config,
            result.text,
            ref=ref_for(result.text),
            tool=result.tool,
            is_error=result.is_error,
            path=None,
            version=self._ledger.preview_version,
        )

    def index(self, results: Iterable[ToolResult], weighable: Callable[[ToolResult], bool]) -> None:
        """Index the lines of ``results`` the cost model would weigh, once each: a later holder
        of a line replaces an earlier one (a quote is charged to the latest).

        Every stripped line is indexed, short ones too: they are never looked up (answers are
        searched for quotable lines only), and leaving them in takes no Python step per line
        (splitting, stripping, hashing and the update run in C: ~25 µs of CPU for a 7 kB,
        120-line result). Keys are the lines' hashes, so the index holds no text."""
        known, index = self._results, self._index
        for r in results:
            if r.call_id in known or not weighable(r):
                continue
            known[r.call_id] = r
            lines = without_gutter(r.text).splitlines()
            index.update(dict.fromkeys(map(hash, map(str.strip, lines)), r.call_id))

    def look(
        self,
        answers: Sequence[Any],
        kept: Callable[[str], bool],
        preview: Callable[[ToolResult], str],
    ) -> list[str]:
        """The kept results ``answers`` quote outside their ``preview``, newly found (also in
        :attr:`found`). A quote is charged to the latest result holding the line, as long as
        it is still shown whole (``kept``): a hidden one's read-backs are counted as such."""
        self.found = found = list[str]()
        if not self._index:
            return found
        index, results, needed = self._index, self._results, self.needed
        previews: dict[str, str] = {}
        for message in answers:
            for text in answer_strings(message):
                for line in quotable(text):
                    cid = index.get(hash(line))
                    if cid is None or cid in needed or not kept(cid):
                        continue
                    shown = previews.get(cid)
                    if shown is None:
                        shown = previews[cid] = preview(results[cid])
                    if line not in shown:
                        needed.add(cid)
                        found.append(cid)
                        self._count(results[cid].tool, 1)
        return found
