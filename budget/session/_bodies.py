"""The bodies the decisions spill: stored, durably and as one group, before they are logged.

A failed or mismatched store keeps the text inline (``kept_unspillable``): ``prepare`` never
raises for the store. An envelope made by ``spill_output`` is recognised by its ref and bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from typing import Any

from budget._config import BudgetConfig
from budget._envelope import envelope_ref
from budget._errors import StoreError
from budget._ledger import Decision, Ledger
from budget._log import Events
from budget._view import ToolResult
from budget._wrap import wrapped_decisions
from budget.passes._context import spill_envelope
from spill import Store, ref_for

__all__ = ["Bodies"]


class Bodies:
    """Spilled bodies: put in the store once, known by ref (the refs known stored are its state)."""

    def __init__(
        self,
        store: Store,
        config: BudgetConfig,
        ledger: Ledger,
        log: Events,
        recent: frozenset[str] = frozenset(),
    ) -> None:
        self._store, self._config, self._ledger, self._log = store, config, ledger, log
        self._stored: set[str] = set()
        """Refs whose bodies are known to be in the store (put, or found there)."""
        # A store makes each body durable before its decision is logged (the Store contract),
        # unless it says it defers its fsyncs (the proxy's LocalStore): then the bodies of the
        # last logged request (``recent``) may be gone after a power cut.
        self._unsure = set(recent) if getattr(store, "defers_sync", False) else set()
        """Refs logged whose bodies may be missing: asked once (:meth:`restore_missing`)."""
        self.held = True
        """The store took every body of the last request that stored any: a spill decided now
        is taken to hold (the staleness pass weighs the request without the output it hides)."""

    def spill(self, text: str, tool: str, lock: AbstractContextManager[Any]) -> str:
        """``text`` as a tool result should hold it (``Budget.spill_output``): itself, or (over
        ``tool``'s cap) its envelope, the body stored first (under ``lock``, the session's); a
        failed spill, or an envelope not shorter than ``text``, returns ``text`` itself."""
        limit = self._config.cap_for(tool)
        if limit is None or len(text) <= limit or self.envelope_ref(text) is not None:
            return text
        ref = ref_for(text)
        shown = self.envelope(text, ref, tool, is_error=False)
        if len(shown) >= len(text):
            return text  # the envelope would outgrow the output: whole, as the cap pass keeps it
        with lock:
            if ref not in self._stored:
                try:
                    self._store.put(text)
                except (StoreError, OSError) as exc:
                    self._log.error(
                        "toolbudget.spill.failed", tool=tool, chars=len(text), error=str(exc)
                    )
                    return text
                self._stored.add(ref)
        return shown

    def restore_missing(self, results: Iterable[ToolResult]) -> None:
        """Put back the body of each logged decision the store lacks, from the result's text the
        history holds again (its hash must be the body's ref).

        A store whose fsyncs run after the request is answered (the proxy's, ``defer_sync``) may
        lose the last request's bodies to a power cut while the decisions naming them reached
        the disk: the agent re-sends its whole history, so the text is there to store again
        before a copy points to it. Each such ref is asked once (a resumed session's first
        request); no other store is asked at all (a resume opens no body)."""
        if not self._unsure:
            return
        for r in results:
            d = self._ledger.get(r.call_id)
            if d is None or d.ref not in self._unsure or not d.needs_body:
                continue
            self._unsure.discard(d.ref)
            try:
                if self._store.has(d.ref):
                    self._stored.add(d.ref)
                    continue
                if ref_for(r.text) != d.ref:
                    continue  # the history holds another text now: nothing to put back from
                self._store.put(r.text)
            except (StoreError, OSError) as exc:
                self._log.error(
                    "toolbudget.spill.failed", call_id=r.call_id, kind=d.kind, chars=d.chars,
                    error=str(exc),
                )  # fmt: skip
                continue
            self._stored.add(d.ref)
            self._log.warning("toolbudget.spill.restored", call_id=r.call_id, ref=d.ref)

    def take_wrapped(self, fresh: list[ToolResult]) -> tuple[list[ToolResult], dict[str, Decision]]:
        """(the fresh results left to the passes, the decisions of those ``wrap_tool`` made)."""
        wrapped = wrapped_decisions(fresh, self.envelope_ref)
        if wrapped:  # envelopes made by wrap_tool: small results already, frozen as they are
            for d in wrapped.values():
                self._ledger.record(d)
            fresh = [r for r in fresh if r.call_id not in wrapped]
        return fresh, wrapped

    def materialize(
        self, made: dict[str, Decision], by_id: Mapping[str, ToolResult]
    ) -> dict[str, Decision]:
        """Store the bodies the decisions need, durably and as one group, before they are logged."""
        out = dict(made)
        todo = self._to_store(made)
        if not todo:
            return out
        self.held = True
        # One group commit for the request: a batch that spills hundreds of bodies pays a few
        # fsyncs, not two per body.
        got: list[str | BaseException]
        try:
            got = list(self._store.put_many([by_id[call_id].text for call_id in todo]))
        except (StoreError, OSError) as exc:
            got = [exc] * len(todo)
        if len(got) != len(todo):
            got = [StoreError(f"put_many returned {len(got)} results for {len(todo)} bodies")]
            got *= len(todo)
        for (call_id, d), ref in zip(todo.items(), got, strict=True):
            if isinstance(ref, BaseException):
                error = str(ref)
            elif ref != d.ref:
                # A store that hashes differently, or a ref that is not this text's: prepare
                # never raises for the store, so the text stays inline, whole.
                error = f"store returned ref {ref} for a body hashed {d.ref}"
            else:
                self._stored.add(ref)
                continue
            self.held = False
            self._log.error(
                "toolbudget.spill.failed", call_id=call_id, kind=d.kind, chars=d.chars, error=error
            )
            out[call_id] = Decision(
                call_id, "kept_unspillable", "spill_failed", d.chars, tool=d.tool
            )
        return out

    def _to_store(self, made: Mapping[str, Decision]) -> dict[str, Decision]:
        """The decisions whose bodies are not known to be stored yet."""
        todo: dict[str, Decision] = {}
        for call_id, d in made.items():
            if not d.needs_body or d.ref is None or d.ref in self._stored:
                continue
            prev = self._ledger.get(call_id)
            if prev is not None and prev.ref == d.ref:
                # Logged after its body was stored (or, made by wrap_tool, found stored): the
                # body is there already. A trimmed envelope's ref is its body's, not the hash
                # of the envelope, so it must not be stored again from the result's text.
                self._stored.add(d.ref)
                continue
            todo[call_id] = d
        return todo

    def digested(
        self, made: dict[str, Decision], by_id: Mapping[str, ToolResult]
    ) -> dict[str, Decision]:
        """The decisions, each with the digest of the text it was made for."""
        # Each decision names the text it was made for: an edit of that text is seen later
        # (and after a resume) even when it keeps the length, as a redaction does.
        # A spilled decision's ref is that hash already (the store checked it), and a trim's
        # text is the one its frozen decision was made for (a candidate's text edited since is
        # a new result: the caches are rebuilt), whose digest it keeps: neither is hashed again.
        out = {}
        for cid, d in made.items():
            if d.kind == "spilled" and d.ref:
                digest = d.ref
            elif d.kind == "trimmed" and (prev := self._ledger.get(cid)) and prev.digest:
                digest = prev.digest
            else:
                digest = ref_for(by_id[cid].text)
            out[cid] = d.with_digest(digest)
        return out

    def keep_text(self, text: str) -> str | None:
        """Store ``text`` for the read-back tool (the user's constraints a compaction could not
        carry): its ref, or None (an event) when the store refused it."""
        ref = ref_for(text)
        if ref in self._stored:
            return ref
        try:
            got = self._store.put(text)
        except (StoreError, OSError) as exc:
            self._log.error("toolbudget.spill.failed", chars=len(text), error=str(exc))
            return None
        if got != ref:
            self._log.error(
                "toolbudget.spill.failed", chars=len(text), error=f"store returned ref {got}"
            )
            return None
        self._stored.add(ref)
        return ref

    def envelope(
        self, text: str, ref: str, tool: str, *, is_error: bool, version: int | None = None
    ) -> str:
        path = self._store.path_of(ref) if self._config.include_path else None
        v = self._ledger.preview_version if version is None else version
        return spill_envelope(
            self._config, text, ref=ref, tool=tool, is_error=is_error, path=path, version=v
        )

    def envelope_ref(self, text: str) -> str | None:
        """The ref of ``text`` if it is exactly an envelope of a body of this session."""
        head = envelope_ref(text)
        if head is None:
            return None
        ref, tool = head
        try:
            body = self._store.get(ref)
        except (StoreError, OSError):
            return None  # not one of ours (or unreadable): an ordinary result
        self._stored.add(ref)
        # Made by this session's preview version, or by version 0 (head + tail) before a resume
        # under a version that shapes previews.
        versions = sorted({self._ledger.preview_version, 0}, reverse=True)
        if any(
            text == self.envelope(body, ref, tool, is_error=e, version=v)
            for v in versions
            for e in (False, True)
        ):
            return ref
        return None
