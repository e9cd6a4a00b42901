"""Replay of traces request by request under each strategy, and the figures of each replay.

For request ``i`` of a trace the strategy gets the history ``trace.messages[:n_i]``, the usage
its provider would have reported for the strategy's own copy of request ``i - 1`` (the anchor an
agent would have: :func:`reported_usage`) and the request's time.
Its request copy is serialized deterministically and counted by :class:`~benchmarks.cache.Segmenter`
(canonical JSON per message, reused for message objects seen in the previous request), with the
trace's reconstructed header (:attr:`~benchmarks.trace.Trace.header_tokens`) in its first segment,
then fed to the :class:`~benchmarks.cache.CacheSim` of the trace's provider, under the cache rules
of its model (:func:`benchmarks.pricing.rules_for`), with the *recorded* timestamp.

Clock: strategies always get a time. A request without a recorded timestamp is placed
:data:`SYNTHETIC_STEP_S` (30 s) after the previous one (the first at 0), so a cold-cache trigger
only fires on pauses that were really recorded. The cache simulator never sees synthetic times:
without recorded ones nothing expires.

Figures per trace and strategy (:class:`Replay`), and over several traces (:class:`Row`):

- ``input_tokens``: all prompt tokens sent (header and messages), summed over requests;
  ``cached_share`` the part read from the cache; ``billed_tokens`` base-price equivalents
  (writes 1.25x, reads 0.1x); ``billed_ratio`` over the ``none`` strategy on the same traces.
- ``peak_tokens``: the largest request; ``overflows``: requests larger than the window.
- ``prefix_breaks``: requests that do not start with the whole previous request copy.
- ``visibility``: per request, the share of the characters of the tool results answering the
  last :data:`RECENT_ROUNDS` rounds that the copy shows in full, averaged over the requests that
  have such output.
- ``recoverable_share``: characters of results shown differently from their original (counted
  once per result, when first replaced) that ``recover(call_id)`` gives back exactly.
- ``ms_median``, ``ms_p99``: time of the strategy's ``prepare`` per request.
- ``readbacks``, ``readback_billed``, ``quoted_visibility``: the read-backs the agent's later
  quotes of hidden lines cost, their price (included in ``billed_tokens``), and the share of
  quoted result lines the copy showed when they were quoted (:mod:`benchmarks.readbacks`).
- ``compactions``, ``summary_billed``, ``breaker_openings``: summaries a compacting strategy made
  (its side calls, :class:`~benchmarks.strategies._base.SideCall`), what they cost (included in
  ``billed_tokens``: the summary request through the same cache simulation, before the request
  it preceded; its output at the model's output price, :func:`benchmarks.pricing.output_price`),
  and how often its circuit breaker opened.

Strategies must never modify their input: the trace's messages are hashed before and after each
replay, and a change raises :class:`~budget.BudgetError` naming the strategy.
"""

from __future__ import annotations

import math
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from benchmarks import strategies
from benchmarks._count import Counter as TokenCounter
from benchmarks._count import counter_for
from benchmarks.attribution import ATTRIBUTED, Attribution, Attributor
from benchmarks.cache import CacheResult, CacheRules, CacheSim, Segment, Segmenter
from benchmarks.pricing import ONE_HOUR_TTL_S, billed_write_price, output_price, rules_for
from benchmarks.readbacks import Quotes, ReadbackTracker
from benchmarks.strategies._base import Messages, Strategy, StrategySession, side_calls
from benchmarks.strategies._common import result_text, safe_name, tool_use_ids
from benchmarks.strategies.toolbudget import ToolbudgetSession
from benchmarks.trace import Trace, Usage, digest
from budget._errors import BudgetError, ConfigError, ContextOverflow
from budget.tokens._windows import resolve_window

