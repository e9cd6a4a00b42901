"""The hindsight oracle: its DP against brute force, hand-worked plans, and its soundness."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks._count import counter_for
from benchmarks.bound import bound_billed
from benchmarks.oracle import (
    Batch,
    Candidate,
    Model,
    OracleStrategy,
    model_cost,
    oracle_trace,
    plan_trace,
    solve,
)
from benchmarks.pricing import rules_for
from benchmarks.readbacks import Quotes
from benchmarks.replay import build_strategies, replay_trace
from benchmarks.strategies._common import is_prompt, result_text
from benchmarks.synthetic import generate
from benchmarks.trace import Request, Trace
from benchmarks.turns import trimmable
from budget import BudgetConfig
from tests._shared import SharedTraces

CONFIG = BudgetConfig(include_path=True, window=128_000)
"""toolbudget's settings as the bench runs it (the oracle keeps its rounds, caps and sizes)."""


def _plans(model: Model) -> Iterator[list[Batch]]:
    """Every plan of ``model``: warm batches at increasing requests, starts never moving back,
    each start within what the previous request sent."""
    starts = model.starts()
    warm = [i for i in range(1, len(model.ends)) if not model.cold[i]]

    def grow(at: int, current: int, plan: list[Batch]) -> Iterator[list[Batch]]:
        yield list(plan)
        for k in range(at, len(warm)):
            i = warm[k]
            for s in starts:
                if current <= s < model.ends[i - 1]:
                    plan.append(Batch(i, s))
                    yield from grow(k + 1, s, plan)
                    plan.pop()

    yield from grow(0, starts[0] if starts else 0, [])


def _brute_force(model: Model) -> float:
    return min(model_cost(model, plan)[0] for plan in _plans(model))


def _cut_model(*, cold_at: frozenset[int] = frozenset()) -> Model:
    """Six requests of an OpenAI-style cache (reads 0.1, writes at the base price): a small old
    result (message 1) before a 10,000-token file kept whole (message 3), then a large result
    (message 4); both may be trimmed from request 3 on."""
    return Model(
        header=0,
        tokens=(100, 1000, 100, 10_000, 5000, 100, 100, 100),
        ends=(2, 4, 5, 6, 7, 8),
        cold=tuple(i == 0 or i in cold_at for i in range(6)),
        read=0.1,
        write=1.0,
        whole_rewrite=False,
        candidates=(Candidate(1, 900, 3), Candidate(4, 4500, 3)),
    )


def test_the_dp_picks_the_hand_computed_best_cut() -> None:
    """Trimming from the first eligible result would re-write the 10,000-token file (+8,010);
    cutting at the large result saves 4,500 x 0.3 for a 500 x 0.9 re-write: 22,620 - 900."""
    model = _cut_model()
    assert model_cost(model, [], trims=False)[0] == pytest.approx(22_620)
    assert model_cost(model, [Batch(3, 1)])[0] == pytest.approx(22_620 + 8_010)
    billed, batches = solve(model)
    assert batches == [Batch(3, 4)]
    assert billed == pytest.approx(21_720)


def test_a_whole_rewrite_reads_the_header_when_the_agent_marks_its_system_prompt() -> None:
    """With a whole re-write (Anthropic's lookback) a batch re-writes the header too, unless the
    system prompt has its own breakpoint: then it is read, 1,000 x (1.25 - 0.1) cheaper."""
    base = replace(_cut_model(), header=1000, whole_rewrite=True, write=1.25)
    plan = [Batch(3, 1)]
    rewritten = model_cost(base, plan)[0]
    kept = model_cost(replace(base, header_kept=True), plan)[0]
    assert rewritten - kept == pytest.approx(1000 * (1.25 - 0.1))
    assert (
        model_cost(base, [], trims=False)[0]
        == model_cost(replace(base, header_kept=True), [], trims=False)[0]
    )


def test_the_dp_waits_for_a_cold_cache_when_that_saves_more() -> None:
    """With request 4 after a pause, the free trim there (5,400 x 1.1) beats trimming the large
    result at request 3, whose cut would keep the small one from ever being trimmed."""
    model = _cut_model(cold_at=frozenset({4}))
    billed, batches = solve(model)
    assert batches == []
    assert billed == pytest.approx(37_290 - 5_940)
    assert model_cost(model, [])[1] == {0: 4, 1: 4}


