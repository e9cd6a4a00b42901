"""What every pass receives: one frozen context; what it returns: decisions. Passes touch no files."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from budget._config import BudgetConfig
from budget._envelope import envelope, stub
from budget._ledger import Decision, Kind, make_decision
from budget._view import ToolResult
from budget.policy import Item, Observed, Outlook, Prices, Verdict
from budget.previews import PREVIEW_VERSION, Earlier
from budget.tokens._tokens import estimate_text_tokens

__all__ = [
    "Candidate",
    "Costs",
    "Pass",
    "PassContext",
    "Staleness",
    "fresh_hidden",
    "replaced",
    "spill",
    "spill_envelope",
    "stub_text",
    "trim",
]


@dataclass(frozen=True, slots=True)
class Candidate:
    """A decided, untrimmed result old enough to be trimmed, with what trimming it would reclaim."""

    result: ToolResult
    decision: Decision
    reclaim_tokens: int


@dataclass(frozen=True, slots=True)
class Staleness:
    """The facts the staleness triggers weigh, gathered by the session for this request."""

    eligible: Sequence[Candidate]
    """Untrimmed results outside the protected rounds and over the floor, oldest first."""
    reclaim_tokens: int
    rewrite_tokens: int
    """Tokens of the request from the first eligible result to the end: what a trim re-writes."""
    estimate_tokens: int
    """Estimated tokens of this request before this request's decisions."""
    window: int
    now: float
    last_request_at: float | None
    requests_so_far: int
    forced: bool
    """An overflow asked for everything but the last round to be trimmed."""
    spills_hold: bool = True
    """The store took the last bodies it was given: this request's spills are taken to hold
    (one it refuses keeps its output whole, after the passes have run)."""
    spared: Callable[[], Collection[str]] = frozenset
    """The eligible results (keys) no batch of this request may trim: the outputs its pointers
    name (the duplicate pass runs first). Asked once the pointers are decided."""


@dataclass(frozen=True, slots=True)
class Costs:
    """The cost model's inputs for this request (``budget.policy``), gathered by the session."""

    prices: Prices
    look: Outlook
    observed: Observed
    cached_end: int
    """Tokens of this request (from its first message) the cache holds from the last request."""
    cold: bool
    """The pause since the last request is over the TTL: the cache expired."""
    items: Callable[[], Sequence[Item]]
    """The eligible results as the cut search sees them, in the order of ``eligible``."""
    verdicts: dict[str, Verdict]
    """Filled by the passes: the priced options behind each decision (the report's ``cost``)."""
    reach: Callable[[], int] = lambda: 0
    """The earliest token a cache lookup still finds an entry at (see ``best_cut``), found
    when the cut search asks: a batch forced by an overflow or the window never walks for it."""
    header: int = 0
    """Tokens of the request before its first message (system prompt, tool definitions)."""
    kind: Callable[[str], tuple[int, int, int]] = lambda _tool: (0, 0, 0)
    """A tool's results weighed and kept whole once answered, those found needed and the read-
    backs they took (``budget.policy.spill_verdict``'s ``kind``): asked per weighed result, so
    a session with many tools pays nothing per request for the ones it does not weigh."""


GROUP_CHARS_PER_WINDOW_TOKEN = 2
"""Half a window token's 4 characters: one group never takes more than half the window."""


@dataclass(frozen=True, slots=True)
class PassContext:
    """One request's inputs to the passes. ``decided`` includes earlier passes' decisions."""

    config: BudgetConfig
    fresh: Sequence[ToolResult]
    """Results seen for the first time, in conversation order."""
    decided: Mapping[str, Decision]
    """Decisions made for ``fresh`` results by earlier passes of this request."""
    group_frozen_chars: Mapping[int, int]
    """Per group: characters shown by its results decided in earlier requests."""
    staleness: Staleness
    ref_for: Callable[[str], str]
    path_of: Callable[[str], str | None]
    cap_scale: float = 1.0
    """1.0 normally; 0.5 on the request after an overflow (caps halved)."""
    text_tokens: Callable[[str], int] = estimate_text_tokens
    """The text token estimator (the session's memoizing one; the plain one by default)."""
    costs: Costs | None = None
    """The cost model's inputs; None: hard limits only (caps, groups, forced trims)."""
    preview_version: int = PREVIEW_VERSION
    """The preview shapes' version of this session (0 for a session logged before shapes)."""
    earlier: Callable[[ToolResult], Earlier | None] = lambda _result: None
    """The stored earlier result of the same call as a fresh one (tool and input), if any."""
    orphans: Callable[[], Sequence[tuple[ToolResult, Decision]]] = lambda: ()
    """The pointers whose earlier output is gone from a history just rebuilt, with their
    decisions (``budget.passes.orphans``)."""
    same_output: Callable[[ToolResult], tuple[str, str] | None] = lambda _result: None
    """(call id, text) of the earlier result shown whole (decided in an earlier request) that a
    fresh one repeats (the same text), or else re-runs (the latest run of the same call)."""

    def group_budget(self) -> int:
        """The aggregate pass's budget: the setting, but never over half the window.

        The setting (200,000 characters by default, about 50k tokens) is sized for windows of 128k
        and more; under a smaller window one group could fill it alone, and no later pass could
        make room for it: half the window, at 4 characters a token, is the most one group takes.
        """
        return min(self.config.group_budget, self.staleness.window * GROUP_CHARS_PER_WINDOW_TOKEN)

    def named_file(self, ref: str) -> str | None:
        """The stored file a replacement text names for ``ref`` (``include_path``), else None."""
        return self.path_of(ref) if self.config.include_path else None

    def cap_for(self, tool: str) -> int | None:
        """The (possibly halved) cap for ``tool``; None when the tool is exempt. Halved, it is
        still above ``preview_chars`` (as ``BudgetConfig.cap_for`` keeps it)."""
        cap = self.config.cap_for(tool)
        if cap is None:
            return None
        return max(int(cap * self.cap_scale), self.config.preview_chars + 1)