__all__ = [
    "BASELINE",
    "DEFAULT_WINDOW",
    "RECENT_ROUNDS",
    "ROW_KEYS",
    "SYNTHETIC_STEP_S",
    "WINDOWED",
    "Engine",
    "LocalEngine",
    "Replay",
    "ReplayJob",
    "Row",
    "aggregate",
    "build_strategies",
    "clock",
    "jobs_for",
    "percentile",
    "replay_job",
    "replay_trace",
    "run",
    "summarize",
    "summarize_by_format",
    "trace_rows",
    "trace_window",
]

BASELINE = "none"
"""The strategy every ``billed_ratio`` is relative to; always replayed."""
DEFAULT_WINDOW = 128_000
SYNTHETIC_STEP_S = 30.0
"""Seconds between requests that have no recorded timestamp (well under a 300 s cache TTL)."""
RECENT_ROUNDS = 3
"""Rounds whose tool output counts for ``visibility``."""
WINDOWED = frozenset(
    {"toolbudget", "toolbudget-compact", "claude-code-compact", "langchain-summary"}
)
"""Strategies told the window ``--window`` counts overflows against (they budget or compact
towards it); the others do what they do whatever the window."""

ROW_KEYS: tuple[str, ...] = (
    "strategy",
    "requests",
    "input_tokens",
    "cached_share",
    "billed_tokens",
    "billed_ratio",
    "peak_tokens",
    "overflows",
    "prefix_breaks",
    "visibility",
    "recoverable_share",
    "ms_median",
    "ms_p99",
    "readbacks",
    "readback_billed",
    "quoted_visibility",
    "compactions",
    "summary_billed",
    "breaker_openings",
)
"""The keys of a summary object, in order."""


@dataclass(frozen=True, slots=True)
class Replay:
    """The figures of one trace replayed under one strategy."""

    strategy: str
    trace: str
    file: str
    format: str
    requests: int
    input_tokens: int
    cached_tokens: int
    billed_tokens: float
    peak_tokens: int
    overflows: int
    prefix_breaks: int
    visibility_sum: float
    """Sum of the per-request visibility shares, over ``visibility_requests`` requests."""
    visibility_requests: int
    replaced_chars: int
    recoverable_chars: int
    sizes: tuple[int, ...]
    """Input tokens of each request."""
    times_s: tuple[float, ...]
    """Seconds the strategy's ``prepare`` took, per request."""
    notes: Mapping[str, Any] = field(default_factory=dict)
    """What the strategy reported beyond the figures. toolbudget: ``staleness_batches``,
    ``batch_reasons`` (batches per trigger), ``spilled`` and ``trimmed`` (decisions made)."""
    readbacks: int = 0
    readback_billed: float = 0.0
    """Part of ``billed_tokens`` that pays for read-backs."""
    quotes: int = 0
    """Result lines the recorded agent quoted later (:mod:`benchmarks.readbacks`)."""
    quotes_visible: int = 0
    compactions: int = 0
    """Summaries the strategy made (each one a side call, priced)."""
    summary_billed: float = 0.0
    """Part of ``billed_tokens`` that pays for summary calls: input at cache rates, output at
    the model's output price."""
    breaker_openings: int = 0
    attribution: Attribution | None = None
    """Where the billed tokens went (:mod:`benchmarks.attribution`; ``none`` and toolbudget)."""
    failed: str | None = None
    """Why this replay stopped, for a job run with ``tolerant`` (its figures are then zeros, and
    :func:`run` leaves the trace out of every strategy's figures)."""
    window: int = DEFAULT_WINDOW
    """The context window this replay ran in (overflows count against it)."""


def trace_window(trace: Trace, window: int | None = None) -> int:
    """The window ``trace`` is replayed in: ``window`` (``--window``) when given, else its
    recorded model's, resolved as a session resolves it (``budget.tokens._windows.resolve_window``:
    the model table, 128k for a model nobody knows)."""
    if window is not None:
        return window
    return resolve_window(trace.model or None)