def test_without_a_cache_every_result_is_trimmed_as_soon_as_it_may_be() -> None:
    """Where nothing is cached every request is cold: each result is trimmed at the request it
    becomes eligible, for free (the no-cache regime)."""
    model = Model(
        header=50,
        tokens=(100, 3000, 100, 3000, 100, 3000, 100),
        ends=(2, 4, 6, 7, 7),
        cold=(True,) * 5,
        read=1.0,
        write=1.0,
        whole_rewrite=False,
        candidates=(Candidate(1, 2500, 2), Candidate(3, 2500, 3), Candidate(5, 2500, 4)),
    )
    billed, batches = solve(model)
    assert batches == []
    cost, trimmed = model_cost(model, batches)
    assert trimmed == {0: 2, 1: 3, 2: 4}
    assert billed == pytest.approx(cost)
    assert billed == pytest.approx(_brute_force(model))


@st.composite
def models(draw: st.DrawFn) -> Model:
    """Small models: up to 6 requests, 4 candidates, any cache regime."""
    n_req = draw(st.integers(2, 6))
    ends = [draw(st.integers(1, 2))]
    for _ in range(n_req - 1):
        ends.append(ends[-1] + draw(st.integers(0, 2)))
    n_msg = ends[-1]
    tokens = draw(st.lists(st.integers(50, 4000), min_size=n_msg, max_size=n_msg))
    read, write = draw(st.sampled_from([(0.1, 1.25), (0.1, 1.0), (0.5, 1.0), (1.0, 1.0)]))
    no_cache = read == write == 1.0
    cold = [True] + [no_cache or draw(st.booleans()) for _ in range(n_req - 1)]
    candidates = []
    for msg in sorted(draw(st.sets(st.integers(0, n_msg - 1), max_size=4))):
        seen = next(i for i, n in enumerate(ends) if n > msg)
        if seen + 1 >= n_req:
            continue
        saved = draw(st.integers(1, tokens[msg]))
        candidates.append(Candidate(msg, saved, draw(st.integers(seen + 1, n_req - 1))))
    return Model(
        header=draw(st.integers(0, 500)),
        tokens=tuple(tokens),
        ends=tuple(ends),
        cold=tuple(cold),
        read=read,
        write=write,
        whole_rewrite=draw(st.booleans()),
        candidates=tuple(candidates),
        header_kept=draw(st.booleans()),
    )


@settings(max_examples=150, deadline=None)
@given(models())
def test_the_dp_finds_the_least_cost_plan_of_brute_force(model: Model) -> None:
    """On small models the DP's cost is the least over every plan, and its plan costs that."""
    billed, batches = solve(model)
    assert billed == pytest.approx(_brute_force(model), abs=1e-6)
    assert model_cost(model, batches)[0] == pytest.approx(billed, abs=1e-6)


def _none_and_bound(trace: Trace, workdir: Path) -> tuple[float, float]:
    count = counter_for(trace.model)
    none = replay_trace(trace, build_strategies([])[0], workdir / "none", count=count)
    return none.billed_tokens, bound_billed(trace, count)


def test_the_oracle_is_between_the_bound_and_none_on_every_recorded_trace(
    shared_trace_set: SharedTraces, tmp_path: Path
) -> None:
    """On every public trace the oracle bills no less than the bound and no more than none, and
    every result its plan replaced reads back exactly."""
    traces, _ = shared_trace_set
    saved_somewhere = False
    for k, trace in enumerate(traces):
        none, bound = _none_and_bound(trace, tmp_path / f"{k}")
        count = counter_for(trace.model)
        oracle = oracle_trace(
            trace, none, CONFIG, tmp_path / f"{k}" / "oracle", count=count, window=128_000
        )
        assert bound <= oracle.billed_tokens + 1e-6, trace.name
        assert oracle.billed_tokens <= none, trace.name
        saved_somewhere |= oracle.billed_tokens < none
        plan = plan_trace(trace, count, CONFIG)
        replay = replay_trace(trace, OracleStrategy(plan), tmp_path / f"{k}" / "check", count=count)
        if replay.replaced_chars:
            assert replay.recoverable_chars == replay.replaced_chars, trace.name
    assert saved_somewhere


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 10_000))
def test_the_oracle_is_between_the_bound_and_none_on_synthetic_traces(seed: int) -> None:
    """On synthetic sessions of any seed the oracle is never below the bound nor above none."""
    import tempfile

    trace = generate(1, seed=seed)[0]
    with tempfile.TemporaryDirectory() as tmp:
        none, bound = _none_and_bound(trace, Path(tmp))
        oracle = oracle_trace(
            trace,
            none,
            CONFIG,
            Path(tmp) / "oracle",
            count=counter_for(trace.model),
            window=128_000,
        )
    assert bound <= oracle.billed_tokens + 1e-6
    assert oracle.billed_tokens <= none


