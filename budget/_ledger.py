"""Frozen decisions: call id -> what was done to its result, with the exact replacement text.

A result is decided the first time it is seen; the only later transition is one move to
``trimmed``. The ledger is restored from the decision log on resume, and reused verbatim, which is
what keeps request copies byte-identical from turn to turn and across processes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

__all__ = ["Decision", "Kind", "Ledger"]

Kind = Literal["kept", "spilled", "trimmed", "kept_unspillable"]
KINDS: frozenset[str] = frozenset({"kept", "spilled", "trimmed", "kept_unspillable"})
_REF = re.compile(r"\A[0-9a-f]{32}\Z")  # spill.REF_RE: a logged ref is checked like a model's


@dataclass(frozen=True, slots=True)
class Decision:
    """What was done to one tool result, and the exact text it is shown as from now on."""

    call_id: str
    kind: Kind
    reason: str
    """Why: fits, empty, exempt, cap, aggregate, cold_cache, pressure, pays, forced, spill_failed."""
    chars: int
    """Characters of the original text."""
    text: str | None = None
    """The exact replacement text; None when the original is shown unchanged."""
    ref: str | None = None
    """Where the original is stored (spilled, trimmed), for read-back."""
    tool: str = ""

    def shown(self, original: str) -> str:
        """The text the model sees in place of ``original``."""
        return original if self.text is None else self.text

    def shown_chars(self) -> int:
        """Characters the model sees for this result's text."""
        return self.chars if self.text is None else len(self.text)

    @property
    def needs_body(self) -> bool:
        """Whether the original must be stored before this decision is logged."""
        return self.kind in ("spilled", "trimmed")

    def to_record(self) -> dict[str, Any]:
        """The decision as a log record (the store adds version and checksum)."""
        rec: dict[str, Any] = {
            "t": "d",
            "id": self.call_id,
            "kind": self.kind,
            "why": self.reason,
            "chars": self.chars,
            "tool": self.tool,
        }
        if self.text is not None:
            rec["text"] = self.text
        if self.ref is not None:
            rec["ref"] = self.ref
        return rec

    @classmethod
    def from_record(cls, rec: Mapping[str, Any]) -> Decision:
        """A decision from a log record; ValueError when the record is not a valid decision."""
        call_id, kind, text, ref = rec.get("id"), rec.get("kind"), rec.get("text"), rec.get("ref")
        if not isinstance(call_id, str) or not call_id:
            raise ValueError("decision record without a call id")
        if not isinstance(kind, str) or kind not in KINDS:
            raise ValueError(f"decision record with unknown kind {kind!r}")
        if text is not None and not isinstance(text, str):
            raise ValueError("decision record whose text is not a string")
        if ref is not None and not (isinstance(ref, str) and _REF.match(ref)):
            raise ValueError("decision record whose ref is not 32 lowercase hex characters")
        chars = rec.get("chars")
        if not isinstance(chars, int) or chars < 0:
            raise ValueError("decision record without a character count")
        if kind in ("spilled", "trimmed") and (ref is None or text is None):
            raise ValueError(f"{kind} decision record without its ref and text")
        return cls(
            call_id=call_id,
            kind=cast(Kind, kind),
            reason=str(rec.get("why", "")),
            chars=chars,
            text=text,
            ref=ref,
            tool=str(rec.get("tool", "")),
        )


class Ledger:
    """The session's decisions by call id. Only the session changes it, under its lock."""

    __slots__ = ("_by_id",)

    def __init__(self, decisions: Iterable[Decision] = ()) -> None:
        self._by_id: dict[str, Decision] = {}
        for d in decisions:
            self.record(d)

    def get(self, call_id: str) -> Decision | None:
        """The decision for ``call_id``, if it was decided."""
        return self._by_id.get(call_id)

    def record(self, decision: Decision) -> None:
        """Freeze ``decision``; a trimmed decision is final and never replaced."""
        prev = self._by_id.get(decision.call_id)
        if prev is not None and prev.kind == "trimmed":
            return
        self._by_id[decision.call_id] = decision

    def __len__(self) -> int:
        return len(self._by_id)

    def __iter__(self) -> Iterator[Decision]:
        return iter(self._by_id.values())

    def __contains__(self, call_id: object) -> bool:
        return call_id in self._by_id
