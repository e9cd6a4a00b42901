"""Preview hit rate: of the lines the recorded agent later quoted from a long result, the share
its preview showed, per preview shape, head + tail (version 0) against the shapes (version 1).

Cases
    Every tool result of a trace longer than ``preview_chars`` (2,000 by default): any result a
    session spills is previewed this way, by the cap or by the aggregate pass, and which results
    a session spills depends on its cap and its group budget, not on what the preview is. A case
    counts once the recorded agent quoted at least one of its lines later.

Quotes
    As :mod:`benchmarks.readbacks` finds them: a stripped line of at least 30 characters of a
    later answer (its text, its tool inputs) that an earlier result holds, credited to the most
    recent result holding it. Each line counts once per case.

Hit
    A quoted line is a hit when the preview shows it: it is one of the envelope's stripped lines
    (a delta's ``+`` lines count without their ``+``). The envelope is built exactly as a session
    builds it (:func:`budget.passes._context.spill_envelope`, default settings), for version 0 and
    for version 1 on the same result. A re-run is previewed as a delta only against an earlier
    result of the same call (command, or tool and input) that is itself a case: one a session
    would have stored.

The shape a case is filed under is the one version 1 chose for it (``head_tail`` where no other
shape applies, so that row compares a shape with itself: a sanity check, equal by design).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.table import Table

from benchmarks._table import report_table
from benchmarks.readbacks import Quotes, quotable_lines, shown_lines
from benchmarks.trace import Trace
from budget._config import BudgetConfig
from budget.formats._common import call_key
from budget.passes._context import spill_envelope
from budget.previews import SHAPES, Earlier
from spill import ref_for

__all__ = ["MIN_CASES", "PreviewHits", "ShapeHits", "preview_hits", "previews_table", "tool_calls"]

MIN_CASES = 10
"""Cases a shape needs before its hit rates are compared (issue 32's bar)."""


@dataclass(frozen=True, slots=True)
class ShapeHits:
    """The hit counts of one shape over the cases filed under it."""

    shape: str
    cases: int
    quotes: int
    head_tail: int
    """Quotes version 0's head + tail showed."""
    shaped: int
    """Quotes version 1's shape showed."""

    def as_json(self) -> dict[str, Any]:
        """The counts and both hit rates (None without quotes)."""
        return {
            "shape": self.shape,
            "cases": self.cases,
            "quotes": self.quotes,
            "head_tail_hits": self.head_tail,
            "shaped_hits": self.shaped,
            "head_tail_rate": self.head_tail / self.quotes if self.quotes else None,
            "shaped_rate": self.shaped / self.quotes if self.quotes else None,
        }


@dataclass(frozen=True, slots=True)
class PreviewHits:
    """Hit counts per shape, over every trace."""

    shapes: tuple[ShapeHits, ...]
    results: int
    """Results longer than the preview (the cases before filtering by quotes)."""
    preview_chars: int

    def total(self) -> ShapeHits:
        """All shapes together."""
        return ShapeHits(
            "all",
            sum(s.cases for s in self.shapes),
            sum(s.quotes for s in self.shapes),
            sum(s.head_tail for s in self.shapes),
            sum(s.shaped for s in self.shapes),
        )

    def as_json(self) -> dict[str, Any]:
        """The JSON section ``previews`` of the bench's document."""
        return {
            "preview_chars": self.preview_chars,
            "results_over_preview": self.results,
            "min_cases": MIN_CASES,
            "shapes": [s.as_json() for s in self.shapes],
            "all": self.total().as_json(),
        }


@dataclass(slots=True)
class _Case:
    text: str
    is_error: bool
    tool: str
    key: str
    quoted: set[str]


def _shown(envelope: str, *, delta: bool) -> set[str]:
    return shown_lines(envelope) if delta else quotable_lines(envelope)


def tool_calls(trace: Trace) -> dict[str, tuple[str, str]]:
    """Per tool-use id, (tool name, call key: what a re-run repeats)."""
    out: dict[str, tuple[str, str]] = {}
    for message in trace.messages:
        content = message.get("content")
        if message.get("role") != "assistant" or not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                name = str(block.get("name", ""))
                out[str(block.get("id", ""))] = (name, call_key(name, block.get("input")))
    return out


def _errors(trace: Trace) -> set[str]:
    """Tool-use ids whose result is flagged as an error."""
    out: set[str] = set()
    for message in trace.messages:
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            continue
        for block in content:
            if (
                isinstance(block, dict)
                and block.get("type") == "tool_result"
                and block.get("is_error")
            ):
                out.add(str(block.get("tool_use_id", "")))
    return out


def _trace_cases(trace: Trace, quotes: Quotes, chars: int) -> list[tuple[_Case, Earlier | None]]:
    calls, errors = tool_calls(trace), _errors(trace)
    quoted: dict[int, set[str]] = {}
    for events in quotes.events:
        for line, k in events:
            quoted.setdefault(k, set()).add(line)
    out: list[tuple[_Case, Earlier | None]] = []
    stored: dict[str, str] = {}
    """Per call key, the text of the latest case (a result a session would have stored)."""
    for k, res in enumerate(quotes.results):
        if len(res.text) <= chars:
            continue
        tool, key = calls.get(res.call_id, ("", ""))
        before = stored.get(key) if key else None
        earlier = Earlier(ref_for(before), before) if before is not None else None
        if key:
            stored[key] = res.text
        out.append(
            (_Case(res.text, res.call_id in errors, tool, key, quoted.get(k, set())), earlier)
        )
    return out


def preview_hits(
    traces: Iterable[Trace], config: BudgetConfig | None = None, *, quotes: Sequence[Quotes] = ()
) -> PreviewHits:
    """Hit counts per shape over ``traces`` (``quotes``: their :class:`Quotes`, if built)."""
    cfg = config if config is not None else BudgetConfig()
    chars = cfg.preview_chars
    counts: dict[str, list[int]] = {s: [0, 0, 0, 0] for s in SHAPES}
    results = 0
    found = list(traces)
    built = list(quotes) if quotes else [Quotes(t) for t in found]
    for trace, q in zip(found, built, strict=True):
        for case, earlier in _trace_cases(trace, q, chars):
            results += 1
            if not case.quoted:
                continue
            ref = ref_for(case.text)
            old = spill_envelope(
                cfg, case.text, ref=ref, tool=case.tool, is_error=case.is_error, path=None,
                version=0,
            )  # fmt: skip
            new = spill_envelope(
                cfg, case.text, ref=ref, tool=case.tool, is_error=case.is_error, path=None,
                version=1, earlier=earlier,
            )  # fmt: skip
            shape = new.split("\n--- preview: ", 1)[1].split(" ", 1)[0].rstrip(";")
            row = counts[shape if shape in counts else "head_tail"]
            row[0] += 1
            row[1] += len(case.quoted)
            row[2] += len(case.quoted & _shown(old, delta=False))
            row[3] += len(case.quoted & _shown(new, delta=shape == "delta"))
    shapes = tuple(ShapeHits(s, *counts[s]) for s in SHAPES)
    return PreviewHits(shapes, results, chars)


def previews_table(hits: PreviewHits) -> Table:
    """The terminal table: per shape, cases, quotes, and both hit rates."""
    table = report_table(
        f"Preview hit rate: quoted lines of the {hits.results:,} results over "
        f"{hits.preview_chars:,} characters that their preview showed",
        "head+tail: version 0's preview of the same results; shaped: version 1's (delta: a "
        "re-run shown as its diff, then its own preview). (few): under 10 cases.",
    )
    for name in ("shape", "cases", "quotes", "head+tail", "shaped"):
        table.add_column(name, justify="left" if name == "shape" else "right")
    for s in (*hits.shapes, hits.total()):
        if not s.cases:
            continue
        ht = f"{s.head_tail / s.quotes:.1%}" if s.quotes else "—"
        sh = f"{s.shaped / s.quotes:.1%}" if s.quotes else "—"
        few = "" if s.cases >= MIN_CASES or s.shape == "all" else " (few)"
        table.add_row(f"{s.shape}{few}", f"{s.cases:,}", f"{s.quotes:,}", ht, sh)
    return table