@dataclass(frozen=True, slots=True)
class Row:
    """Figures of one strategy over some traces: one summary object of the JSON report."""

    strategy: str
    requests: int
    input_tokens: int
    cached_share: float | None
    billed_tokens: float
    billed_ratio: float | None
    peak_tokens: int
    overflows: int
    prefix_breaks: int
    visibility: float | None
    recoverable_share: float | None
    """None when the strategy replaced nothing."""
    ms_median: float | None
    ms_p99: float | None
    readbacks: int = 0
    readback_billed: float = 0.0
    quoted_visibility: float | None = None
    """Share of the quoted result lines the copy showed when quoted; None without quotes."""
    compactions: int = 0
    summary_billed: float = 0.0
    breaker_openings: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The row as a JSON object with exactly :data:`ROW_KEYS`."""
        return {key: getattr(self, key) for key in ROW_KEYS}


# -- the clock ------------------------------------------------------------------------------------


def clock(trace: Trace) -> list[float]:
    """The time each request is prepared at: recorded, or 30 s after the previous request."""
    out: list[float] = []
    prev: float | None = None
    for request in trace.requests:
        now = request.timestamp
        if now is None:
            now = 0.0 if prev is None else prev + SYNTHETIC_STEP_S
        out.append(now)
        prev = now
    return out


# -- per-trace index of rounds and results ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Result:
    msg: int
    block: int
    call_id: str
    text: str
    round: int
    """Index of the round whose call this result answers; -1 when no call was found."""


class _Index:
    """The rounds and results of a trace, computed once and shared by every strategy."""

    def __init__(self, messages: Sequence[dict[str, Any]]) -> None:
        self.round_msgs: list[int] = []
        """Message index of each round's assistant message."""
        round_of: dict[str, int] = {}
        self.by_msg: dict[int, list[_Result]] = {}
        self.by_round: list[list[_Result]] = []
        for i, message in enumerate(messages):
            content = message.get("content")
            if not isinstance(content, list):
                continue
            role = message.get("role")
            if role == "assistant":
                ids = tool_use_ids(content)
                if ids:
                    for call_id in ids:
                        round_of[call_id] = len(self.round_msgs)
                    self.round_msgs.append(i)
                    self.by_round.append([])
            elif role == "user":
                for j, b in enumerate(content):
                    if isinstance(b, dict) and b.get("type") == "tool_result":
                        call_id = str(b.get("tool_use_id", ""))
                        r = _Result(
                            i, j, call_id, result_text(b.get("content")), round_of.get(call_id, -1)
                        )
                        self.by_msg.setdefault(i, []).append(r)
                        if r.round >= 0:
                            self.by_round[r.round].append(r)

    def rounds_before(self, n: int) -> int:
        """How many rounds start within the first ``n`` messages."""
        lo, hi = 0, len(self.round_msgs)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.round_msgs[mid] < n:
                lo = mid + 1
            else:
                hi = mid
        return lo


def _shown(out: Sequence[Any], n: int, r: _Result) -> str | None:
    """The text the request copy shows for result ``r`` (None when the copy lacks it)."""
    if len(out) == n:
        message = out[r.msg]
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and r.block < len(content):
            block = content[r.block]
            if isinstance(block, dict) and block.get("tool_use_id") == r.call_id:
                return result_text(block.get("content"))
    # A copy whose shape differs from the history: look the result up by its call id.
    for message in out:
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for block in content:
            if (
                isinstance(block, dict)
                and block.get("type") == "tool_result"
                and block.get("tool_use_id") == r.call_id
            ):
                return result_text(block.get("content"))
    return None


# -- one replay -------------------------------------------------------------------------------------


