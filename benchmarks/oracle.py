"""A hindsight oracle: toolbudget's own mechanism, driven by a plan that knows the trace's future.

The oracle sends what toolbudget can send, no more: a fresh result longer than its cap (in a
second plan, longer than its preview: ``result_cap`` as a ceiling, :data:`SPILL_CHOICES`) may be
replaced by toolbudget's envelope (the same bytes :func:`budget.passes._context.spill_envelope`
makes), an old result or envelope by toolbudget's stub (:func:`budget._envelope.stub`), and only
where toolbudget may trim: outside the last ``protect_rounds`` rounds, longer than
``stale_floor`` at the session's read price (:func:`budget.policy.floor_at`), not exempt. What it knows that toolbudget does not: how many requests remain, when the pauses
that let the cache expire come, and which results the agent will quote later. It therefore
never trims a result before its last quote (a read-back would cost a whole extra request), and
spills a fresh result only when what it saves over the rest of the trace outweighs the
read-backs its later quotes will need.

When to trim, and from where, is chosen by dynamic programming over the requests, on this cost
model (:class:`Model`, priced with the trace's own cache rules, :func:`benchmarks.pricing.rules_for`):

- a token carried from the previous request costs the read price when the cache is warm, the
  write price (Anthropic; the base price elsewhere) when it is cold: the first request, one
  ``ttl`` seconds or more after the previous one, or every request where nothing is cached;
- a trimmed result saves its tokens minus its stub's at every request from its trim on;
- a *batch* at a warm request with start ``s`` trims every eligible result at or after message
  ``s`` and re-writes the prompt from ``s`` (from the start on Anthropic, whose 20-block lookback
  reaches no earlier cache entry past the protected rounds): ``write - read`` for each token of
  the previous request from there on, as it is after the batch;
- at a cold request everything is written anyway: a free batch trims every eligible result at or
  after the current start.

A plan is a sequence of warm batches whose starts never move back (the DP's state is the last
batch's request and start: what is trimmed at or after the start is then exactly what was
eligible at that batch). Only requests where a result became eligible can start a batch (a
later one saves less and re-writes more). The plan found is optimal on the model
(``tests/benchmarks/test_oracle.py`` checks it against enumerating every plan on small traces),
then **replayed like any strategy** (:func:`benchmarks.replay.replay_trace`): the figures come
from the bench's own cache simulator and read-back pricing, not from the model. The oracle's
billed tokens on a trace are the least of its plans' replays and ``none`` (it can always do
nothing), so the oracle is never above ``none``; it keeps what the bound keeps (the last rounds,
each result at least as its preview: :mod:`benchmarks.bound`), so it is never below the bound.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.cache import CacheRules, Segmenter
from benchmarks.previews import tool_calls
from benchmarks.pricing import billed_write_price, rules_for
from benchmarks.readbacks import PAGE_CHARS, Quotes, quotable_lines
from benchmarks.replay import Replay, replay_trace
from benchmarks.strategies._base import Messages
from benchmarks.strategies._common import is_error, result_text
from benchmarks.strategies.toolbudget import SHOWN_DIR, session_config
from benchmarks.trace import Trace, Usage
from benchmarks.turns import trimmable as rounds_trimmable
from budget import BudgetConfig
from budget._envelope import same_output
from budget.passes._context import spill_envelope, stub_text
from budget.policy import floor_at, price_list
from budget.previews import line_delta
from spill import ref_for

__all__ = [
    "NAME",
    "Batch",
    "Candidate",
    "Model",
    "OraclePlan",
    "OracleStrategy",
    "OracleTrace",
    "model_cost",
    "oracle_trace",
    "plan_trace",
    "solve",
    "summary",
]

NAME = "oracle"

Counter = Callable[[Any], int]


@dataclass(frozen=True, slots=True)
class Candidate:
    """A result the oracle may trim: where it is, what trimming saves, from when it may."""

    msg: int
    saved: int
    """Tokens its stub saves at every request it is carried by."""
    eligible_at: int
    """First request at which it may be trimmed."""


@dataclass(frozen=True, slots=True)
class Batch:
    """A trim at request ``request`` of every eligible result at or after message ``start``."""

    request: int
    start: int


@dataclass(frozen=True, slots=True)
class Model:
    """What the DP prices: tokens per message and request, the cache's state, the prices."""

    header: int
    tokens: tuple[int, ...]
    """Tokens of each message as sent before any trim (fresh envelopes applied)."""
    ends: tuple[int, ...]
    """Messages of each request (non-decreasing)."""
    cold: tuple[bool, ...]
    """Request reads nothing from the cache (the first, after a pause, or no caching at all)."""
    read: float
    write: float
    whole_rewrite: bool
    """A warm batch re-writes the whole prompt (Anthropic's lookback), not from its start."""
    candidates: tuple[Candidate, ...]
    header_kept: bool = False
    """A whole re-write reads the header still (the agent marks its system prompt:
    :attr:`benchmarks.cache.CacheRules.system_breakpoint`)."""

    def starts(self) -> list[int]:
        """The starts a batch may have: a candidate's message (only the first: whole re-write)."""
        msgs = sorted({c.msg for c in self.candidates})
        return msgs[:1] if self.whole_rewrite else msgs

    def weight(self, i: int) -> float:
        """What a token carried into request ``i`` costs."""
        return self.write if self.cold[i] else self.read


