"""Compaction's stateful half: the checkpoint, the breaker, and the view ``prepare`` budgets.

``Budget`` holds one :class:`Compactor` and calls it at three points: on resume (the checkpoint
records in the log), in each request (the projected view of the caller's list, and a compaction
when ``budget._compacting`` finds one due) and for ``compact()`` / ``uncompact()``. The checkpoint is a log record of its own (``"t": "cmp"``):
the summary, the attachments, and the first retained message's anchor. It is read from the whole
log, not only from closed requests: it is written alone, after the summarizer returned, and is
valid as soon as its line is whole. A resumed session projects the same bytes from it without
calling the summarizer again (SPEC §11.7).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from budget._compaction import (
    Attachments,
    anchor_of,
    attachments,
    project,
    resolve_anchor,
    summary_message,
    tail_start,
)
from budget._config import BudgetConfig
from budget._errors import InputError
from budget._report import Prepared
from budget._view import Format

__all__ = ["Checkpoint", "Compactor"]

Append = Callable[[list[Mapping[str, Any]]], None]


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
        if not (isinstance(summary, str) and isinstance(anchor, str)):
            return None
        if not (isinstance(at, int) and isinstance(head, int) and 0 <= head <= at):
            return None
        if not (isinstance(constraints, list) and all(isinstance(c, str) for c in constraints)):
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
            summary, anchor, at, head, tuple(constraints), tuple((f[0], f[1]) for f in files)
        )


class Compactor:
    """One session's compaction state; the session's lock guards every call."""

    def __init__(
        self,
        config: BudgetConfig,
        summarizer: Callable[[Sequence[Any]], Any] | None,
        log: Any,
    ) -> None:
        self.config = config
        self.summarizer = summarizer
        self._log = log
        self.checkpoint: Checkpoint | None = None
        self._message: dict[str, Any] | None = None
        """The summary message, built once per checkpoint: the same object on every request,
        so the session's per-message caches see an unchanged prefix between compactions."""
        self.failures = 0
        self.compactions = 0
        self._unreported: int | None = None
        """Prefix tokens of a compaction no request has reported yet."""

    @property
    def breaker_open(self) -> bool:
        """True after ``compact_breaker_failures`` consecutive failures: no automatic compaction."""
        return self.failures >= self.config.compact_breaker_failures

    def restore(self, log: Sequence[Mapping[str, Any]]) -> None:
        """Take the last checkpoint record of the log (a cleared one clears)."""
        for rec in reversed(log):
            if rec.get("t") == "cmp":
                self._set(None if rec.get("clear") else Checkpoint.from_record(rec))
                if self.checkpoint is None and not rec.get("clear"):
                    self._log.warning(
                        "toolbudget.log.record_skipped", reason="malformed compaction record"
                    )
                return

    def _set(self, cp: Checkpoint | None) -> None:
        self.checkpoint = cp
        self._message = (
            None
            if cp is None
            else summary_message(cp.summary, Attachments(cp.constraints, cp.files))
        )

    def view(self, messages: list[Any], fmt: Format) -> list[Any]:
        """The caller's list as the session budgets it: projected when a checkpoint holds."""
        cp = self.checkpoint
        if cp is None or self._message is None:
            return messages
        at = resolve_anchor(messages, fmt, cp.anchor, cp.index)
        if at is None or at < cp.head:
            # The caller's history no longer holds the first retained message: the full view
            # is the safe one (nothing is lost, only the window may be exceeded).
            self._log.warning("toolbudget.session.compaction_anchor_lost", anchor=cp.anchor)
            return messages
        return project(messages, cp.head, at, self._message)

    def reported(self, prepared: Prepared) -> Prepared:
        """``prepared`` with its report saying a compaction ran, once per compaction."""
        if self._unreported is None:
            return prepared
        update = {"compacted": True, "summarized_tokens": self._unreported}
        self._unreported = None
        return Prepared(prepared.messages, prepared.report.model_copy(update=update))

    def clear(self, append: Append) -> bool:
        """Drop the checkpoint: the next request shows the full history. False if none held."""
        if self.checkpoint is None:
            return False
        append([{"t": "cmp", "clear": True}])
        self._set(None)
        self._log.info("toolbudget.session.compaction_cleared")
        return True

    def compact(
        self,
        messages: list[Any],
        fmt: Format,
        tokens: Callable[[Any], int],
        append: Append,
        window: Callable[[], int],
        *,
        manual: bool,
    ) -> bool:
        """Summarize the prefix of the current view and record the checkpoint.

        False when there is nothing worth summarizing (a prefix under the minimum reclaim) or,
        for an automatic compaction, when the summarizer failed (counted towards the breaker).
        A manual call re-raises the summarizer's error after counting it.

        The summary request itself must fit: what is summarized is cut from the oldest end to
        ``window - compact_reserve_tokens - margin`` (the manual margin for a manual call).
        """
        if self.summarizer is None:
            raise InputError("compaction needs a summarizer: Budget.open(..., summarizer=...)")
        cfg = self.config
        view = self.view(messages, fmt)
        tail = tail_start(
            view,
            fmt,
            min_tokens=cfg.compact_tail_tokens,
            min_messages=cfg.compact_tail_messages,
            max_tokens=cfg.compact_tail_max_tokens,
            tokens=tokens,
        )
        # With a checkpoint the view's first message after the head is the summary: a new one
        # must cover more than it, and the retained tail's first message is a caller's message.
        first = tail.head + (1 if view is not messages else 0)
        if tail.start <= first or tail.prefix_tokens < cfg.compact_min_reclaim_tokens:
            self._log.info(
                "toolbudget.session.compaction_skipped",
                prefix_tokens=tail.prefix_tokens,
                manual=manual,
            )
            return False
        extra = attachments(
            view,
            fmt,
            tail.start,
            constraint_chars=cfg.compact_constraint_chars,
            files=cfg.compact_files,
            file_chars=cfg.compact_file_chars,
        )
        if view is not messages and self.checkpoint is not None:
            # The user's constraints were carried by the last summary message: the early user
            # messages they came from are summarized, and read from the view now they would be
            # lines of the summary message itself.
            extra = Attachments(self.checkpoint.constraints, extra.files)
        margin = cfg.compact_manual_margin_tokens if manual else cfg.compact_margin_tokens
        room = window() - cfg.compact_reserve_tokens - margin
        first_summarized, held = tail.start, 0
        while first_summarized > tail.head and held + tokens(view[first_summarized - 1]) <= room:
            first_summarized -= 1
            held += tokens(view[first_summarized])
        try:
            summary = self.summarizer(view[first_summarized : tail.start])
            if inspect.isawaitable(summary):
                close = getattr(summary, "close", None)
                if close is not None:
                    close()
                raise InputError("an async summarizer needs aprepare(), which is not there yet")
            if not isinstance(summary, str) or not summary.strip():
                raise InputError("the summarizer returned no summary text")
        except Exception as exc:
            self.failures += 1
            self._log.warning(
                "toolbudget.session.compaction_failed",
                error=str(exc),
                failures=self.failures,
                manual=manual,
            )
            if self.breaker_open and not manual:
                self._log.error(
                    "toolbudget.session.compaction_breaker_open", failures=self.failures
                )
            if manual:
                raise
            return False
        index = self._source_index(messages, view, tail.start, fmt)
        cp = Checkpoint(
            summary=summary,
            anchor=anchor_of(view, fmt, tail.start),
            index=index,
            head=tail.head,
            constraints=extra.constraints,
            files=extra.files,
        )
        append([cp.to_record()])
        self._set(cp)
        self.failures = 0
        self.compactions += 1
        self._unreported = tail.prefix_tokens
        self._log.info(
            "toolbudget.session.compaction",
            prefix_tokens=tail.prefix_tokens,
            tail_tokens=tail.tail_tokens,
            summary_chars=len(summary),
            constraints=len(cp.constraints),
            files=len(cp.files),
            manual=manual,
        )
        return True

    def _source_index(self, messages: list[Any], view: list[Any], start: int, fmt: Format) -> int:
        if view is messages:
            return start
        found = resolve_anchor(messages, fmt, anchor_of(view, fmt, start), start)
        return start if found is None else found