def replay_trace(
    trace: Trace,
    strategy: Strategy,
    workdir: Path,
    *,
    window: int = DEFAULT_WINDOW,
    count: TokenCounter | None = None,
    rules: CacheRules | None = None,
    max_requests: int | None = None,
    index: _Index | None = None,
    on_request: Callable[[int, StrategySession, list[dict[str, Any]]], None] | None = None,
    quotes: Quotes | None = None,
) -> Replay:
    """Replay ``trace`` under ``strategy`` (its session working in ``workdir``).

    ``max_requests`` replays only the first requests; ``on_request(i, session, copy)`` is called
    after each request (tests use it to check invariants on every request copy). Requests are
    counted with ``count``, by default the estimator for the trace's model.
    """
    if window <= 0:
        raise ConfigError(f"window must be a positive number of tokens, got {window}")
    index = index if index is not None else _Index(trace.messages)
    count = count if count is not None else counter_for(trace.model)
    quotes = quotes if quotes is not None else ReadbackTracker.for_trace(trace)
    before = digest(trace.messages)
    workdir.mkdir(parents=True, exist_ok=True)
    session = strategy.open(trace, workdir)
    try:
        return _replay(
            trace,
            strategy.name,
            session,
            window,
            count,
            rules,
            max_requests,
            index,
            on_request,
            quotes,
        )
    finally:
        close = getattr(session, "close", None)
        if callable(close):
            close()
        if digest(trace.messages) != before:
            raise BudgetError(
                f"strategy {strategy.name!r} modified the input messages of trace {trace.name!r}"
            )


def _sent(
    session: Any,
    history: Messages,
    usage: Usage | None,
    now: float | None,
    segment: Callable[[Messages], list[Segment]],
    window: int,
) -> tuple[Messages, list[Segment], float, bool]:
    """The copy a strategy sends for ``history``, its segments, the seconds its preparing took,
    and whether the provider refused a first copy over ``window``.

    A provider refuses a prompt over the window (unbilled: nothing is read or written) and the
    agent's harness tells a session that listens (toolbudget's ``on_overflow``, as its proxy and
    integrations do: ``refused``), then sends the request again. A strategy without that hook
    sends its copy whatever its size, and every request over the window counts as an overflow
    (the refused one too).
    """
    started = time.perf_counter()
    out = session.prepare(history, usage=usage, now=now)
    segments = segment(out)
    refused = getattr(session, "refused", None)
    tokens = sum(s.tokens for s in segments)
    if not callable(refused) or tokens <= window:
        return out, segments, time.perf_counter() - started, False
    try:
        refused(tokens, window)
        again = session.prepare(history, usage=usage, now=now)
    except ContextOverflow:
        # Refused too often in a row: the session gives up (an agent would stop there); the
        # replay goes on with the copy as it was, counted over the window as any other.
        return out, segments, time.perf_counter() - started, False
    return again, segment(again), time.perf_counter() - started, True


def reported_usage(
    trace: Trace,
    i: int,
    last: CacheResult | None,
    *,
    one_hour: bool = False,
    window: int | None = None,
) -> Usage | None:
    """The usage a strategy is told before request ``i``: what the provider would have reported
    for the copy the strategy itself sent for request ``i - 1`` (``last``, the cache simulation's
    figures of it), with the recorded answer's output tokens; None where the recording has no
    usage for that request (its agent had none to pass) or there is no request before.
    ``one_hour``: the trace is replayed with 1-hour entries (its writes are reported as such).
    A copy larger than ``window`` was refused by the provider: no usage came for it.

    The recorded usage measures the recorded agent's own prompt: a strategy that sent less, or
    cached otherwise, would never have seen it, and a strategy that learns from its usage (its
    cache regime, its bill, its token calibration) must learn from the same figures the bench
    bills it with. Anthropic reports cache writes apart; OpenAI and Google report the cached
    tokens only, the rest as the prompt's (their automatic caching bills no write).
    """
    recorded = trace.requests[i - 1].usage if i else None
    if recorded is None or last is None:
        return recorded
    if window is not None and last.input_tokens > window:
        return None
    if trace.provider == "anthropic":
        written = last.written_tokens
        return Usage(
            last.uncached_tokens,
            last.cached_tokens,
            written,
            recorded.output_tokens,
            cache_write_1h_tokens=written if one_hour else 0,
        )
    return Usage(
        last.uncached_tokens + last.written_tokens, last.cached_tokens, 0, recorded.output_tokens
    )


