"""A compaction checkpoint: what stands for the prefix, and where the retained tail starts.

Its log record (``"t": "cmp"``) is read back by :meth:`Checkpoint.from_record`; a malformed one
is refused (None), never half-read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Checkpoint"]


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A compaction: what stands for the prefix, and where the retained tail starts."""

    summary: str
    anchor: str
    index: int
    """Where the anchored message was when the checkpoint was made: tried first."""
    head: int
    constraints: tuple[str, ...]
    files: tuple[tuple[str, str], ...]
    tools: tuple[str, ...] = ()

    def to_record(self) -> dict[str, Any]:
        """The log record (without its sequence number, which the session adds)."""
        return {
            "t": "cmp",
            "summary": self.summary,
            "anchor": self.anchor,
            "at": self.index,
            "head": self.head,
            "constraints": list(self.constraints),
            "files": [list(f) for f in self.files],
            **({"tools": list(self.tools)} if self.tools else {}),
        }

    @classmethod
    def from_record(cls, rec: Mapping[str, Any]) -> Checkpoint | None:
        """The checkpoint a record holds; None for a cleared one or a malformed record."""
        summary, anchor, at, head = (
            rec.get("summary"),
            rec.get("anchor"),
            rec.get("at"),
            rec.get("head"),
        )
        constraints, files = rec.get("constraints", []), rec.get("files", [])
        tools = rec.get("tools", [])
        if not (isinstance(summary, str) and isinstance(anchor, str)):
            return None
        if not (isinstance(at, int) and isinstance(head, int) and 0 <= head <= at):
            return None
        if not (isinstance(constraints, list) and all(isinstance(c, str) for c in constraints)):
            return None
        if not (isinstance(tools, list) and all(isinstance(t, str) for t in tools)):
            return None
        if not (
            isinstance(files, list)
            and all(
                isinstance(f, list) and len(f) == 2 and all(isinstance(x, str) for x in f)
                for f in files
            )
        ):
            return None
        return cls(
            summary,
            anchor,
            at,
            head,
            tuple(constraints),
            tuple((f[0], f[1]) for f in files),
            tuple(tools),
        )
