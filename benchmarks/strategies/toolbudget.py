"""toolbudget itself: the real :class:`budget.Budget` on a real session directory.

Each trace gets its own session directory under the replay's ``workdir`` (a real
:class:`spill.LocalStore`: bodies and the decision log on disk, with the default ``fsync``), so the
time per request includes what an agent would pay. The replay passes the usage of the session's
own previous copy (:func:`benchmarks.replay.reported_usage`) as the usage anchor and the
request's time as ``now``.

``recover(call_id)`` reads back through the decision's ref with :meth:`Budget.read`, the same path
the read-back tool uses.

Every recorded agent has file tools (a shell, a file reader), so by default the strategy adopts
toolbudget as such an agent would: envelopes name the spilled file (``include_path``) and no
read-back tool is added, like the ``claude-code`` strategy. As with the peers' ``shown_dir``, the
path an envelope names is the body's path under a fixed directory (:data:`SHOWN_DIR`), while the
body itself is written under ``workdir``: the figures then do not depend on where the replay ran
(a temporary directory's random name, or a Ray worker's), so two runs, and two engines, give the
same tokens. An agent without file tools sends the
read-back tool's definition with every request; ``read_tool=True`` models that (its ~130 tokens
then count in every request's header, which on a short trace with nothing to spill is the whole
difference from no budgeting).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.pricing import billed_write_price, rules_for
from benchmarks.strategies._base import Declaration, Messages, SideCall
from benchmarks.trace import Trace, Usage
from budget import Budget, BudgetConfig, Report, summarizers
from budget.compaction._transcript import render_transcript
from budget.policy import price_list
from spill import LocalStore

__all__ = [
    "SHOWN_DIR",
    "STRATEGY",
    "STRATEGY_COMPACT",
    "RecordingSummarizer",
    "ToolbudgetSession",
    "ToolbudgetSettings",
    "session_config",
    "usage_dict",
]

SHOWN_DIR = "/home/user/.toolbudget/sessions/session"
"""The session directory envelopes name (an adopter's session directory, fixed like the peers'
``shown_dir`` so that runs are byte-identical wherever the replay's ``workdir`` is)."""


def usage_dict(usage: Usage) -> dict[str, Any]:
    """A usage in the Anthropic shape ``Budget.prepare`` reads (input excludes the cache; the
    writes split by lifetime in ``cache_creation`` when some were made for an hour)."""
    return usage.as_anthropic()


class RecordingSummarizer:
    """The extractive summarizer, recording each summary request as the SDK adapters send it.

    The request is :data:`budget.summarizers.PROMPT` as the system prompt and the transcript of
    the summarized messages as the one user turn (what ``summarizers.anthropic`` sends), so the
    replay prices the call a real model summary would cost; the summary itself is extractive,
    the same text the LangChain peer's fake model returns, so summary sizes are equal.
    """

    def __init__(self) -> None:
        self.extractive = summarizers.extractive()
        self.calls: list[SideCall] = []

    def __call__(self, messages: Any) -> str:
        """The extractive summary of ``messages``; the request recorded."""
        summary = self.extractive(messages)
        assert isinstance(summary, str)
        request = [{"role": "user", "content": render_transcript(messages)}]
        self.calls.append(SideCall(request, summary, summarizers.PROMPT))
        return summary


class _ShownStore(LocalStore):
    """A :class:`spill.LocalStore` whose ``path_of`` names the body under ``shown_dir``."""

    def __init__(self, path: Path, config: BudgetConfig, shown_dir: str) -> None:
        super().__init__(path, quota_bytes=config.quota_bytes, fsync=config.fsync)
        self._shown_dir = shown_dir

    def path_of(self, ref: str) -> str:
        """Where the body of ``ref`` would be in a session directory at ``shown_dir``."""
        inside = os.path.relpath(super().path_of(ref), self.path)
        return f"{self._shown_dir}/{Path(inside).as_posix()}"


class ToolbudgetSession:
    """One trace's Budget session; keeps the last report so callers can see what each request did."""

    def __init__(
        self,
        config: BudgetConfig,
        path: Path,
        *,
        read_tool: bool = False,
        summarizer: RecordingSummarizer | None = None,
        shown_dir: str = SHOWN_DIR,
    ) -> None:
        store = _ShownStore(path, config, shown_dir)
        try:
            # Every trace is replayed as Anthropic Messages (benchmarks/trace.py): named, not
            # detected, so the read-back tool has its shape from the first request on.
            self.budget = Budget(store, config, format="anthropic", summarizer=summarizer)
        except BaseException:
            store.close()
            raise
        self.summarizer = summarizer
        self.tools: list[dict[str, Any]] = [self.budget.read_tool()] if read_tool else []
        """Tool definitions this strategy adds to every request (the read-back tool, if any)."""
        self.report: Report | None = None
        """The report of the last request prepared."""

    def read_back(self, call_id: str) -> None:
        """The replay charged a read-back of ``call_id``'s hidden output: the session counts it,
        as it counts a real agent's later call that opens the spilled file (a recording never
        holds that call: its agent saw the output whole)."""
        # Which result: the rate is over results (a second read-back of one is a part it needed).
        decision = self.budget.decision(call_id)
        self.budget.note_readback(decision.ref if decision is not None else None)

    def refused(self, tokens: int, window: int) -> None:
        """The provider refused the last copy (``tokens``) as over ``window``: told to the
        session as an agent's harness tells it (``Budget.on_overflow``, Anthropic's error text),
        before the request is sent again."""
        self.budget.on_overflow(f"prompt is too long: {tokens} tokens > {window} maximum")

    def prepare(self, messages: Messages, *, usage: Usage | None, now: float | None) -> Messages:
        """The Budget's request copy for ``messages`` (``usage``: the replay's of this session's
        own last copy, compacted or not: :func:`benchmarks.replay.reported_usage`)."""
        prepared = self.budget.prepare(
            messages, usage=None if usage is None else usage_dict(usage), now=now
        )
        self.report = prepared.report
        return prepared.messages

    def recover(self, call_id: str) -> str | None:
        """The stored original of a spilled or trimmed result, read back by its ref."""
        decision = self.budget.decision(call_id)
        if decision is None or decision.ref is None:
            return None
        return self.budget.read(decision.ref)

    def take_side_calls(self) -> list[SideCall]:
        """The summary requests made since the last call (none without compaction)."""
        if self.summarizer is None:
            return []
        calls, self.summarizer.calls = self.summarizer.calls, []
        return calls

    @property
    def compactions(self) -> int:
        """Compactions this session made (checkpoints recorded)."""
        return self.budget._compactor.compactions

    @property
    def breaker_openings(self) -> int:
        """Times the compaction breaker opened."""
        return self.budget._compactor.breaker_openings

    def close(self) -> None:
        """Release the session directory."""
        self.budget.close()


@dataclass(frozen=True, slots=True)
class ToolbudgetSettings:
    """toolbudget with a given configuration (the library's defaults unless overridden)."""

    budget: BudgetConfig = field(default_factory=lambda: BudgetConfig(include_path=True))
    read_tool: bool = False
    """Add the read-back tool to every request (an agent without file tools)."""
    compact: bool = False
    """Give the session the extractive summarizer (:class:`RecordingSummarizer`)."""
    shown_dir: str = SHOWN_DIR
    """The session directory the envelopes name (the bodies are written under ``workdir``)."""


def _configure(
    *, read_tool: bool = False, shown_dir: str = SHOWN_DIR, **overrides: Any
) -> ToolbudgetSettings:
    """The strategy's settings; keyword overrides are :class:`BudgetConfig` settings.

    Envelopes name the spilled file (under ``shown_dir``) unless ``include_path=False`` is given;
    ``read_tool=True`` adds the read-back tool to every request (an agent without file tools).
    """
    config = BudgetConfig(**{"include_path": True, **overrides})
    return ToolbudgetSettings(config, read_tool, shown_dir=shown_dir)


def _configure_compact(*, read_tool: bool = False, **overrides: Any) -> ToolbudgetSettings:
    """toolbudget with ``compaction="auto"`` and the extractive summarizer; keyword overrides
    are :class:`BudgetConfig` settings (its compaction thresholds are the library defaults)."""
    config = BudgetConfig(**{"include_path": True, "compaction": "auto", **overrides})
    return ToolbudgetSettings(config, read_tool, compact=True)


def _open(settings: ToolbudgetSettings, trace: Trace, workdir: Path) -> ToolbudgetSession:
    """A Budget session in ``workdir/session``, configured as :func:`session_config` says."""
    summarizer = RecordingSummarizer() if settings.compact else None
    return ToolbudgetSession(
        session_config(settings.budget, trace),
        workdir / "session",
        read_tool=settings.read_tool,
        summarizer=summarizer,
        shown_dir=settings.shown_dir,
    )


def session_config(config: BudgetConfig, trace: Trace) -> BudgetConfig:
    """``config`` as a session replaying ``trace`` is given it: told the trace's model as an
    adopter would (it picks the tokenizer family of the estimates and the published cache prices; the window
    stays as configured). Where the library's price list does not know the model (no model, or
    one it does not list) the trace is billed at its provider's prices
    (:func:`benchmarks.pricing.rules_for`), and the session is given them where the settings
    leave them open: an adopter knows what their provider charges, and sets it
    (``cache_read_price``, ``cache_write_price``) where the library cannot tell. The caching
    style too (``cache_breakpoints``): the session is fed every trace in Anthropic's shape, where
    an adopter of an OpenAI-shaped API would hand it that API's messages, whose format tells
    it (``Format.breakpoints``)."""
    if config.model is None and trace.model:
        config = config.model_copy(update={"model": trace.model})
    if not price_list(config.model).known:
        rules = rules_for(trace)
        billed = {
            "cache_read_price": rules.read_price,
            "cache_write_price": billed_write_price(trace, rules),
            "cache_breakpoints": trace.provider == "anthropic",
        }
        unset = {k: v for k, v in billed.items() if getattr(config, k) is None}
        config = config.model_copy(update=unset)
    return config


STRATEGY = Declaration("toolbudget", _configure, _open)
STRATEGY_COMPACT = Declaration("toolbudget-compact", _configure_compact, _open)
"""toolbudget with its second layer: automatic compaction by the extractive summarizer."""