def _prefix(values: Sequence[int]) -> list[int]:
    out = [0]
    for v in values:
        out.append(out[-1] + v)
    return out


def model_cost(
    model: Model, batches: Sequence[Batch], *, trims: bool = True
) -> tuple[float, dict[int, int]]:
    """The model's cost of a plan, request by request, and each trimmed candidate's request.

    The direct reading of the model (what :func:`solve` optimizes by its decomposition): cold
    requests trim everything eligible at or after the current start for free; a batch whose
    start is before the current one is refused. ``trims=False``: nothing is ever trimmed.
    """
    by_request = {b.request: b.start for b in batches}
    if len(by_request) != len(batches):
        raise ValueError("two batches at one request")
    starts = model.starts()
    current = starts[0] if starts else 0
    trimmed: dict[int, int] = {}
    removed = [0] * len(model.tokens)
    total = 0.0
    prev_end = 0
    for i, end in enumerate(model.ends):
        start = by_request.get(i)
        if start is not None:
            if model.cold[i] or start < current or start >= prev_end:
                raise ValueError(
                    f"batch at request {i}: cold, or its start {start} is before the current "
                    f"{current} or past the previous request's {prev_end} messages"
                )
            current = start
        if trims and (start is not None or model.cold[i]):
            for k, c in enumerate(model.candidates):
                if k not in trimmed and c.eligible_at <= i and c.msg >= current:
                    trimmed[k] = i
                    removed[c.msg] += c.saved
        sizes = [t - r for t, r in zip(model.tokens, removed, strict=True)]
        carried = model.header + sum(sizes[:prev_end])
        tail = sum(sizes[prev_end:end])
        if model.cold[i]:
            total += model.write * (carried + tail)
        elif start is not None:
            whole = model.header if model.header_kept else 0
            kept = whole if model.whole_rewrite else model.header + sum(sizes[:start])
            total += model.read * kept + model.write * (carried - kept + tail)
        else:
            total += model.read * carried + model.write * tail
        prev_end = end
    return total, trimmed


