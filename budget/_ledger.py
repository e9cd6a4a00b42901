"""Frozen decisions: result key -> what was done to its result, with the exact replacement text.

A result is keyed by its call id (its n-th repeat by ``call id + NUL + n``, see the session). It is
decided the first time it is seen; the only later transition is one move to ``trimmed``, unless
the caller edits the result: a decision for another text (length or hash) is a new decision. The
ledger is restored from the decision log on resume, and reused verbatim, which is
what keeps request copies byte-identical from turn to turn and across processes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from budget._view import builder
from budget.previews import PREVIEW_VERSION
from spill import REF_RE

__all__ = ["Decision", "Kind", "Ledger", "make_decision"]

Kind = Literal["kept", "spilled", "trimmed", "kept_unspillable"]
KINDS: frozenset[str] = frozenset({"kept", "spilled", "trimmed", "kept_unspillable"})


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
    digest: str | None = None
    """The ref-style hash of the original text it was decided for (None in logs written before
    it was recorded: the length alone then tells an edited result apart)."""
    preview: int = 0
    """The preview shapes' version its envelope was made with (``pv`` in the log; absent, as in
    logs written before preview shapes, is 0: head + tail, :mod:`budget.previews`)."""

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
        if self.digest is not None:
            rec["h"] = self.digest
        if self.preview:
            rec["pv"] = self.preview
        return rec

    def with_digest(self, digest: str | None) -> Decision:
        """This decision made for the text hashing to ``digest`` (a constructor call, as
        :func:`dataclasses.replace` costs several times more on the request path)."""
        return _restored(
            self.call_id, self.kind, self.reason, self.chars, self.text, self.ref, self.tool,
            digest, self.preview,
        )  # fmt: skip

    def same_text(self, chars: int, digest: str | None) -> bool:
        """Whether this decision was made for a text of ``chars`` characters hashing to
        ``digest`` (a missing hash on either side: the length alone decides)."""
        return self.chars == chars and (
            self.digest is None or digest is None or self.digest == digest
        )

    @classmethod
    def from_record(cls, rec: Mapping[str, Any]) -> Decision:
        """A decision from a log record; ValueError when the record is not a valid decision."""
        problem = _invalid(rec)
        if problem is not None:
            raise ValueError(problem)
        return cls._from_valid(rec)

    @classmethod
    def _from_valid(cls, rec: Mapping[str, Any]) -> Decision:
        """A decision from a record :func:`_invalid` found nothing wrong with."""
        get = rec.get
        return _restored(
            rec["id"], rec["kind"], str(get("why", "")), rec["chars"], get("text"), get("ref"),
            str(get("tool", "")), get("h"), get("pv", 0),
        )  # fmt: skip


_restored = builder(Decision)
"""Decision's constructor at a plain object's cost (:func:`budget._view.builder`): the first
request after a resume restores a decision per result of its history."""
make_decision = _restored
"""The same constructor, for the request path's decisions (positional fields, as ``Decision``)."""


def _invalid(rec: Mapping[str, Any]) -> str | None:
    """What makes ``rec`` not a valid decision record, or None."""
    get = rec.get
    call_id, kind, text, ref = get("id"), get("kind"), get("text"), get("ref")
    if not isinstance(call_id, str) or not call_id:
        return "decision record without a call id"
    if not isinstance(kind, str) or kind not in KINDS:
        return f"decision record with unknown kind {kind!r}"
    if text is not None and not isinstance(text, str):
        return "decision record whose text is not a string"
    # A logged ref is checked like a model's: by spill's own pattern.
    if ref is not None and not (isinstance(ref, str) and REF_RE.match(ref)):
        return "decision record whose ref is not 32 lowercase hex characters"
    chars = get("chars")
    if not isinstance(chars, int) or chars < 0:
        return "decision record without a character count"
    digest = get("h")
    # A stored body's ref is the hash of the text it was decided for: checked once when equal.
    if (
        digest is not None
        and digest != ref
        and not (isinstance(digest, str) and REF_RE.match(digest))
    ):
        return "decision record whose text hash is not 32 lowercase hex characters"
    pv = get("pv", 0)
    if type(pv) is not int or pv < 0:
        return "decision record whose preview version is not a whole number"
    if kind in ("spilled", "trimmed") and (ref is None or text is None):
        return f"{kind} decision record without its ref and text"
    return None