class Pass(Protocol):
    """A pass: a plain callable from the request's context to the decisions it makes."""

    def __call__(self, ctx: PassContext) -> Sequence[Decision]: ...


def spill(ctx: PassContext, result: ToolResult, reason: str, *, ref: str | None = None) -> Decision:
    """The decision to spill ``result``: its envelope, computed once and frozen."""
    ref = ref or ctx.ref_for(result.text)
    version = ctx.preview_version
    earlier = ctx.earlier(result) if version >= 1 else None
    if earlier is not None and earlier.ref == ref:
        earlier = None  # the very same text: its own envelope, not a diff against itself
    text = spill_envelope(
        ctx.config,
        result.text,
        ref=ref,
        tool=result.tool,
        is_error=result.is_error,
        path=ctx.named_file(ref),
        version=version,
        earlier=earlier,
    )
    return replaced(result, "spilled", reason, text, ref, preview=version)


def trim(ctx: PassContext, result: ToolResult, reason: str, ref: str | None = None) -> Decision:
    """The decision to trim ``result`` to its stub (its full text stored at ``ref``, or at its
    own hash), computed once and frozen."""
    ref = ref or ctx.ref_for(result.text)
    text = stub_text(ctx.config, result.text, ref, result.tool, ctx.named_file(ref))
    return replaced(result, "trimmed", reason, text, ref)


def fresh_hidden(ctx: PassContext) -> int:
    """Tokens the decisions of this request's fresh results take off the request (each one
    replaced: its text's tokens less its replacement's); none while the store refuses bodies
    (a refused spill keeps its output whole)."""
    if not ctx.staleness.spills_hold:
        return 0
    tt, decided = ctx.text_tokens, ctx.decided
    return sum(
        max(tt(r.text) - tt(d.text), 0)
        for r in ctx.fresh
        if (d := decided.get(r.call_id)) is not None and d.text is not None
    )


def stub_text(cfg: BudgetConfig, text: str, ref: str, tool: str, path: str | None) -> str:
    """The stub of ``text`` under ``cfg``: the one text a trimmed output is ever shown as
    (``path``: its stored file, given where ``include_path`` is on)."""
    return stub(
        text, ref=ref, tool=tool, chars=cfg.stub_chars, read_tool=cfg.read_tool_name, path=path
    )


def spill_envelope(
    cfg: BudgetConfig,
    text: str,
    *,
    ref: str,
    tool: str,
    is_error: bool,
    path: str | None,
    version: int = PREVIEW_VERSION,
    earlier: Earlier | None = None,
) -> str:
    """The envelope of ``text`` under ``cfg``: the one text a spilled output is ever shown as.

    ``version`` is the session's preview version (0: the head + tail of logs written before
    preview shapes, byte for byte); ``earlier`` a stored earlier result of the same call."""
    shape = cfg.policy(tool).preview or cfg.preview_shape
    tail_share = 0.0 if shape == "head" else cfg.error_tail_share if is_error else cfg.tail_share
    return envelope(
        text,
        ref=ref,
        tool=tool,
        preview_chars=cfg.preview_chars,
        tail_share=tail_share,
        read_tool=cfg.read_tool_name,
        path=path,
        version=version,
        shaped=shape == "auto",
        earlier=earlier if shape == "auto" else None,
    )


def replaced(
    result: ToolResult, kind: Kind, reason: str, text: str, ref: str, *, preview: int = 0
) -> Decision:
    """The decision to show ``text`` for ``result``, whose full text is stored at ``ref``
    (``preview``: the preview version its envelope was made with, 0 for none)."""
    return make_decision(
        result.call_id, kind, reason, len(result.text), text, ref, result.tool, None, preview
    )
