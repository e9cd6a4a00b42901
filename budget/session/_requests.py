"""The session's turns: what ``Budget``'s public methods run once their input is checked.

:class:`Requests` owns what changes between requests outside the parts
(:class:`budget.session._parts.Parts`): the session lock, the open/closed state and the message
format (given, remembered by a resumed session, or detected on the first request). It runs a
request (:class:`budget.session._pipeline.Pipeline`, with compaction's turn
:class:`budget.compaction._compacting.Compacting` around it), the compaction entry points, an
overflow and the close. ``Budget`` builds one and only delegates to it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from budget._config import BudgetConfig
from budget._errors import InputError, StoreError
from budget._log import Events
from budget._report import Prepared
from budget._view import Format
from budget.compaction._compacting import Awaited, Compacting, require_list
from budget.compaction._compactor import Compactor
from budget.formats import ANTHROPIC, FormatChoice
from budget.session._parts import Parts
from budget.session._pipeline import Pipeline
from budget.session._records import NOTE, timestamp
from budget.tokens._overflow import overflow_limit
from budget.tokens._tokens import TokenizerProfile, estimate_tokens, tokenizer_profile
from spill import FsspecStore, LocalStore, Store
from spill._store import is_store

__all__ = ["Requests", "open_store"]


def open_store(path: str | os.PathLike[str], config: BudgetConfig, lock_timeout: float) -> Store:
    """The store ``Budget.open`` opens at ``path``: an fsspec URL's, else a session directory."""
    if isinstance(path, str) and "://" in path:  # a URL (s3://bucket/sessions/abc): fsspec
        return FsspecStore(path, quota_bytes=config.quota_bytes)
    # ``path`` as given: Path("") would be the current directory (LocalStore refuses "").
    return LocalStore(
        path, quota_bytes=config.quota_bytes, fsync=config.fsync, lock_timeout=lock_timeout
    )


def check_arguments(store: object, summarizer: object) -> None:
    """Refuse, as an InputError naming it, a store or summarizer ``Budget`` cannot use: each would
    otherwise be an AttributeError or TypeError at its first use (a path given for a store, as
    ``Budget.open`` takes, or a model's name for a summarizer)."""
    if not is_store(store):
        raise InputError(
            f"store must be a spill store (LocalStore, FsspecStore, MemoryStore), not "
            f"{type(store).__name__}; open a session directory with Budget.open(path)"
        )
    if summarizer is not None and not callable(summarizer):
        raise InputError(f"summarizer must be a callable, not {summarizer!r:.80}")