def _same_text(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """:meth:`Decision.same_text` for two valid records."""
    ha, hb = a.get("h"), b.get("h")
    return bool(a["chars"] == b["chars"] and (ha is None or hb is None or ha == hb))


class Ledger:
    """The session's decisions by call id. Only the session changes it, under its lock.

    Decisions read back from the log on resume are queued as records (:meth:`restore`) and
    validated and frozen the first time their call id is asked for: resuming costs a dict
    insert per record, and only the results the next history holds are ever built. Folding a
    call id's records in log order gives what recording them one by one would have given.
    """

    __slots__ = ("_by_id", "_hidden", "_on_invalid", "_pending", "_pv", "_since", "_top")

    def __init__(
        self,
        decisions: Iterable[Decision] = (),
        *,
        on_invalid: Callable[[str, str], None] | None = None,
    ) -> None:
        self._by_id: dict[str, Decision] = {}
        self._pending: dict[str, list[Mapping[str, Any]]] = {}
        self._on_invalid = on_invalid
        """Told (call id, reason) about a queued record that is not a valid decision."""
        self._pv: int | None = None
        """The preview version of the first spill decision recorded or restored."""
        self._hidden: Counter[str] | None = None
        """Per ref, the decisions hiding a result stored at it: built by the first
        :meth:`hidden_refs`, then kept by :meth:`record` (None until then)."""
        self._since: dict[str, int] = {}
        """Per ref a result was hidden at, the fewest messages of a request made since (the one
        that hid it included): :meth:`hidden_since`. Kept by :meth:`requested`."""
        self._top = 0
        """The largest of ``_since``'s values: a request shorter than it lowers some."""
        for d in decisions:
            self.record(d)

    def get(self, call_id: str) -> Decision | None:
        """The decision for ``call_id``, if it was decided."""
        d = self._by_id.get(call_id)
        if d is None and self._pending:
            d = self._fold(call_id)
        return d

    @property
    def preview_version(self) -> int:
        """The session's preview version: its first spill's (a log written before preview
        shapes: 0, so a resumed session goes on showing head + tail), else the current one."""
        return PREVIEW_VERSION if self._pv is None else self._pv

    def record(self, decision: Decision) -> None:
        """Freeze ``decision``; a trimmed decision is final for its text and never replaced,
        but a decision for another text (the caller edited the result) replaces it."""
        if self._pending:
            self._fold(decision.call_id)
        if self._pv is None and decision.kind == "spilled":
            self._pv = decision.preview
        prev = self._by_id.get(decision.call_id)
        if (
            prev is not None
            and prev.kind == "trimmed"
            and prev.same_text(decision.chars, decision.digest)
        ):
            return
        self._by_id[decision.call_id] = decision
        hidden = self._hidden
        if hidden is not None:
            if prev is not None and prev.ref is not None and prev.needs_body:
                hidden[prev.ref] -= 1
                if not hidden[prev.ref]:
                    del hidden[prev.ref]
            if decision.ref is not None and decision.needs_body:
                hidden[decision.ref] += 1

    def restore(self, records: Iterable[Mapping[str, Any]]) -> int:
        """Queue decision records from the log, in log order; how many had no call id (skipped)."""
        pending = self._pending
        queued_for = pending.get
        skipped = 0
        for record in records:
            call_id = record.get("id")
            if type(call_id) is not str or not call_id:
                skipped += 1
                continue
            if self._pv is None and record.get("kind") == "spilled":
                pv = record.get("pv", 0)
                self._pv = pv if type(pv) is int and pv >= 0 else 0
            queued = queued_for(call_id)
            if queued is None:
                pending[call_id] = [record]
            else:
                queued.append(record)
        return skipped

    def _fold(self, call_id: str) -> Decision | None:
        records = self._pending.pop(call_id, None)
        if records is None:
            return self._by_id.get(call_id)
        # Recording the valid records in order keeps the last one, except that a trimmed one
        # stays over later ones for the same text: find that one, and build only it.
        chosen: Mapping[str, Any] | None = None
        for rec in records:
            problem = _invalid(rec)
            if problem is not None:
                if self._on_invalid is not None:
                    self._on_invalid(call_id, problem)
                continue
            if chosen is None or chosen["kind"] != "trimmed" or not _same_text(chosen, rec):
                chosen = rec
        if chosen is not None:
            self.record(Decision._from_valid(chosen))
        return self._by_id.get(call_id)

    def _fold_all(self) -> None:
        for call_id in list(self._pending):
            self._fold(call_id)

    def hidden_refs(self) -> Collection[str]:
        """The refs of every result hidden so far (spilled or trimmed): a later call naming one
        reads it back. The first call walks the decisions; :meth:`record` keeps the count from
        then on, so a session whose agent keeps reading spilled files pays no walk a request."""
        if self._hidden is None:
            self._fold_all()
            self._hidden = Counter(
                d.ref for d in self._by_id.values() if d.ref is not None and d.needs_body
            )
        return self._hidden.keys()

    def requested(self, length: int, refs: Iterable[str]) -> None:
        """Note a request of ``length`` messages, logged with decisions hiding results stored at
        ``refs`` (its request record closes them): from it on, every copy shows them hidden."""
        since = self._since
        if length < self._top:
            # A shorter history (compacted, or cut back): its copy too shows every result
            # hidden so far as hidden, and the model's calls answering it come after it.
            for ref, at in since.items():
                if at > length:
                    since[ref] = length
            self._top = length
        for ref in refs:
            # A ref dated already keeps its date (no later than this request's, clamped above).
            if ref not in since:
                since[ref] = length
                self._top = max(self._top, length)

    def requested_in(self, records: Iterable[Mapping[str, Any]]) -> None:
        """:meth:`requested` for each request record of a log's closed ``records``, with the
        hiding decision records before it: what the live session noted, request by request.
        Every log has them (a request record's ``m`` is its length), so logs written before
        this was kept give it alike; a request record without a length leaves its decisions to
        the next one's."""
        refs: list[str] = []
        for rec in records:
            kind = rec.get("t")
            if kind == "d":
                ref = rec.get("ref")
                if type(ref) is str and rec.get("kind") in ("spilled", "trimmed"):
                    refs.append(ref)
            elif kind == "req":
                length = rec.get("m")
                if type(length) is int and length >= 0:
                    self.requested(length, refs)
                    refs = []

    def hidden_since(self, ref: str) -> int | None:
        """For a result hidden now at ``ref``, the fewest messages of a request since it was
        hidden: the first message a call the model made having seen it hidden can be (a call
        in an earlier one came before). None when no result stored at ``ref`` is hidden, or
        only by the request under way (noted once it is logged)."""
        if ref not in self.hidden_refs():
            return None
        return self._since.get(ref)

    def __len__(self) -> int:
        self._fold_all()
        return len(self._by_id)

    def __iter__(self) -> Iterator[Decision]:
        self._fold_all()
        return iter(self._by_id.values())

    def __contains__(self, call_id: object) -> bool:
        return isinstance(call_id, str) and self.get(call_id) is not None