def solve(model: Model) -> tuple[float, list[Batch]]:
    """The least cost of any plan on ``model`` and its warm batches (cold ones are implied)."""
    base, _ = model_cost(model, [], trims=False)
    starts = model.starts()
    cands = model.candidates
    if not starts:
        return base, []
    # Events: requests where a result becomes eligible (a warm batch may start there) and
    # cold requests (a free batch happens there), in order.
    first = min(c.eligible_at for c in cands)
    times = sorted(
        {c.eligible_at for c in cands} | {i for i in range(first, len(model.ends)) if model.cold[i]}
    )
    n_ev, n_st = len(times), len(starts)
    weights = [model.weight(i) for i in range(len(model.ends))]
    suffix = np.cumsum(np.asarray(weights[::-1], dtype=float))[::-1]
    w_ev = np.asarray([suffix[t] for t in times])
    cold_ev = [model.cold[t] for t in times]
    # A[k, j]: tokens saved by the candidates eligible at event k at or after start j.
    elig = np.asarray([[c.eligible_at <= t for c in cands] for t in times], dtype=float)
    after = np.asarray([[c.msg >= s for s in starts] for c in cands], dtype=float)
    saved = np.asarray([c.saved for c in cands], dtype=float)
    a = (elig * saved) @ after
    # R[k, j]: the re-write surcharge of a warm batch at event k with start j.
    prefix = _prefix(model.tokens)
    rewrite = np.zeros((n_ev, n_st))
    for k, t in enumerate(times):
        if cold_ev[k]:
            continue
        end = prefix[model.ends[t - 1]]
        for j, s in enumerate(starts):
            if s >= model.ends[t - 1]:
                # Nothing there was sent yet: no batch can start past the previous request.
                rewrite[k, j] = np.inf
                continue
            whole = end if model.header_kept else model.header + end
            span = whole if model.whole_rewrite else end - prefix[s]
            rewrite[k, j] = (model.write - model.read) * (span - a[k, j])
    next_cold = [n_ev] * (n_ev + 1)
    for k in range(n_ev - 1, -1, -1):
        next_cold[k] = k if cold_ev[k] else next_cold[k + 1]
    value = np.zeros((n_ev + 1, n_st))
    """value[k, j]: least cost to come after a batch at event k with start j (row n_ev: the
    state before any batch, nothing eligible)."""
    choice: dict[tuple[int, int], tuple[int, int]] = {}
    for k in [*range(n_ev - 1, -1, -1), n_ev]:
        a_k = a[k] if k < n_ev else np.zeros(n_st)
        lo = k + 1 if k < n_ev else 0
        cold_at = next_cold[lo] if lo < n_ev else n_ev
        best = np.zeros(n_st)
        via = np.full(n_st, -1)
        at = np.full(n_st, -1)
        if cold_at < n_ev:
            best = w_ev[cold_at] * (a_k - a[cold_at]) + value[cold_at]
            via[:] = cold_at
            at = np.arange(n_st)
        warm = [kk for kk in range(lo, cold_at) if not cold_ev[kk]]
        if warm:
            rows = np.asarray(warm)
            cost = w_ev[rows, None] * (a_k[None, :] - a[rows]) + rewrite[rows] + value[rows]
            pick = cost.argmin(axis=0)
            per_start = cost[pick, np.arange(n_st)]
            # The best start at or after j: a suffix minimum.
            run_v, run_j = np.inf, -1
            for j in range(n_st - 1, -1, -1):
                if per_start[j] < run_v:
                    run_v, run_j = per_start[j], j
                if run_v < best[j] - 1e-9:
                    best[j] = run_v
                    via[j] = rows[pick[run_j]]
                    at[j] = run_j
        value[k] = best
        for j in range(n_st):
            choice[(k, j)] = (int(via[j]), int(at[j]))
    batches: list[Batch] = []
    k, j = n_ev, 0
    while True:
        nk, nj = choice[(k, j)]
        if nk < 0:
            break
        if not cold_ev[nk]:
            batches.append(Batch(times[nk], starts[nj]))
        k, j = nk, nj
    return base + float(value[n_ev, 0]), batches


# -- from a trace ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Res:
    msg: int
    block: int
    call_id: str
    tool: str
    text: str
    error: bool
    round: int