class Requests:
    """A session's lock, open state and format, and the turns run under them (module doc)."""

    def __init__(
        self,
        parts: Parts,
        compactor: Compactor,
        profile: TokenizerProfile,
        format: Format | str | None,
    ) -> None:
        self.parts = p = parts
        self.lock = threading.RLock()
        self._closed = False
        self._log = p.log
        self._profile = profile
        self.compacting = Compacting(
            p.config,
            compactor,
            p.log,
            message_tokens=self._message_tokens,
            window=p.estimator.window,
            as_sent=p.copies.as_sent,
            append_log=p.journal.append,
            keep_text=p.bodies.keep_text,
            reactive=(p.reactive.at, p.reactive.due),
        )
        self.pipeline = Pipeline(p, self.compacting.learn_header, self.compacting.header)
        # The format: given, remembered by a resumed session, or detected on the first request.
        self.formats = FormatChoice.start(format, p.journal.read_meta().get("format"))
        self.format: Format = self.formats.fixed or ANTHROPIC

    @classmethod
    def build(
        cls,
        config: BudgetConfig,
        store: Store,
        log: Events,
        compactor: Compactor,
        format: Format | str | None,
        discover_window: Callable[[], int | None] | None,
        text_tokens: Callable[[str], int] | None,
    ) -> Requests:
        """The turns of a session over ``store``, its parts resumed from its decision log."""
        if discover_window is not None and not callable(discover_window):
            raise InputError(f"discover_window must be a callable, not {discover_window!r:.80}")
        # The model's tokenizer family sets text density and framing for every estimate.
        profile = tokenizer_profile(config.model)
        parts = Parts.build(config, store, log, profile, compactor, discover_window, text_tokens)
        return cls(parts, compactor, profile, format)

    # -- lifecycle ------------------------------------------------------------------------------

    def check_open(self) -> None:
        """Raise StoreError once the session is closed."""
        if self._closed:
            # Not a copy with every result inline as kept_unspillable: the caller has a bug.
            raise StoreError("the session is closed; open it again with Budget.open to go on")

    def close(self) -> None:
        """``Budget.close``: log what could not be logged yet, then close the store."""
        with self.lock:
            self._closed = True
            try:
                known = self.parts.text_tokens.known
                if known is not None:
                    self.pipeline.keep_estimates(known)
                    known.save()  # the estimates a resume reuses (budget/tokens/_estimates_cache.py)
                if self.parts.journal.queued:
                    self.parts.journal.append([], last=True)
            finally:
                self.parts.store.close()

    # -- the request path -----------------------------------------------------------------------

    def request(
        self,
        messages: Sequence[Any],
        usage: Any,
        now: float | None,
        format: Format | str | None,
        awaited: Awaited | None,
        can_wait: bool = True,
    ) -> Prepared:
        """``prepare``, with the summaries ``aprepare`` awaited (see ``budget.compaction._compacting``)."""
        started = time.perf_counter()
        self.check_open()
        messages = require_list(messages)
        when = time.time() if now is None else timestamp(now)
        with self.lock:
            try:
                fmt, to_fix = self.formats.for_request(messages, format)
                if fmt is not self.format:
                    self.pipeline.reset()  # caches hold another adapter's scans
                    self.format = fmt
                budget = partial(self._prepare, usage=usage, now=when, started=started)
                prepared = self.compacting.compacted(messages, fmt, budget, awaited, can_wait)
                # Fixed only now: a request refused as bad input does not settle the format.
                if to_fix and self.formats.hold(fmt):
                    self.parts.journal.write_meta(format=fmt.name)
                return prepared
            except BaseException as exc:
                # The per-message caches may be half updated: rebuild them from the frozen
                # decisions next time rather than trust them.
                self.pipeline.reset()
                if isinstance(exc, RecursionError):
                    raise InputError(
                        "messages nest too deeply to be budgeted (Python's recursion limit)"
                    ) from None
                raise

    def _message_tokens(self, message: Any) -> int:
        return estimate_tokens(message, model=self._profile)

    def _prepare(self, messages: list[Any], usage: Any, now: float, started: float) -> Prepared:
        """One request, its format set (see ``budget.session._pipeline``)."""
        return self.pipeline.run(messages, usage, now, started, self.format)

    # -- compaction -----------------------------------------------------------------------------

    def compact_now(
        self,
        messages: list[Any],
        format: Format | str | None,
        awaited: Awaited | None,
        can_wait: bool = True,
    ) -> bool:
        """``compact``: summarize the history's prefix now (the manual margin)."""
        self.check_open()
        messages = require_list(messages)
        with self.lock:
            fmt, _ = self.formats.for_request(messages, format)
            with self.compacting.summaries(awaited, can_wait):
                return self.compacting.compact(messages, fmt, manual=True)

    def uncompact(self) -> bool:
        """``uncompact``: clear the compaction checkpoint."""
        self.check_open()
        with self.lock:
            return self.compacting.clear()

    def note_readback(self, ref: str | None) -> None:
        """``Budget.note_readback``: count it, and log it at once (a read-back noted after the
        last request, before a crash, counts after the restart too)."""
        with self.lock:
            self.check_open()
            tally = self.parts.tally
            tally.check_ref(ref)
            if ref is not None and ref not in self.parts.ledger.hidden_refs():
                # The policy learns its read-back rate from these: a ref of no hidden result (a
                # typo, another session's) would teach it that this session's spills come back.
                raise InputError(f"ref {ref!r:.80} names no result this session has hidden")
            # Logged first: a note another writer's lock refused (SessionLocked) is neither
            # counted nor left queued, so a host that notes it again counts it once.
            self.parts.journal.append_fact({"t": NOTE, "ref": ref})
            tally.note(ref)

    def overflow(self, error: object) -> None:
        """``on_overflow`` for a prompt-too-long ``error`` (or None): log it, budget harder."""
        with self.lock:
            self.check_open()
            limit = overflow_limit(error) if error is not None else None
            tally = self.parts.tally
            record: dict[str, Any] = {"t": "ovf", "count": tally.overflows + 1}
            if self.parts.estimator.stated(limit):
                # The provider told us the real window: believed from now on, also after a
                # resume (the record keeps it).
                record["w"] = limit
            tally.overflows += 1
            reactive = self.compacting.mark_reactive(record, tally.overflows)
            self.parts.journal.append([record])
            # The limit it states and its class, never its text: an error body may quote the
            # request (a gateway's echo of the prompt), and events go to logs.
            self._log.warning(
                "toolbudget.session.context_overflow",
                count=tally.overflows,
                limit=limit,
                error=None if error is None else type(error).__name__,
            )
            self.compacting.react(reactive, tally.overflows, error)
