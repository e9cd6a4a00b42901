"""Compaction's stateful half: the checkpoint, the breaker, and the view ``prepare`` budgets.

``Budget`` holds one :class:`Compactor` and calls it at three points: on resume (the checkpoint
records in the log), in each request (the projected view of the caller's list; whether a
compaction is due, which ``budget.compaction._compacting`` asks after budgeting) and for ``compact()`` /
``uncompact()``. The checkpoint is a log record of its own (``"t": "cmp"``): the summary, the
attachments, and the first retained message's anchor. It is read from the whole log, not only
from closed requests: it is written alone, after the summarizer returned, and is valid as soon
as its line is whole. A resumed session projects the same bytes from it without
calling the summarizer again (docs/concepts/compaction.md).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from budget._config import BudgetConfig
from budget._errors import InputError, SummaryTooLong
from budget._report import Prepared
from budget._view import Format
from budget.compaction._bounded import within
from budget.compaction._checkpoint import Checkpoint
from budget.compaction._compact_limits import (
    Limits,
    check_summary_size,
    limits,
    summarized_part,
)
from budget.compaction._compaction import (
    Attachments,
    Tail,
    anchor_of,
    attachments,
    carry_over,
    constraint_lines,
    drop_oldest_rounds,
    pinned_head,
    project,
    resolve_anchor,
    summary_message,
    tail_start,
)
from budget.compaction._resumed import FAILED, failures_of, unreported_of
from budget.tokens._overflow import is_context_overflow

__all__ = ["Checkpoint", "Compactor", "Limits", "limits"]

Append = Callable[[list[Mapping[str, Any]]], None]
Keep = Callable[[str], str | None]
"""Stores a text for the read-back tool: its ref, or None when it could not be stored."""

SUMMARY_RETRIES = 3
"""Retries of a summary request refused as too long, each without the oldest quarter of what
it summarized (whole rounds), before the compaction counts as failed. Claude Code retries as
often (``MAX_PTL_RETRIES = 3`` in ``src/services/compact/compact.ts``, read from the public
reconstructions of the 2.1.x bundle, e.g. NanmiCoder/cc-haha)."""


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
        self.breaker_openings = 0
        """Times the breaker opened in this process (each one an event)."""
        self._unreported: int | None = None
        """Prefix tokens of a compaction no request has reported yet."""
        self.header = 0
        """Tokens each request carries beyond its messages (system prompt, tool definitions),
        learned from the reports: the anchored estimate of a copy minus its messages' estimate.
        The largest seen is kept: an unanchored report (after a compaction, before the next
        usage) sees no header, and overestimating it only compacts a little earlier. Logged
        with each request record and restored from the last (``budget.session._resumed``)."""
        self._sent: tuple[list[Any], int] | None = None
        """The last copy :meth:`learn_header` measured (the list ``prepare`` returns), and its
        tokens: :meth:`due` reads them rather than estimating the copy again."""

    @property
    def breaker_open(self) -> bool:
        """True after ``compact_breaker_failures`` consecutive failures: no automatic compaction."""
        return self.failures >= self.config.compact_breaker_failures

    def restore(self, log: Sequence[Mapping[str, Any]]) -> None:
        """Take the last checkpoint record of the log (a cleared one clears), and the breaker's
        count of failures."""
        self.failures, self._unreported = failures_of(log), unreported_of(log)
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
            else summary_message(cp.summary, Attachments(cp.constraints, cp.files, cp.tools))
        )

    def view(self, messages: list[Any], fmt: Format) -> list[Any]:
        """The caller's list as the session budgets it: projected when a checkpoint holds."""
        cp = self.checkpoint
        if cp is None or self._message is None:
            return messages
        # The leading system / developer messages as the caller sends them now, not as they were
        # at the compaction: one it added since is sent, never taken for the summarized prefix.
        at, head = resolve_anchor(messages, fmt, cp.anchor, cp.index), pinned_head(messages)
        if at is None or at < head:
            # The caller's history no longer holds the first retained message: the full view
            # is the safe one (nothing is lost, only the window may be exceeded).
            self._log.warning("toolbudget.session.compaction_anchor_lost", anchor=cp.anchor)
            return messages
        return project(messages, head, at, self._message)

    def learn_header(
        self, tokens_after: int, copy: list[Any], tokens: Callable[[Any], int]
    ) -> None:
        """Learn :attr:`header` from a request's report (its ``tokens_after``) and its ``copy``
        (``tokens``: one estimate per message), before the request's record logs it (a resumed
        session then compacts where this one does). Only where :meth:`due` reads it: ``"auto"``
        mode with a summarizer."""
        if self.config.compaction != "auto" or self.summarizer is None:
            return
        sent = sum(tokens(m) for m in copy)
        self.header = max(self.header, tokens_after - sent)
        self._sent = (copy, sent)

    def due(self, prepared: Prepared, tokens: Callable[[Any], int]) -> bool:
        """Whether the budgeted copy ``prepared`` passes the auto-compaction threshold.

        Only in ``"auto"`` mode with a summarizer and the breaker closed. The request's size is
        the report's ``tokens_after`` (the anchored estimate: the usage reported with it plus the
        calibrated estimate of what was added since, which counts the system prompt and tool
        definitions too), or the copy's messages plus the learned :attr:`header` where that is
        more (an unanchored report, as after a compaction, sees no header). The threshold is
        ``window - compact_reserve_tokens - compact_margin_tokens``, scaled down
        under a small window (:func:`limits`). :meth:`learn_header` measured the copy (with
        ``tokens``, one estimate per message) as the request made it.
        """
        cfg = self.config
        if cfg.compaction != "auto" or self.summarizer is None:
            return False
        report = prepared.report
        if self._sent is not None and self._sent[0] is prepared.messages:
            sent = self._sent[1]
        else:
            sent = sum(tokens(m) for m in prepared.messages)
            self.header = max(self.header, report.tokens_after - sent)
        if self.breaker_open:
            return False
        threshold = limits(cfg, report.window, self.header, manual=False).threshold
        return max(report.tokens_after, sent + self.header) > threshold

    def reported(self, prepared: Prepared) -> Prepared:
        """``prepared`` with its report saying a compaction ran, once per compaction, and its
        summary message a dict of its own: a caller marking its copy (a ``cache_control``
        breakpoint) changes no later copy, which a resumed session would not send."""
        sent, head = prepared.messages, pinned_head(prepared.messages)
        if head < len(sent) and sent[head] is self._message is not None:
            sent = [*sent[:head], dict(sent[head]), *sent[head + 1 :]]
        if self._unreported is None:
            return prepared if sent is prepared.messages else Prepared(sent, prepared.report)
        update = {"compacted": True, "summarized_tokens": self._unreported}
        self._unreported = None
        return Prepared(sent, prepared.report.model_copy(update=update))

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
        as_sent: Callable[[list[Any]], list[Any]],
        *,
        manual: bool,
        keep: Keep = lambda text: None,
    ) -> bool:
        """Summarize the prefix of the current view and record the checkpoint.

        False when there is nothing worth summarizing (a prefix under the minimum reclaim, or
        not one message of it fits the summary request) or, for an automatic compaction, when
        the summarizer failed (counted towards the breaker). A manual call re-raises the
        summarizer's error after counting it.

        The summarizer reads the prefix as the requests sent it (``as_sent``: results shown as
        decided, a spilled output as its envelope and ref), not the caller's raw outputs, which
        it would never fit. The summary request itself must fit: what is summarized is cut from
        the oldest end to ``window - compact_reserve_tokens - margin`` (the manual margin for a
        manual call), and never opens on a result whose call was cut (:func:`paired_start`).
        """
        if self.summarizer is None:
            raise InputError("compaction needs a summarizer: Budget.open(..., summarizer=...)")
        lim = limits(self.config, window(), self.header, manual=manual)
        view = self.view(messages, fmt)
        tail = self._tail(view, fmt, tokens, lim)
        if not self._worth_it(view is not messages, tail, lim, manual):
            return False
        pinned = 0 if view is messages else 1  # the last summary, summarized again
        first_summarized, part = summarized_part(as_sent(view), fmt, tail, tokens, lim.room, pinned)
        if not self._fits(first_summarized, tail, manual):
            return False
        extra = self._attachments(messages, view, fmt, tail, lim, keep)
        if manual:
            # The caller chose to try again: the breaker closes, and counts from this call.
            self.failures = 0
        try:
            summary = self._summarize(part, fmt, tokens, manual, lim.reserve, pinned)
        except Exception as exc:
            self._failed(exc, manual, append)
            if manual:
                raise
            return False
        cp = Checkpoint(
            summary=summary,
            anchor=anchor_of(view, fmt, tail.start),
            index=self._source_index(messages, view, tail.start, fmt),
            head=tail.head,
            constraints=extra.constraints,
            files=extra.files,
            tools=extra.tools,
        )
        self._done(cp, tail, manual, append)
        return True

    def _tail(
        self, view: list[Any], fmt: Format, tokens: Callable[[Any], int], lim: Limits
    ) -> Tail:
        """Where the retained tail of ``view`` starts under these limits."""
        return tail_start(
            view,
            fmt,
            min_tokens=lim.tail_tokens,
            min_messages=self.config.compact_tail_messages,
            max_tokens=lim.tail_max_tokens,
            tokens=tokens,
        )

    def _worth_it(self, projected: bool, tail: Tail, lim: Limits, manual: bool) -> bool:
        """Whether the prefix before ``tail`` is worth summarizing; logs a skip when not."""
        # With a checkpoint the view's first message after the head is the summary: a new one
        # must cover more than it, and the retained tail's first message is a caller's message.
        first = tail.head + (1 if projected else 0)
        if tail.start <= first or tail.prefix_tokens < lim.min_reclaim_tokens:
            self._skipped(tail, manual, "the prefix holds less than compact_min_reclaim_tokens")
            return False
        return True

    def _fits(self, first_summarized: int, tail: Tail, manual: bool) -> bool:
        """Whether a message before ``tail`` fits the summary request; logs a skip when none
        does (a summary of nothing would stand for the whole prefix)."""
        if first_summarized < tail.start:
            return True
        self._skipped(
            tail, manual, "the message before the retained tail does not fit a summary request"
        )
        return False

    def _skipped(self, tail: Tail, manual: bool, reason: str) -> None:
        self._log.info(
            "toolbudget.session.compaction_skipped",
            prefix_tokens=tail.prefix_tokens,
            manual=manual,
            reason=reason,
        )

    def _attachments(
        self, messages: list[Any], view: list[Any], fmt: Format, tail: Tail, lim: Limits, keep: Keep
    ) -> Attachments:
        """What the new checkpoint carries verbatim beside its summary."""
        cfg = self.config
        carried = view is not messages and self.checkpoint is not None
        extra = attachments(
            view,
            fmt,
            tail.start,
            constraint_chars=lim.constraint_chars,
            files=cfg.compact_files,
            file_chars=lim.file_chars,
            # What does not fit is stored to read back, never dropped silently (a setting of 0
            # turns the section off; the last checkpoint's are carried as they are).
            keep=keep,
            read_tool=cfg.read_tool_name,
            note=cfg.compact_constraint_chars > 0 and not carried,
        )
        if carried and self.checkpoint is not None:
            old = self.checkpoint
            last = Attachments(old.constraints, old.files, old.tools)
            extra = carry_over(
                view, fmt, extra, last, files=cfg.compact_files, file_chars=lim.file_chars
            )
            at = resolve_anchor(messages, fmt, old.anchor, old.index)
            if at is not None and at - pinned_head(messages) >= old.index - old.head:
                # The view's first user text is the summary message: the constraints come from
                # the caller's history before the tail, as one compaction of it would carry
                # them, so a rule the user stated after the last checkpoint is carried too (not
                # when the caller dropped what it summarized: the last ones are kept then).
                start = self._source_index(messages, view, tail.start, fmt)
                lines = constraint_lines(
                    messages[:start],
                    lim.constraint_chars,
                    keep=keep,
                    read_tool=cfg.read_tool_name,
                    note=cfg.compact_constraint_chars > 0,
                )
                extra = Attachments(lines, extra.files, extra.tools)
        return extra

    def _done(self, cp: Checkpoint, tail: Tail, manual: bool, append: Append) -> None:
        """Log ``cp`` and take it as the checkpoint: the breaker and counters."""
        # With the prefix's tokens: the report after it says what was summarized, also after
        # a resume (``pt``, ``budget.compaction._resumed.unreported_of``).
        append([{**cp.to_record(), "pt": tail.prefix_tokens}])
        self._set(cp)
        self.failures = 0
        self.compactions += 1
        self._unreported = tail.prefix_tokens
        self._log.info(
            "toolbudget.session.compaction",
            prefix_tokens=tail.prefix_tokens,
            tail_tokens=tail.tail_tokens,
            summary_chars=len(cp.summary),
            constraints=len(cp.constraints),
            files=len(cp.files),
            tools=len(cp.tools),
            manual=manual,
        )

    def _summarize(
        self,
        part: list[Any],
        fmt: Format,
        tokens: Callable[[Any], int],
        manual: bool,
        reserve: int,
        pinned: int = 0,
    ) -> str:
        """The summary of ``part``; its oldest rounds after the ``pinned`` first messages (the
        last summary) dropped while the request is too long.

        Raises what the summarizer raised (a SummaryTimeout when it ran past
        ``compact_timeout_s``, an InputError for no text or for more than ``reserve`` tokens)
        once no retry is left.
        """
        retries = 0
        while True:
            try:
                summary = self._call(part)
                check_summary_size(summary, tokens, reserve)
                return summary
            except Exception as exc:
                if not (isinstance(exc, SummaryTooLong) or is_context_overflow(exc)):
                    raise
                cut = drop_oldest_rounds(part[pinned:], fmt, tokens)
                if retries >= SUMMARY_RETRIES or cut == 0:
                    raise
                retries += 1
                # aprepare runs a request again with each summary it awaited
                # (budget.compaction._compacting): a retry it replays was reported in the earlier run.
                replays = getattr(self.summarizer, "replays", None)
                if not (callable(replays) and replays(part)):
                    self._log.warning(
                        "toolbudget.session.compaction_retry",
                        retry=retries,
                        dropped_messages=cut,
                        summarized_messages=len(part) - cut,
                        error=str(exc),
                        manual=manual,
                    )
                part = [*part[:pinned], *part[pinned + cut :]]

    def _call(self, part: list[Any]) -> str:
        """One summarizer call, bounded by ``compact_timeout_s``; the text checked."""
        summarizer = self.summarizer
        assert summarizer is not None  # checked by compact()
        timeout = self.config.compact_timeout_s
        summary = summarizer(part) if timeout is None else within(summarizer, part, timeout)
        if inspect.isawaitable(summary):
            close = getattr(summary, "close", None)
            if close is not None:
                close()
            raise InputError("the summarizer is async (it returned an awaitable): call aprepare()")
        if not isinstance(summary, str):
            raise InputError(f"the summarizer returned a {type(summary).__name__}, not a str")
        if not summary.strip():
            raise InputError("the summarizer returned no summary text")
        return summary

    def _failed(self, exc: Exception, manual: bool, append: Append) -> None:
        """Count a failed compaction; open the breaker (one event) at the threshold."""
        self.failures += 1
        # The count is an input of later requests: logged, so a resumed session keeps the
        # breaker closed or open as this one does (``budget.compaction._resumed.failures_of``).
        append([{"t": FAILED, "failures": self.failures}])
        self._log.warning(
            "toolbudget.session.compaction_failed",
            error=str(exc) or type(exc).__name__,
            failures=self.failures,
            manual=manual,
        )
        if self.failures == self.config.compact_breaker_failures:
            self.breaker_openings += 1
            self._log.error(
                "toolbudget.session.compaction_breaker_open",
                failures=self.failures,
                hint="no automatic compaction until a manual Budget.compact() call succeeds",
            )

    def _source_index(self, messages: list[Any], view: list[Any], start: int, fmt: Format) -> int:
        """Where ``view[start]`` is in the caller's ``messages``.

        A projected view is ``messages[:head] + [summary] + messages[at:]``: the index maps
        back by that shape, not by looking the message up (a message whose content repeats,
        as an agent's "run the tests" turns do, would be found at an earlier copy).
        """
        cp = self.checkpoint
        if view is messages or cp is None:
            return start
        at = resolve_anchor(messages, fmt, cp.anchor, cp.index)
        if at is None:
            return start
        return at + (start - pinned_head(messages) - 1)