def _results(trace: Trace) -> list[_Res]:
    tools: dict[str, str] = {}
    round_of: dict[str, int] = {}
    rounds = 0
    out: list[_Res] = []
    for j, message in enumerate(trace.messages):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        if message.get("role") == "assistant":
            ids = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
            for b in ids:
                tools[str(b.get("id", ""))] = str(b.get("name", ""))
                round_of[str(b.get("id", ""))] = rounds
            rounds += bool(ids)
        elif message.get("role") == "user":
            for k, b in enumerate(content):
                if isinstance(b, dict) and b.get("type") == "tool_result":
                    call_id = str(b.get("tool_use_id", ""))
                    out.append(
                        _Res(
                            j,
                            k,
                            call_id,
                            tools.get(call_id, ""),
                            result_text(b.get("content")),
                            is_error(b),
                            round_of.get(call_id, -1),
                        )
                    )
    return out


def _with_block(message: dict[str, Any], block: int, text: str) -> dict[str, Any]:
    content = list(message["content"])
    content[block] = {**content[block], "content": text}
    return {**message, "content": content}


@dataclass(frozen=True, slots=True)
class OraclePlan:
    """What the oracle sends for each result of one trace, and when."""

    envelopes: Mapping[tuple[int, int], str] = field(default_factory=dict)
    """(message, block) -> the envelope shown from the result's first request on."""
    stubs: Mapping[tuple[int, int], tuple[int, str]] = field(default_factory=dict)
    """(message, block) -> (request from which it is trimmed, its stub)."""
    originals: Mapping[str, str] = field(default_factory=dict)
    """Call id -> the original text of every replaced result (read back from the store)."""
    batches: int = 0
    """Warm batches the plan makes (cold ones are free and implied)."""
    model_billed: float = 0.0
    """The plan's cost on the DP's model (the replay's figure is the one reported)."""
    model: Model | None = None
    """The model the plan was solved on."""


def _floor(config: BudgetConfig, trace: Trace) -> float:
    """The stale floor of a session replaying ``trace``: at the read price it is given, or its
    price list's (:func:`budget.policy.floor_at`)."""
    given = session_config(config, trace)
    listed = price_list(given.model, read=given.cache_read_price).read
    return floor_at(config.stale_floor, listed, config.stub_chars)


def _cold(trace: Trace, rules: CacheRules) -> list[bool]:
    """Which requests read nothing from the cache: the first, those ``ttl`` or more after the
    previous one (recorded times only, as in the replay), every one without caching."""
    out: list[bool] = []
    prev: float | None = None
    for i, request in enumerate(trace.requests):
        now = request.timestamp
        expired = (
            rules.ttl is not None
            and prev is not None
            and now is not None
            and now - prev >= rules.ttl
        )
        out.append(i == 0 or expired or not rules.enabled)
        prev = now if now is not None else prev
    return out


def _quoted(quotes: Quotes) -> dict[tuple[int, str], list[tuple[int, str]]]:
    """(message, call id) of a result -> the (request, line) of each later quote of it."""
    out: dict[tuple[int, str], list[tuple[int, str]]] = {}
    for i, events in enumerate(quotes.events):
        for line, k in events:
            res = quotes.results[k]
            out.setdefault((res.msg, res.call_id), []).append((i, line))
    return out


@dataclass(frozen=True, slots=True)
class _Prices:
    """One trace's request boundaries and prices, as :func:`plan_trace` weighs them."""

    ends: list[int]
    cold: list[bool]
    read: float
    write: float
    header: int
    prefix: list[int]
    """Cumulative message tokens (untrimmed)."""
    suffix: list[float]
    """suffix[i]: what a token carried from request i to the end costs."""

    def readback(self, i: int, page: int) -> float:
        """A read-back of ``page`` tokens at request ``i``: the extra request (the prompt read
        from the cache, the page written) and the page carried to the end (benchmarks.readbacks)."""
        prompt = self.header + self.prefix[self.ends[i]]
        return prompt * self.read + page * self.write + page * self.read * (len(self.ends) - i - 1)