def _openai_trace(sizes: list[int], pause_before: int) -> Trace:
    """An OpenAI-priced trace of one round per size, one request per round 30 s apart but for a
    10-minute pause before request ``pause_before``, results of ``sizes`` characters whose
    lines the agent never quotes."""
    messages: list[dict[str, object]] = [{"role": "user", "content": "start"}]
    requests = [Request(1, timestamp=0.0)]
    for k, size in enumerate(sizes):
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"c{k}", "name": "sh", "input": {}}],
            }
        )
        text = "".join(f"{k}-{i:06d}\n" for i in range(size // 9 + 1))[:size]
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"c{k}", "content": text}],
            }
        )
        at = requests[-1].timestamp or 0.0
        gap = 600.0 if len(requests) == pause_before else 30.0
        requests.append(Request(len(messages), timestamp=at + gap))
    return Trace("hand/oracle", "o.json", "openai", "openai", tuple(messages), tuple(requests))


def test_the_plan_of_a_hand_made_trace_is_the_brute_force_best() -> None:
    """On a 9-request trace with a pause, the model built from it has candidates, the DP's plan
    costs the least of every plan, and it trims at the cold request after the pause."""
    sizes = [9_000, 600, 30_000, 700, 12_000, 500, 800, 900]
    trace = replace(_openai_trace(sizes, pause_before=7), model="gpt-5")
    count = counter_for(trace.model)
    plan = plan_trace(trace, count, CONFIG)
    assert plan.model is not None and len(plan.model.candidates) >= 2
    assert plan.model.cold[7] and sum(plan.model.cold) == 2
    assert plan.model_billed == pytest.approx(_brute_force(plan.model))
    assert {at for at, _ in plan.stubs.values()} == {7}


def _turns_trace(reply: bool) -> Trace:
    """Three prompts of one round each, a request after each result; ``reply``: the agent
    answers each turn in text before the next prompt (else the prompt follows the result)."""
    messages: list[dict[str, object]] = []
    requests = []
    for k in range(3):
        messages.append({"role": "user", "content": f"task {k}"})
        messages.append(
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"c{k}", "name": "sh"}]}
        )
        block = {"type": "tool_result", "tool_use_id": f"c{k}", "content": "x" * 5_000}
        messages.append({"role": "user", "content": [block]})
        requests.append(Request(len(messages)))
        if reply:
            messages.append({"role": "assistant", "content": [{"type": "text", "text": "done"}]})
    return Trace("hand/turns", "t.json", "anthropic", "anthropic", tuple(messages), tuple(requests))


def test_the_plan_may_trim_where_the_session_may() -> None:
    """Three answered turns of one round each: by the rounds alone nothing is trimmable before
    the sixth round; once the third prompt is in, the first turn's round is. A prompt right
    after a result (no answer between: an interruption) opens no turn."""
    trace = _turns_trace(reply=True)
    ends = [r.n_messages for r in trace.requests]
    assert trimmable(trace, ends, 5, 2) == [-1, -1, 0]
    assert trimmable(trace, ends, 5, None) == [-1, -1, -1]  # no round is (-1)
    assert trimmable(trace, ends, 5, 1) == [-1, 0, 1]
    unanswered = _turns_trace(reply=False)
    assert trimmable(unanswered, [r.n_messages for r in unanswered.requests], 5, 1) == [-1] * 3