def _replay(  # noqa: PLR0915 (one pass over the requests measures every figure)
    trace: Trace,
    name: str,
    session: StrategySession,
    window: int,
    count: TokenCounter,
    rules: CacheRules | None,
    max_requests: int | None,
    index: _Index,
    on_request: Callable[[int, StrategySession, list[dict[str, Any]]], None] | None,
    quotes: Quotes,
) -> Replay:
    segmenter = Segmenter(count)
    sim = CacheSim(trace.provider, rules if rules is not None else rules_for(trace))
    tracker = ReadbackTracker(
        quotes,
        count,
        read_price=sim.rules.read_price,
        write_price=billed_write_price(trace, sim.rules),
    )
    tools = list(getattr(session, "tools", ()))
    times = clock(trace)
    out_price = output_price(trace)
    side_segmenter = Segmenter(count)
    summary_billed = 0.0
    summaries = 0
    total = len(trace.requests) if max_requests is None else min(max_requests, len(trace.requests))
    sizes: list[int] = []
    spent: list[float] = []
    cached = overflows = breaks = 0
    billed = 0.0
    vis_sum = 0.0
    vis_n = 0
    replaced = recoverable = 0
    checked: set[str] = set()
    batches: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    attributor = None
    if name in ATTRIBUTED:
        origins = {r.call_id: (len(r.text), r.round) for rs in index.by_msg.values() for r in rs}
        attributor = Attributor(origins, index.rounds_before, count, sim.rules, tracker.write_price)
    result: CacheResult | None = None
    one_hour = sim.rules.ttl is not None and sim.rules.ttl >= ONE_HOUR_TTL_S

    def segment(copy: Messages) -> list[Segment]:
        return segmenter.segments(
            copy, system=trace.system, tools=tools, header_tokens=trace.header_tokens
        )

    for i in range(total):
        request = trace.requests[i]
        history = trace.request_messages(i)
        n = len(history)
        usage = reported_usage(trace, i, result, one_hour=one_hour, window=window)
        out, segments, seconds, was_refused = _sent(
            session, history, usage, times[i], segment, window
        )
        spent.append(seconds)
        overflows += was_refused

        for call in side_calls(session):
            # A summary request the strategy sent before this request: priced first.
            paid_side = sim.feed(
                side_segmenter.segments(
                    call.messages,
                    system=call.system,
                    header_tokens=trace.header_tokens if call.system is trace.system else 0,
                ),
                request.timestamp,
                side=True,
            )
            cost = paid_side.billed_tokens + out_price * count(call.output)
            summary_billed += cost
            billed += cost
            summaries += 1

        result = sim.feed(segments, request.timestamp)
        if attributor is not None:
            attributor.observe(n, out, segments, result)
        sizes.append(result.input_tokens)
        cached += result.cached_tokens
        billed += result.billed_tokens
        overflows += result.input_tokens > window
        breaks += result.prefix_break
        tracker.observe(i, out, history, session, result.input_tokens)

        if isinstance(session, ToolbudgetSession) and session.report is not None:
            if session.report.staleness_ran:
                batches[session.report.staleness_reason or "?"] += 1
            kinds.update(d.kind for d in session.report.decisions)

        # Visibility of the last rounds' output.
        end = index.rounds_before(n)
        recent_total = recent_full = 0
        for rnd in range(max(0, end - RECENT_ROUNDS), end):
            for r in index.by_round[rnd]:
                if r.msg >= n:
                    continue
                recent_total += len(r.text)
                shared = len(out) == n and out[r.msg] is history[r.msg]
                if shared or _shown(out, n, r) == r.text:
                    recent_full += len(r.text)
        if recent_total:
            vis_sum += recent_full / recent_total
            vis_n += 1

        # Replaced results: each checked once, when first shown differently.
        same_shape = len(out) == n
        for j in range(n):
            if same_shape and out[j] is history[j]:
                continue
            for r in index.by_msg.get(j, ()):
                if r.call_id in checked:
                    continue
                shown = _shown(out, n, r)
                if shown is None or shown == r.text:
                    continue
                checked.add(r.call_id)
                replaced += len(r.text)
                if session.recover(r.call_id) == r.text:
                    recoverable += len(r.text)

        if on_request is not None:
            on_request(i, session, out)

    notes: dict[str, Any] = {}
    if isinstance(session, ToolbudgetSession):
        notes = {
            "staleness_batches": sum(batches.values()),
            "batch_reasons": dict(sorted(batches.items())),
            "spilled": kinds["spilled"],
            "trimmed": kinds["trimmed"],
        }
    paid = tracker.result()
    return Replay(
        strategy=name,
        trace=trace.name,
        file=trace.path,
        format=trace.format,
        requests=total,
        input_tokens=sum(sizes),
        cached_tokens=cached,
        billed_tokens=billed + paid.billed,
        peak_tokens=max(sizes, default=0),
        overflows=overflows,
        prefix_breaks=breaks,
        visibility_sum=vis_sum,
        visibility_requests=vis_n,
        replaced_chars=replaced,
        recoverable_chars=recoverable,
        sizes=tuple(sizes),
        times_s=tuple(spent),
        notes=notes,
        readbacks=paid.readbacks,
        readback_billed=paid.billed,
        quotes=paid.quotes,
        quotes_visible=paid.visible,
        compactions=int(getattr(session, "compactions", summaries)),
        summary_billed=summary_billed,
        breaker_openings=int(getattr(session, "breaker_openings", 0)),
        window=window,
        attribution=None
        if attributor is None
        else attributor.result(readbacks=paid.billed, summaries=summary_billed),
    )


