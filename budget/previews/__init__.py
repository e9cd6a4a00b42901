"""Previews shaped by their content: errors first, JSON skeletons, tables, diffs, re-run deltas.

A spilled result is shown as an envelope whose preview is what the model works from. Version 0
(the envelopes of logs written before shapes existed) is a head and a tail by lines; from
version 1 the shape is picked from the content (:func:`detect`) and one marker line says which
shape it is and which line ranges it leaves out (from version 2, :data:`PREVIEW_VERSION`, how
many lines and characters too). Every choice is a pure
function of the text and the settings, and the version is frozen in each spill decision, so a
resumed session shows the same bytes as the session that made them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from budget.previews._delta import apply_delta, line_delta
from budget.previews._detect import Shape, detect, is_failure, is_summary
from budget.previews._json import skeleton, skeleton_text
from budget.previews._lines import Shaped, span_text
from budget.previews._shapes import shape_preview

__all__ = [
    "PREVIEW_VERSION",
    "SHAPES",
    "Earlier",
    "Shape",
    "Shaped",
    "apply_delta",
    "detect",
    "is_failure",
    "is_summary",
    "line_delta",
    "shape_preview",
    "skeleton",
    "skeleton_text",
    "span_text",
]

PREVIEW_VERSION: Final = 3
"""The preview shapes' version, recorded in each spill decision (``pv``; absent: version 0).
Version 2 says on the marker line how many lines (and, for a head and a tail, characters) it
leaves out, and names a head-only preview ``head`` (the envelope's contract: "the count of
omitted lines and characters", "the shape is named"); version 1 listed the ranges alone and
called a head-only preview ``head_tail``. Version 3 tells an envelope that names its file
(``include_path``) to read that file with the agent's own tools, as stubs and pointers do,
rather than with the read-back tool too (an agent behind the proxy has none)."""
SHAPES: Final = ("errors", "json", "ndjson", "table", "diff", "delta", "head_tail", "head")
"""Every shape a preview can take (``head`` from version 2)."""


@dataclass(frozen=True, slots=True)
class Earlier:
    """An earlier result of the same call (tool and input), whose text the store holds."""

    ref: str
    text: str