def plan_trace(
    trace: Trace,
    count: Counter,
    config: BudgetConfig,
    *,
    rules: CacheRules | None = None,
    quotes: Quotes | None = None,
    spill_over: int | None = None,
) -> OraclePlan:
    """The oracle's plan for ``trace`` under toolbudget's ``config`` (caps, rounds, floor, stub
    and preview sizes), priced with the trace's cache rules.

    ``spill_over``: fresh results longer than this (or than their cap) may be spilled at first
    sight; None: only those over their cap, as toolbudget's cap pass does.
    """
    rules = rules if rules is not None else rules_for(trace)
    quotes = quotes if quotes is not None else Quotes(trace)
    ends = [r.n_messages for r in trace.requests]
    if not ends:
        return OraclePlan()
    cold = _cold(trace, rules)
    write = billed_write_price(trace, rules)
    read = rules.read_price if rules.enabled else 1.0
    write = write if rules.enabled else 1.0
    floor = _floor(config, trace)
    messages = list(trace.messages)
    tokens = [count(m) for m in messages]
    header = (
        Segmenter(count)
        .segments([], system=trace.system, header_tokens=trace.header_tokens)[0]
        .tokens
    )
    suffix = [0.0] * (len(ends) + 1)
    for i in range(len(ends) - 1, -1, -1):
        suffix[i] = suffix[i + 1] + (write if cold[i] else read)
    prices = _Prices(ends, cold, read, write, header, _prefix(tokens), suffix)
    quoted = _quoted(quotes)
    trimmable = rounds_trimmable(trace, ends, config.protect_rounds, config.protect_turns)
    envelopes: dict[tuple[int, int], str] = {}
    stubs: dict[tuple[int, int], str] = {}
    cands: list[tuple[tuple[int, int], Candidate]] = []
    originals: dict[str, str] = {}
    whole = _Shown(config, {cid: key for cid, (_, key) in tool_calls(trace).items()})
    results = _results(trace)
    for r in results:
        key = (r.msg, r.block)
        seen = next((i for i, n in enumerate(ends) if n > r.msg), len(ends))
        cap = config.cap_for(r.tool)
        if seen >= len(ends) or r.round < 0 or cap is None:
            continue  # never sent, answering no call, or exempt (like the read-back tool)
        needs = quoted.get((r.msg, r.call_id), [])
        shown = r.text
        pointer = whole.pointer(r, seen, needs)
        if pointer is not None:
            messages[r.msg] = _with_block(messages[r.msg], r.block, pointer)
            tokens[r.msg] = count(messages[r.msg])
            envelopes[key] = pointer
            originals[r.call_id] = r.text
            continue
        if len(r.text) > (cap if spill_over is None else min(cap, spill_over)):
            env = _envelope_if_it_pays(r, messages, count, config, prices, seen, needs)
            if env is not None:
                envelopes[key] = env
                originals[r.call_id] = r.text
                messages[r.msg] = _with_block(messages[r.msg], r.block, env)
                tokens[r.msg] = count(messages[r.msg])
                shown = env
        if shown == r.text and r.text:
            whole.note(r, seen, key)
        # A spilled result may be trimmed later too, as toolbudget's staleness pass does when its
        # envelope is over the floor at the session's read price (budget.policy.floor_at);
        # without a cache there is no floor, as there (any result longer than its stub).
        if rules.enabled and len(shown) <= floor:
            continue
        eligible = next(
            (i for i in range(len(ends)) if r.round <= trimmable[i]),
            len(ends),
        )
        # Trimmed only once it was sent, is outside the protected rounds, and will not be quoted.
        at = max(eligible, seen + 1, max((i for i, _ in needs), default=-1) + 1)
        block = messages[r.msg]["content"][r.block]
        ref = ref_for(r.text)
        path = f"{SHOWN_DIR}/bodies/{ref[:2]}/{ref}.txt" if config.include_path else None
        text = stub_text(config, r.text, ref, r.tool, path)
        saved = count(block) - count({**block, "content": text})
        if at < len(ends) and saved > 0:
            stubs[key] = text
            cands.append((key, Candidate(r.msg, saved, at)))
    # Trimmed only once the quotes of the duplicates pointing to it are past too.
    cands = [
        (k, replace(c, eligible_at=max(c.eligible_at, whole.at_of.get(k, 0)))) for k, c in cands
    ]
    cands = [(k, c) for k, c in cands if c.eligible_at < len(ends)]
    cands.sort(key=lambda kc: (kc[1].msg, kc[0][1]))
    model = Model(
        header=header,
        tokens=tuple(tokens),
        ends=tuple(ends),
        cold=tuple(cold),
        read=read,
        write=write,
        whole_rewrite=trace.provider == "anthropic" and rules.lookback is not None,
        candidates=tuple(c for _, c in cands),
        # The system's own entry exists only from the cache's minimum (CacheSim._anthropic).
        header_kept=rules.system_breakpoint and header >= rules.min_tokens,
    )
    billed, batches = solve(model)
    _, trimmed = model_cost(model, batches)
    by_key = {(r.msg, r.block): r for r in results}
    stub_plan: dict[tuple[int, int], tuple[int, str]] = {}
    for k, i in trimmed.items():
        key = cands[k][0]
        stub_plan[key] = (i, stubs[key])
        originals[by_key[key].call_id] = by_key[key].text
    return OraclePlan(envelopes, stub_plan, originals, len(batches), billed, model)