# -- many replays ------------------------------------------------------------------------------------


def build_strategies(
    names: Iterable[str],
    *,
    window: int = DEFAULT_WINDOW,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Strategy]:
    """The named strategies, the baseline first; toolbudget's window is set to ``window``."""
    wanted = list(dict.fromkeys([BASELINE, *names]))
    out = []
    for name in wanted:
        settings = dict((overrides or {}).get(name, {}))
        if name in WINDOWED:
            settings.setdefault("window", window)
        out.append(strategies.get(name, **settings))
    return out


@dataclass(frozen=True, slots=True)
class ReplayJob:
    """One trace under one strategy, and everything :func:`replay_trace` takes besides: the unit
    of work an :class:`Engine` runs (a Ray task each, on the Ray engine)."""

    trace: Trace
    strategy: Strategy
    workdir: Path
    """This replay's own directory (``<root>/<trace number>-<trace>/<strategy>``)."""
    window: int = DEFAULT_WINDOW
    count: TokenCounter | None = None
    rules: CacheRules | None = None
    max_requests: int | None = None
    tolerant: bool = False
    """An exception of the replay comes back as a :class:`Replay` whose ``failed`` says why,
    instead of stopping every other job (a trace of a large corpus that one strategy cannot take)."""


def replay_job(
    job: ReplayJob, *, index: _Index | None = None, quotes: Quotes | None = None
) -> Replay:
    """:func:`replay_trace` on ``job`` (``index`` and ``quotes`` computed when not given)."""
    try:
        return replay_trace(
            job.trace,
            job.strategy,
            job.workdir,
            window=job.window,
            count=job.count,
            rules=job.rules,
            max_requests=job.max_requests,
            index=index,
            quotes=quotes,
        )
    except Exception as exc:
        if not job.tolerant:
            raise
        return _failed(job, exc)