def test_the_plan_trims_only_what_toolbudget_may(
    shared_trace_set: SharedTraces, tmp_path: Path
) -> None:
    """Every stub a plan shows is of a result outside the protected rounds, over the floor where
    the trace caches, and never quoted again from that request on."""
    traces, _ = shared_trace_set
    for trace in traces:
        count = counter_for(trace.model)
        quotes = Quotes(trace)
        plan = plan_trace(trace, count, CONFIG, quotes=quotes)
        cached = rules_for(trace).enabled
        starts = [
            j
            for j, m in enumerate(trace.messages)
            if m.get("role") == "assistant"
            and isinstance(m.get("content"), list)
            and any(isinstance(b, dict) and b.get("type") == "tool_use" for b in m["content"])
        ]
        round_of = {
            str(b.get("id")): starts.index(j)
            for j in starts
            for b in trace.messages[j]["content"]
            if isinstance(b, dict) and b.get("type") == "tool_use"
        }
        last_quote: dict[tuple[int, str], int] = {}
        for i, events in enumerate(quotes.events):
            for _, k in events:
                res = quotes.results[k]
                last_quote[(res.msg, res.call_id)] = i
        # The prompts that open a turn: after something other than the user's own messages.
        prompts = [
            j
            for j, m in enumerate(trace.messages)
            if is_prompt(m) and (j == 0 or trace.messages[j - 1].get("role") != "user")
        ]
        for (msg, block), (at, _) in plan.stubs.items():
            result = trace.messages[msg]["content"][block]
            call_id = str(result["tool_use_id"])
            n = trace.requests[at].n_messages
            rounds = sum(1 for s in starts if s < n)
            # Outside the protected rounds, or from before the user's second-to-last prompt
            # (``protect_turns``).
            before = [p for p in prompts if p < n]
            turn = before[-2] if len(before) >= 2 else -1
            settled = msg < turn
            assert round_of[call_id] < rounds - CONFIG.protect_rounds or settled, trace.name
            # Over the floor where a cache is kept; without one, any result longer than its stub.
            if cached:
                assert len(result_text(result.get("content"))) > CONFIG.stale_floor, trace.name
            assert last_quote.get((msg, call_id), -1) < at, trace.name


def test_the_header_is_kept_only_where_the_cache_would_hold_it() -> None:
    """A marked system prompt under the cache's minimum has no entry of its own in the
    simulator (``CacheSim``), so the oracle's model re-writes it with the rest, as it is billed."""
    from benchmarks.cache import CacheRules

    trace = replace(
        _openai_trace([9_000, 600, 30_000, 700], pause_before=99),
        provider="anthropic",
        model="claude-sonnet-4-5",
        header_tokens=2_000,
    )
    count = counter_for(trace.model)
    for minimum, kept in ((1_024, True), (4_096, False)):
        rules = CacheRules(min_tokens=minimum, system_breakpoint=True)
        plan = plan_trace(trace, count, CONFIG, rules=rules)
        assert plan.model is not None and plan.model.header >= 2_000
        assert plan.model.header_kept == kept, minimum


def _one_round_turns(turns: int = 8, size: int = 20_000) -> Trace:
    """An OpenAI trace of ``turns`` user turns of one read each (``size`` characters), a
    request after each prompt and after each result, 30 s apart."""
    messages: list[dict[str, object]] = []
    requests = []
    for k in range(turns):
        messages.append({"role": "user", "content": f"Task {k}: look at part {k}."})
        call = {"type": "tool_use", "id": f"c{k}", "name": "sh", "input": {"cmd": f"cat p{k}"}}
        messages.append({"role": "assistant", "content": [call]})
        requests.append(Request(len(messages) - 1, timestamp=60.0 * k))
        text = "".join(f"{k}-{i:06d} a line of output\n" for i in range(size // 25 + 1))[:size]
        block = {"type": "tool_result", "tool_use_id": f"c{k}", "content": text}
        messages.append({"role": "user", "content": [block]})
        requests.append(Request(len(messages), timestamp=60.0 * k + 30.0))
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"Done {k}."}]})
    return Trace("hand/turns", "t.json", "openai", "openai", tuple(messages), tuple(requests))


def test_the_bound_stays_under_the_oracle_when_turns_end(tmp_path: Path) -> None:
    """On a trace of one-round turns, where the oracle trims inside the protected rounds (the
    user's turns), the bound lets the same results vanish and stays the outer limit."""
    trace = _one_round_turns()
    count = counter_for(trace.model)
    none = replay_trace(trace, build_strategies([])[0], tmp_path / "none", count=count)
    bound = bound_billed(trace, count)
    oracle = oracle_trace(
        trace, none.billed_tokens, CONFIG, tmp_path / "oracle", count=count, window=128_000
    )
    assert bound <= oracle.billed_tokens + 1e-6
    assert bound < bound_billed(trace, count, protect_turns=None)
