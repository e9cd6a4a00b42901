"""JSON skeletons: keys, value types, array lengths, the first items, long strings cut.

The skeleton is itself valid JSON: what is left out is said inside it, as strings (``"… 97 more
items (100 in all)"``), so a model (or ``json.loads``) reads it as it reads the original.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["LADDER", "Limits", "indented", "skeleton", "skeleton_text"]


@dataclass(frozen=True, slots=True)
class Limits:
    """How much of a document a skeleton keeps."""

    depth: int
    items: int
    """Array items kept (the first ones)."""
    keys: int
    """Object keys kept (in document order)."""
    chars: int
    """Characters kept of a long string."""


LADDER: Final = (
    Limits(8, 5, 40, 200),
    Limits(6, 3, 30, 120),
    Limits(5, 2, 20, 80),
    Limits(4, 2, 12, 60),
    Limits(3, 1, 8, 40),
    Limits(2, 1, 6, 30),
    Limits(1, 1, 4, 20),
)
"""Skeletons tried from the most generous to the tightest: the first that fits the preview is
shown (a fixed ladder, so the same document always gives the same skeleton)."""


def _type(value: Any) -> str:
    if isinstance(value, dict):
        return f"{{… {len(value):,} keys}}"
    if isinstance(value, list):
        return f"[… {len(value):,} items]"
    return type(value).__name__


def skeleton(value: Any, lim: Limits, depth: int = 0) -> Any:
    """``value`` cut to ``lim``: arrays to their first items, objects to their first keys,
    strings to their first characters, deeper levels to their type and size."""
    if isinstance(value, dict):
        if depth >= lim.depth:
            return _type(value)
        out: dict[str, Any] = {}
        for n, (k, v) in enumerate(value.items()):
            if n >= lim.keys:
                # The note takes a key none of those kept holds: a key "…" of the object's own,
                # kept above, would lose its value to the note.
                mark = "…"
                while mark in out:
                    mark += "…"
                out[mark] = f"{len(value) - lim.keys:,} more keys ({len(value):,} in all)"
                break
            out[k] = skeleton(v, lim, depth + 1)
        return out
    if isinstance(value, list):
        if depth >= lim.depth:
            return _type(value)
        items = [skeleton(v, lim, depth + 1) for v in value[: lim.items]]
        if len(value) > lim.items:
            items.append(f"… {len(value) - lim.items:,} more items ({len(value):,} in all)")
        return items
    if isinstance(value, str) and len(value) > lim.chars:
        return f"{value[: lim.chars]}… [{len(value) - lim.chars:,} more characters]"
    return value


def skeleton_text(value: Any, lim: Limits) -> str:
    """The skeleton of ``value`` under ``lim`` as indented JSON text."""
    return indented(skeleton(value, lim))


def indented(kept: Any) -> str:
    """A skeleton (:func:`skeleton`) as the indented JSON text a preview shows."""
    return json.dumps(kept, indent=1, ensure_ascii=False)