def _failed(job: ReplayJob, exc: Exception) -> Replay:
    """The stand-in replay of a tolerant job that raised ``exc``: zeros, and why."""
    trace = job.trace
    why = f"{trace.name}: the replay under {job.strategy.name} failed ({type(exc).__name__}: {exc})"
    return Replay(
        strategy=job.strategy.name,
        trace=trace.name,
        file=trace.path,
        format=trace.format,
        requests=0,
        input_tokens=0,
        cached_tokens=0,
        billed_tokens=0.0,
        peak_tokens=0,
        overflows=0,
        prefix_breaks=0,
        visibility_sum=0.0,
        visibility_requests=0,
        replaced_chars=0,
        recoverable_chars=0,
        sizes=(),
        times_s=(),
        failed=why[:2000],
    )


class Engine(Protocol):
    """Where the replays run: the seam between :func:`run` and the local loop or a Ray cluster."""

    def replay(
        self, jobs: Sequence[ReplayJob], done: Callable[[ReplayJob, Replay], None] | None = None
    ) -> list[Replay]:
        """Every job's :class:`Replay`, in the order of ``jobs``; ``done(job, replay)`` is called
        in this process as each one finishes (in any order)."""
        ...


@dataclass(frozen=True, slots=True)
class LocalEngine:
    """The replays one after another in this process, as ``toolbudget bench`` has always run them.

    Consecutive jobs on the same trace share its index of rounds and its quotes (computed once).
    """

    def replay(
        self, jobs: Sequence[ReplayJob], done: Callable[[ReplayJob, Replay], None] | None = None
    ) -> list[Replay]:
        """Every job's replay, in order, in this process."""
        out: list[Replay] = []
        shared: tuple[Trace, _Index, Quotes] | None = None
        for job in jobs:
            if shared is None or shared[0] is not job.trace:
                shared = (
                    job.trace,
                    _Index(job.trace.messages),
                    ReadbackTracker.for_trace(job.trace),
                )
            replay = replay_job(job, index=shared[1], quotes=shared[2])
            out.append(replay)
            if done is not None:
                done(job, replay)
        return out


def jobs_for(
    traces: Sequence[Trace],
    chosen: Sequence[Strategy],
    workdir: Path,
    *,
    window: int = DEFAULT_WINDOW,
    count: TokenCounter | None = None,
    rules: CacheRules | None = None,
    max_requests: int | None = None,
) -> list[ReplayJob]:
    """One job per trace and strategy, trace by trace, each in its own directory under
    ``workdir``."""
    return [
        ReplayJob(
            trace,
            strategy,
            workdir / f"{t:04d}-{safe_name(trace.name)}" / safe_name(strategy.name),
            window=window,
            count=count,
            rules=rules,
            max_requests=max_requests,
        )
        for t, trace in enumerate(traces)
        for strategy in chosen
    ]


def run(
    traces: Sequence[Trace],
    chosen: Sequence[Strategy],
    workdir: Path,
    *,
    window: int = DEFAULT_WINDOW,
    count: TokenCounter | None = None,
    rules: CacheRules | None = None,
    max_requests: int | None = None,
    progress: Callable[[Trace, str, int], None] | None = None,
    engine: Engine | None = None,
    on_failure: Callable[[Trace, Replay], None] | None = None,
) -> list[Replay]:
    """Replay every trace under every strategy on ``engine`` (default: :class:`LocalEngine`);
    ``progress(trace, strategy, requests)`` after each replay. The replays come back trace by
    trace, in the order of ``chosen``, whatever the engine.

    Without ``on_failure`` a replay's exception stops the run. With it, a trace whose replay
    fails under any strategy is left out of every strategy's replays (figures side by side must
    cover the same traces), and ``on_failure(trace, replay)`` is called once for it with the first
    failed replay (its ``strategy``, and ``failed`` saying why).
    """
    jobs = [
        replace(job, tolerant=on_failure is not None)
        for job in jobs_for(
            traces,
            chosen,
            workdir,
            window=window,
            count=count,
            rules=rules,
            max_requests=max_requests,
        )
    ]

    def done(job: ReplayJob, replay: Replay) -> None:
        if progress is not None:
            progress(job.trace, job.strategy.name, replay.requests)

    replays = (engine if engine is not None else LocalEngine()).replay(jobs, done)
    if on_failure is None:
        return replays
    failed: dict[str, Replay] = {}
    for replay in replays:
        if replay.failed is not None:
            failed.setdefault(replay.trace, replay)
    for trace in traces:
        if trace.name in failed:
            on_failure(trace, failed[trace.name])
    return [r for r in replays if r.trace not in failed]