@dataclass(slots=True)
class _Shown:
    """toolbudget's duplicate pass as the oracle plays it: the results sent whole so far, by
    text and by call (``call_keys``: each call id's ``budget.formats._common.call_key``), and
    how long each must stay whole for the quotes of the pointers to it (``at_of``)."""

    config: BudgetConfig
    call_keys: Mapping[str, str]
    by_text: dict[str, tuple[_Res, int, tuple[int, int]]] = field(default_factory=dict)
    by_call: dict[str, tuple[_Res, int, tuple[int, int]]] = field(default_factory=dict)
    at_of: dict[tuple[int, int], int] = field(default_factory=dict)

    def note(self, r: _Res, seen: int, key: tuple[int, int]) -> None:
        """``r`` (at ``key``), first sent in request ``seen``, is shown whole."""
        self.by_text[r.text] = (r, seen, key)
        if call := self.call_keys.get(r.call_id):
            self.by_call[call] = (r, seen, key)

    def pointer(self, r: _Res, seen: int, needs: Sequence[tuple[int, str]]) -> str | None:
        """The pointer replacing ``r`` when it repeats, or re-runs with a diff that fits a
        preview, a result sent whole in an earlier request, else None. That earlier result then
        stays whole until ``r``'s quotes (``needs``) are past: they are its lines."""
        cfg = self.config
        if not cfg.dedupe_outputs or cfg.policy(r.tool).cap is not None:
            return None
        same = self.by_text.get(r.text)
        delta = None
        if same is None or same[1] >= seen:
            same = self.by_call.get(self.call_keys.get(r.call_id, ""))
            if same is None or same[1] >= seen:
                return None
            limit = min(cfg.preview_chars, len(r.text) // 2)
            delta = line_delta(same[0].text, r.text, limit=limit)
            if delta is None:
                return None
        ref = ref_for(r.text)
        path = f"{SHOWN_DIR}/bodies/{ref[:2]}/{ref}.txt" if cfg.include_path else None
        pointer = same_output(
            r.text, ref=ref, tool=r.tool, same_as=same[0].call_id,
            read_tool=cfg.read_tool_name, path=path, delta=delta,
        )  # fmt: skip
        if len(pointer) >= len(r.text):
            return None
        last = max((i for i, _ in needs), default=-1) + 1
        self.at_of[same[2]] = max(self.at_of.get(same[2], 0), last)
        return pointer


def _envelope_if_it_pays(
    r: _Res,
    messages: Sequence[dict[str, Any]],
    count: Counter,
    config: BudgetConfig,
    prices: _Prices,
    seen: int,
    needs: Sequence[tuple[int, str]],
) -> str | None:
    """toolbudget's envelope for the over-cap result ``r`` if spilling it at first sight (written
    once, then carried to the end) saves more than the read-backs its later quotes of lines the
    preview lacks will cost; None to keep it whole."""
    ref = ref_for(r.text)
    path = f"{SHOWN_DIR}/bodies/{ref[:2]}/{ref}.txt" if config.include_path else None
    env = spill_envelope(config, r.text, ref=ref, tool=r.tool, is_error=r.error, path=path)
    block = messages[r.msg]["content"][r.block]
    saved = count(block) - count({**block, "content": env})
    visible = quotable_lines(env)
    page = count(r.text[:PAGE_CHARS])
    risk = sum(prices.readback(i, page) for i, line in needs if i >= seen and line not in visible)
    if saved > 0 and saved * (prices.write + prices.suffix[seen + 1]) > risk:
        return env
    return None


# -- the plan as a strategy ------------------------------------------------------------------------


class OracleSession:
    """Sends one trace's requests as its plan says; keeps every original (read-backs page it)."""

    def __init__(self, plan: OraclePlan) -> None:
        self._plan = plan
        self._request = 0
        self._memo: dict[tuple[int, frozenset[tuple[int, int]]], dict[str, Any]] = {}
        by_msg: dict[int, list[int]] = {}
        for msg, block in [*plan.envelopes, *plan.stubs]:
            by_msg.setdefault(msg, []).append(block)
        self._by_msg = by_msg

    def prepare(self, messages: Messages, *, usage: Usage | None, now: float | None) -> Messages:
        """The request copy for the next request of the plan."""
        i = self._request
        self._request += 1
        out = list(messages)
        for msg, blocks in self._by_msg.items():
            if msg >= len(out):
                continue
            shown: dict[int, str] = {}
            for b in blocks:
                trim = self._plan.stubs.get((msg, b))
                if trim is not None and trim[0] <= i:
                    shown[b] = trim[1]
                elif (msg, b) in self._plan.envelopes:
                    shown[b] = self._plan.envelopes[(msg, b)]
            if not shown:
                continue
            # The same copy object while nothing changes: the replay's segmenter reuses its work.
            key = (msg, frozenset((b, id(t)) for b, t in shown.items()))
            copy = self._memo.get(key)
            if copy is None:
                copy = out[msg]
                for b in sorted(shown):
                    copy = _with_block(copy, b, shown[b])
                self._memo[key] = copy
            out[msg] = copy
        return out

    def recover(self, call_id: str) -> str | None:
        """The original of a replaced result."""
        return self._plan.originals.get(call_id)


@dataclass(frozen=True, slots=True)
class OracleStrategy:
    """The oracle on one trace's plan, as a strategy :func:`benchmarks.replay.replay_trace` runs."""

    plan: OraclePlan
    name: str = NAME

    def open(self, trace: Trace, workdir: Path) -> OracleSession:
        """A session following the plan."""
        return OracleSession(self.plan)


# -- in a bench run ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OracleTrace:
    """The oracle on one trace: what it billed, and what its plan did."""

    trace: str
    format: str
    billed_tokens: float
    """The lesser of the plan's replay and ``none``'s: the oracle can always do nothing."""
    replayed_tokens: float
    """What the plan's replay billed (read-backs included)."""
    none_tokens: float
    batches: int
    spilled: int
    trimmed: int
    readbacks: int

    def as_dict(self) -> dict[str, Any]:
        """The per-trace JSON object (``billed_ratio`` over ``none``)."""
        return {
            "format": self.format,
            "billed_tokens": self.billed_tokens,
            "billed_ratio": self.billed_tokens / self.none_tokens if self.none_tokens else None,
            "replayed_tokens": self.replayed_tokens,
            "batches": self.batches,
            "spilled": self.spilled,
            "trimmed": self.trimmed,
            "readbacks": self.readbacks,
        }


SPILL_CHOICES: tuple[str | None, ...] = (None, "preview_chars")
"""The first-sight spill rules the oracle plans with, the cheaper replay kept: results over their
cap only (toolbudget's cap pass), or any result longer than its preview (``result_cap`` as a
ceiling, issue 30): the spill decisions are made per result before the DP, so neither rule
dominates the other on every trace."""


def oracle_trace(
    trace: Trace,
    none_tokens: float,
    config: BudgetConfig,
    workdir: Path,
    *,
    count: Counter,
    window: int,
) -> OracleTrace:
    """Plan ``trace`` (under each of :data:`SPILL_CHOICES`), replay each plan like any strategy,
    and keep the least of them and ``none``."""
    quotes = Quotes(trace)
    best: tuple[OraclePlan, Replay] | None = None
    for k, spill_over in enumerate(SPILL_CHOICES):
        plan = plan_trace(
            trace,
            count,
            config,
            quotes=quotes,
            spill_over=None if spill_over is None else getattr(config, spill_over),
        )
        replay = replay_trace(
            trace, OracleStrategy(plan), workdir / f"{k}", window=window, count=count, quotes=quotes
        )
        if best is None or replay.billed_tokens < best[1].billed_tokens:
            best = (plan, replay)
    assert best is not None
    plan, replay = best
    return OracleTrace(
        trace=trace.name,
        format=trace.format,
        billed_tokens=min(replay.billed_tokens, none_tokens),
        replayed_tokens=replay.billed_tokens,
        none_tokens=none_tokens,
        batches=plan.batches,
        spilled=len(plan.envelopes),
        trimmed=len(plan.stubs),
        readbacks=replay.readbacks,
    )


def _share(ours: float | None, oracle: float | None) -> float | None:
    if ours is None or oracle is None or oracle >= 1.0:
        return None
    return (1.0 - ours) / (1.0 - oracle)


def summary(
    oracles: Sequence[OracleTrace],
    ratios: Mapping[str, float | None],
    by_format: Mapping[str, Mapping[str, float | None]],
) -> dict[str, Any]:
    """The ``oracle`` object of the JSON report.

    ``ratios``: each strategy's billed ratio over all traces; ``by_format``: per format, each
    strategy's ratio there. ``shares``: each strategy's ``(1 - ratio) / (1 - oracle)``, the part
    of the oracle's saving it gets (None where the oracle saves nothing).
    """
    base = sum(o.none_tokens for o in oracles)
    total = sum(o.billed_tokens for o in oracles)
    ratio = total / base if base else None
    formats: dict[str, Any] = {}
    for fmt, fmt_ratios in by_format.items():
        group = [o for o in oracles if o.format == fmt]
        fb = sum(o.none_tokens for o in group)
        fr = sum(o.billed_tokens for o in group) / fb if fb else None
        formats[fmt] = {
            "billed_ratio": fr,
            "shares": {name: _share(r, fr) for name, r in fmt_ratios.items()},
        }
    return {
        "billed_tokens": total,
        "billed_ratio": ratio,
        "shares": {name: _share(r, ratio) for name, r in ratios.items()},
        "batches": sum(o.batches for o in oracles),
        "spilled": sum(o.spilled for o in oracles),
        "trimmed": sum(o.trimmed for o in oracles),
        "formats": formats,
        "traces": {o.trace: o.as_dict() for o in oracles},
    }