# -- summaries -------------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank ``q`` percentile (0 < q <= 100) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def aggregate(strategy: str, replays: Sequence[Replay], baseline_billed: float | None) -> Row:
    """One row over ``replays`` (one strategy, several traces)."""
    input_tokens = sum(r.input_tokens for r in replays)
    billed = sum(r.billed_tokens for r in replays)
    times = [t for r in replays for t in r.times_s]
    vis_n = sum(r.visibility_requests for r in replays)
    median = statistics.median(times) * 1000 if times else None
    p99 = percentile(times, 99)
    return Row(
        strategy=strategy,
        requests=sum(r.requests for r in replays),
        input_tokens=input_tokens,
        cached_share=_ratio(sum(r.cached_tokens for r in replays), input_tokens),
        billed_tokens=billed,
        billed_ratio=_ratio(billed, baseline_billed) if baseline_billed is not None else None,
        peak_tokens=max((r.peak_tokens for r in replays), default=0),
        overflows=sum(r.overflows for r in replays),
        prefix_breaks=sum(r.prefix_breaks for r in replays),
        visibility=_ratio(sum(r.visibility_sum for r in replays), vis_n),
        recoverable_share=_ratio(
            sum(r.recoverable_chars for r in replays), sum(r.replaced_chars for r in replays)
        ),
        ms_median=median,
        ms_p99=None if p99 is None else p99 * 1000,
        readbacks=sum(r.readbacks for r in replays),
        readback_billed=sum(r.readback_billed for r in replays),
        quoted_visibility=_ratio(
            sum(r.quotes_visible for r in replays), sum(r.quotes for r in replays)
        ),
        compactions=sum(r.compactions for r in replays),
        summary_billed=sum(r.summary_billed for r in replays),
        breaker_openings=sum(r.breaker_openings for r in replays),
    )


def summarize(replays: Sequence[Replay]) -> list[Row]:
    """One row per strategy over every trace, in the order the strategies were replayed."""
    by_strategy: dict[str, list[Replay]] = {}
    for r in replays:
        by_strategy.setdefault(r.strategy, []).append(r)
    base = by_strategy.get(BASELINE)
    base_billed = sum(r.billed_tokens for r in base) if base is not None else None
    return [aggregate(name, group, base_billed) for name, group in by_strategy.items()]


def summarize_by_format(replays: Sequence[Replay]) -> dict[str, list[Row]]:
    """The summary of each trace format, formats in order of first appearance."""
    by_format: dict[str, list[Replay]] = {}
    for r in replays:
        by_format.setdefault(r.format, []).append(r)
    return {fmt: summarize(group) for fmt, group in by_format.items()}


def trace_rows(replays: Sequence[Replay]) -> list[dict[str, Any]]:
    """One JSON object per trace and strategy: ``trace``, ``file``, ``format`` and the row keys."""
    base = {r.trace: r.billed_tokens for r in replays if r.strategy == BASELINE}
    out = []
    for r in replays:
        row = aggregate(r.strategy, [r], base.get(r.trace))
        out.append(
            {
                "trace": r.trace,
                "file": r.file,
                "format": r.format,
                "window": r.window,
                **row.as_dict(),
            }
        )
    return out
