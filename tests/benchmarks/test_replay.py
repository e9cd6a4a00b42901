"""The replay's figures on small hand-made traces, worked out by hand or against the cache simulator.

Most tests inject ``strchars``, which counts the characters of every string value in an object
(keys are not counted), so a request's tokens can be added up by hand.
"""

from __future__ import annotations

import io
import itertools
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import pytest
from rich.console import Console

from benchmarks import strategies
from benchmarks.cache import CacheRules, CacheSim, Segmenter
from benchmarks.replay import (
    ROW_KEYS,
    SYNTHETIC_STEP_S,
    Replay,
    aggregate,
    build_strategies,
    clock,
    percentile,
    replay_trace,
    run,
    summarize,
    summarize_by_format,
    trace_rows,
)
from benchmarks.strategies._base import Messages, StrategySession
from benchmarks.trace import Request, Trace, Usage
from budget._errors import BudgetError, ConfigError
from tests.benchmarks._peers import peer_options

Message = dict[str, Any]


def strchars(obj: Any) -> int:
    """Characters of every string value in ``obj`` (dict keys not counted)."""
    if isinstance(obj, str):
        return len(obj)
    if isinstance(obj, dict):
        return sum(strchars(v) for v in obj.values())
    if isinstance(obj, list | tuple):
        return sum(strchars(v) for v in obj)
    return 0


def _result(call_id: str, text: str) -> Message:
    return {
        "type": "tool_result",
        "tool_use_id": call_id,
        "content": [{"type": "text", "text": text}],
    }


def build(
    sizes: list[int],
    *,
    timestamps: bool = True,
    name: str = "hand/made",
    format: str = "anthropic",
    prompts: frozenset[int] = frozenset(),
) -> Trace:
    """A prompt, then one round per size (a Bash call answered by that many characters).

    After each round numbered in ``prompts`` the user types a new prompt (a new turn).
    """
    messages: list[Message] = [{"role": "user", "content": "go"}]
    requests = [Request(1, timestamp=100.0 if timestamps else None)]
    for k, size in enumerate(sizes):
        call_id = f"c{k}"
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": call_id, "name": "Bash", "input": {}}],
            }
        )
        messages.append({"role": "user", "content": [_result(call_id, chr(97 + k) * size)]})
        requests.append(
            Request(
                len(messages),
                usage=Usage(input_tokens=10 * (k + 1), output_tokens=5),
                timestamp=100.0 + 10 * (k + 1) if timestamps else None,
            )
        )
        if k in prompts:
            messages.append({"role": "user", "content": f"next {k}"})
            requests.append(Request(len(messages), timestamp=requests[-1].timestamp))
    return Trace(
        name=name,
        path=f"{name}.json",
        format=format,
        provider="anthropic",
        messages=tuple(messages),
        requests=tuple(requests),
        system="S" * 40,
    )


OPEN = CacheRules(min_tokens=0, ttl=None, lookback=None)
"""Every request is cacheable and nothing expires: cache figures follow from prefixes alone."""


def test_none_figures_worked_by_hand(tmp_path: Path) -> None:
    """The baseline's tokens, cache reads and writes, billing, peak and overflows add up by hand."""
    trace = build([100, 200, 50])
    none = strategies.get("none")
    got = replay_trace(trace, none, tmp_path, window=500, count=strchars, rules=OPEN)
    # Header 40 ("S"*40); prompt: "user" + "go" = 6; assistant: 9 + "tool_use" 8 + "c0" 2 +
    # "Bash" 4 = 23; result message: 4 + "tool_result" 11 + "c0" 2 + "text" 4 + size.
    header, prompt, call = 40, 6, 23
    result = [4 + 11 + 2 + 4 + s for s in (100, 200, 50)]
    sizes = [header + prompt]
    for r in result:
        sizes.append(sizes[-1] + call + r)
    assert got.sizes == tuple(sizes) == (46, 190, 434, 528)
    assert got.requests == 4
    assert got.input_tokens == sum(sizes)
    # Each request reads the whole previous one and writes the rest.
    assert got.cached_tokens == sum(sizes[:-1])
    written = sizes[0] + sum(b - a for a, b in itertools.pairwise(sizes))
    assert got.billed_tokens == pytest.approx(1.25 * written + 0.1 * sum(sizes[:-1]))
    assert got.peak_tokens == 528
    assert got.overflows == 1
    assert got.prefix_breaks == 0
    assert got.visibility_requests == 3
    assert got.visibility_sum == 3.0
    assert got.replaced_chars == got.recoverable_chars == 0
    assert len(got.times_s) == 4
    assert got.notes == {}


def test_observation_masking_visibility_and_recovery_by_hand(tmp_path: Path) -> None:
    """Masking all but the last round gives the visibility and (zero) recoverable share by hand."""
    trace = build([100, 200, 300, 400])
    masking = strategies.get("observation-masking", window=1)
    got = replay_trace(trace, masking, tmp_path, count=strchars, rules=OPEN)
    # Recent rounds (last 3) after rounds 1..4: {0}, {0,1}, {0,1,2}, {1,2,3}; only the newest shows.
    shares = [1.0, 200 / 300, 300 / 600, 400 / 900]
    assert got.visibility_requests == 4
    assert got.visibility_sum == pytest.approx(sum(shares))
    assert got.replaced_chars == 100 + 200 + 300
    assert got.recoverable_chars == 0
    assert got.prefix_breaks == 3  # every request after the second masks one more round
    row = aggregate("observation-masking", [got], None)
    assert row.visibility == pytest.approx(sum(shares) / 4)
    assert row.recoverable_share == 0.0


PEERS: dict[str, dict[str, Any]] = {
    "none": {},
    "toolbudget": {
        "read_tool": True,
        "result_cap": 500,
        "preview_chars": 100,
        "stale_floor": 300,
        "stub_chars": 100,
        "min_reclaim_tokens": 0,
        "protect_rounds": 1,
        "fsync": False,
        "window": 100_000,
    },
    **peer_options(strchars),
}


def test_peers_cover_the_registry() -> None:
    """The per-strategy test below covers every registered strategy."""
    assert list(PEERS) == strategies.names()


@pytest.mark.parametrize("name", list(PEERS))
def test_every_strategy_figures_match_the_cache_simulator(name: str, tmp_path: Path) -> None:
    """Each strategy's figures are those of its own request copies fed to a fresh CacheSim."""
    trace = build([900, 40, 1200, 700, 30, 800], prompts=frozenset({1, 3, 4}))
    copies: list[Messages] = []
    tools: list[Any] = []

    def keep(i: int, session: StrategySession, out: Messages) -> None:
        copies.append(out)
        tools[:] = list(getattr(session, "tools", ()))

    strategy = strategies.get(name, **PEERS[name])
    got = replay_trace(trace, strategy, tmp_path, count=strchars, rules=OPEN, on_request=keep)

    assert got.requests == len(copies) == len(trace.requests) == 10
    sim = CacheSim("anthropic", OPEN)
    segmenter = Segmenter(strchars)
    results = [
        sim.feed(segmenter.segments(c, system=trace.system, tools=tools), r.timestamp)
        for c, r in zip(copies, trace.requests, strict=True)
    ]
    assert got.sizes == tuple(r.input_tokens for r in results)
    assert got.input_tokens == sum(r.input_tokens for r in results)
    assert got.cached_tokens == sum(r.cached_tokens for r in results)
    assert got.billed_tokens == pytest.approx(sum(r.billed_tokens for r in results))
    assert got.prefix_breaks == sum(r.prefix_break for r in results)
    assert got.recoverable_chars <= got.replaced_chars
    # squeezr's rules need lines, repeats or structure: one-line outputs give it nothing.
    if name in ("none", "swe-agent", "squeezr"):
        assert got.replaced_chars == 0
    else:
        assert got.replaced_chars > 0
    if name in ("toolbudget", "claude-code"):
        assert got.recoverable_chars == got.replaced_chars
    if name == "toolbudget":
        assert tools and tools[0]["name"] == "toolbudget_read"
        assert got.notes["spilled"] + got.notes["trimmed"] > 0


def test_toolbudget_gets_the_window_the_anchor_and_the_clock(tmp_path: Path) -> None:
    """toolbudget's session sees the replay's window and spills; a pause triggers a cold batch."""
    sizes = [3000] * 8
    trace = build(sizes)
    late = list(trace.requests)
    # Request 7 comes 10 minutes after request 6: the cache is cold, trimming is free.
    late[7] = Request(late[7].n_messages, late[7].usage, (late[6].timestamp or 0) + 600)
    trace = Trace(trace.name, trace.path, trace.format, trace.provider, trace.messages, tuple(late))
    tb = build_strategies(
        ["toolbudget"],
        window=12345,
        overrides={"toolbudget": {"fsync": False}},
    )[1]
    reasons: list[str | None] = []

    def seen(i: int, session: StrategySession, out: Messages) -> None:
        report = session.report  # type: ignore[attr-defined]
        assert report.window == 12345
        reasons.append(report.staleness_reason if report.staleness_ran else None)

    got = replay_trace(trace, tb, tmp_path, window=12345, on_request=seen)
    assert "cold_cache" in reasons
    assert got.notes["staleness_batches"] == sum(r is not None for r in reasons)
    assert got.prefix_breaks == got.notes["staleness_batches"]
    assert got.recoverable_chars == got.replaced_chars > 0


def test_clock_uses_recorded_times_else_steps_of_30_seconds() -> None:
    """Recorded timestamps are kept; missing ones follow the previous request by 30 s."""
    assert clock(build([1, 2], timestamps=False)) == [0.0, SYNTHETIC_STEP_S, 2 * SYNTHETIC_STEP_S]
    assert clock(build([1, 2])) == [100.0, 110.0, 120.0]
    mixed = build([1, 2])
    reqs = (mixed.requests[0], Request(3), mixed.requests[2])
    mixed = Trace(mixed.name, mixed.path, mixed.format, mixed.provider, mixed.messages, reqs)
    assert clock(mixed) == [100.0, 130.0, 120.0]


class _Mutating:
    """A broken strategy that edits the history it is given."""

    name = "mutating"

    def open(self, trace: Trace, workdir: Path) -> StrategySession:
        return self

    def prepare(self, messages: Messages, *, usage: Usage | None, now: float | None) -> Messages:
        last = messages[-1]["content"]
        if isinstance(last, list):
            last[0]["content"] = "gone"
        return messages

    def recover(self, call_id: str) -> str | None:
        return None


def test_a_strategy_that_modifies_its_input_is_named(tmp_path: Path) -> None:
    """A strategy changing the trace's messages makes the replay fail naming it."""
    trace = build([10, 20])
    with pytest.raises(BudgetError, match="'mutating' modified the input messages"):
        replay_trace(trace, _Mutating(), tmp_path, count=strchars)


def test_max_requests_and_bad_window(tmp_path: Path) -> None:
    """``max_requests`` replays a prefix of the trace; a window below 1 is refused."""
    trace = build([10, 20, 30])
    got = replay_trace(trace, strategies.get("none"), tmp_path, count=strchars, max_requests=2)
    assert got.requests == 2
    assert len(got.sizes) == 2
    with pytest.raises(ConfigError, match="window"):
        replay_trace(trace, strategies.get("none"), tmp_path, window=0)


def test_summaries_ratios_and_json_rows(tmp_path: Path) -> None:
    """Summaries add traces up, divide by the baseline's billing and keep exactly the row keys."""
    traces = [
        build([100, 200], name="a/one"),
        build([300, 10, 500], name="b/two", format="openai-chat"),
    ]
    chosen = build_strategies(["observation-masking"])
    assert [s.name for s in chosen] == ["none", "observation-masking"]
    seen: list[tuple[str, str, int]] = []
    replays = run(
        traces,
        chosen,
        tmp_path,
        count=strchars,
        progress=lambda t, s, n: seen.append((t.name, s, n)),
    )
    assert seen == [
        ("a/one", "none", 3),
        ("a/one", "observation-masking", 3),
        ("b/two", "none", 4),
        ("b/two", "observation-masking", 4),
    ]
    summary = summarize(replays)
    assert [r.strategy for r in summary] == ["none", "observation-masking"]
    none_billed = replays[0].billed_tokens + replays[2].billed_tokens
    masked_billed = replays[1].billed_tokens + replays[3].billed_tokens
    assert summary[0].billed_ratio == 1.0
    assert summary[1].billed_ratio == pytest.approx(masked_billed / none_billed)
    assert summary[0].requests == 7
    assert summary[0].recoverable_share is None
    assert tuple(summary[0].as_dict()) == ROW_KEYS
    rows = trace_rows(replays)
    assert [set(r) for r in rows] == [{"trace", "file", "format", "window", *ROW_KEYS}] * 4
    assert rows[3]["billed_ratio"] == pytest.approx(
        replays[3].billed_tokens / replays[2].billed_tokens
    )
    by_format = summarize_by_format(replays)
    assert list(by_format) == ["anthropic", "openai-chat"]
    assert by_format["openai-chat"][0].requests == 4


def test_percentile_nearest_rank() -> None:
    """The p99 of 100 values is the 99th smallest; of 3 values, the largest."""
    values = [float(v) for v in range(100, 0, -1)]
    assert percentile(values, 99) == 99.0
    assert percentile(values, 50) == 50.0
    assert percentile([3.0, 1.0, 2.0], 99) == 3.0
    assert percentile([], 99) is None


def test_aggregate_of_nothing_has_no_shares() -> None:
    """A row over no request has zero counts and no shares or times."""
    empty = Replay("x", "t", "f", "anthropic", 0, 0, 0, 0.0, 0, 0, 0, 0.0, 0, 0, 0, (), ())
    row = aggregate("x", [empty], 0.0)
    assert row.cached_share is None
    assert row.billed_ratio is None
    assert row.visibility is None
    assert row.ms_median is None
    assert row.ms_p99 is None


def test_each_trace_runs_in_its_recorded_models_window_unless_one_is_given(
    tmp_path: Path,
) -> None:
    """With no ``--window`` a Sonnet 4.5 trace runs in 200k and a trace of an unknown model in
    128k (as a session resolves them), overflows counted against each; a window given is used
    for both. The JSON's trace rows say which."""
    from benchmarks.report import as_json, run_bench

    sonnet = replace(build([30_000] * 2, name="hand/sonnet"), model="claude-sonnet-4-5-20250929")
    unknown = replace(build([30_000] * 2, name="hand/unknown"), model="some-local-model")
    quiet = Console(file=io.StringIO())
    own = run_bench([sonnet, unknown], ["toolbudget"], window=None, console=quiet)
    assert own.window is None
    assert own.windows == {"hand/sonnet": 200_000, "hand/unknown": 128_000}
    rows = {(r["trace"], r["strategy"]): r["window"] for r in as_json(own)["traces"]}
    assert rows == {
        ("hand/sonnet", "none"): 200_000,
        ("hand/sonnet", "toolbudget"): 200_000,
        ("hand/unknown", "none"): 128_000,
        ("hand/unknown", "toolbudget"): 128_000,
    }
    assert [r.trace for r in own.replays] == ["hand/sonnet"] * 2 + ["hand/unknown"] * 2
    given = run_bench([sonnet, unknown], ["toolbudget"], window=10_000, console=quiet)
    assert given.windows == {"hand/sonnet": 10_000, "hand/unknown": 10_000}
    none = [r for r in given.replays if r.strategy == "none"]
    assert all(r.overflows == sum(s > 10_000 for s in r.sizes) > 0 for r in none)
    assert all(r.overflows == 0 for r in own.replays if r.strategy == "none")


class _Usages:
    """A strategy that sends only each history's last message and keeps the usage it is told."""

    name = "last-only"

    def __init__(self) -> None:
        self.told: list[Usage | None] = []

    def open(self, trace: Trace, workdir: Path) -> _Usages:
        return self

    def prepare(self, messages: Messages, *, usage: Usage | None, now: float | None) -> Messages:
        self.told.append(usage)
        return list(messages[-1:])

    def recover(self, call_id: str) -> str | None:
        return None


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_strategy_is_told_the_usage_of_its_own_last_copy(
    provider: Literal["anthropic", "openai"], tmp_path: Path
) -> None:
    """Before each request a strategy is told what its provider would have reported for the copy
    it sent last (the cache simulation's figures of that copy, the recorded output tokens), not
    the recording's usage; nothing where the recording has no usage; OpenAI's usage counts
    what was written as the prompt's."""
    trace = replace(build([900, 40, 1200], prompts=frozenset({0})), provider=provider)
    strategy = _Usages()
    copies: list[Messages] = []
    replay_trace(
        trace, strategy, tmp_path, count=strchars, rules=OPEN,
        on_request=lambda i, s, out: copies.append(out),
    )  # fmt: skip
    sim = CacheSim(provider, OPEN)
    segmenter = Segmenter(strchars)
    results = [
        sim.feed(segmenter.segments(c, system=trace.system), r.timestamp)
        for c, r in zip(copies, trace.requests, strict=True)
    ]
    assert strategy.told[0] is None
    for i in range(1, len(trace.requests)):
        recorded, last, told = trace.requests[i - 1].usage, results[i - 1], strategy.told[i]
        if recorded is None:
            assert told is None  # the first request and the new prompt have no recorded usage
            continue
        assert told is not None and told.output_tokens == recorded.output_tokens == 5
        assert told.prompt_tokens == last.input_tokens != recorded.prompt_tokens
        assert told.cache_read_tokens == last.cached_tokens
        written = last.written_tokens if provider == "anthropic" else 0
        assert told.cache_write_tokens == written
        assert told.input_tokens == last.input_tokens - last.cached_tokens - written
    assert [u is None for u in strategy.told] == [True, True, False, True, False]


def test_a_trace_replayed_with_one_hour_entries_reports_its_writes_as_such(tmp_path: Path) -> None:
    """Under 1-hour entries (the rules of a recording that wrote mostly for an hour) every write
    the strategy is told of was made for an hour, in the Anthropic shape's ``cache_creation``;
    under 5-minute entries none was, and the shape has no breakdown."""
    trace = build([900, 40, 1200])
    told: dict[str, list[Usage]] = {}
    for name, ttl in (("1h", 3_600.0), ("5m", 300.0)):
        strategy = _Usages()
        rules = CacheRules(min_tokens=0, ttl=ttl, lookback=None)
        replay_trace(trace, strategy, tmp_path / name, count=strchars, rules=rules)
        told[name] = [u for u in strategy.told if u is not None]
    assert told["1h"] and all(u.cache_write_1h_tokens == u.cache_write_tokens for u in told["1h"])
    written = told["1h"][0].cache_write_tokens
    assert written > 0
    assert told["1h"][0].as_anthropic()["cache_creation"] == {
        "ephemeral_5m_input_tokens": 0,
        "ephemeral_1h_input_tokens": written,
    }
    assert all(u.cache_write_1h_tokens == 0 for u in told["5m"])
    assert "cache_creation" not in told["5m"][0].as_anthropic()


def test_no_usage_is_told_after_a_copy_the_window_refused(tmp_path: Path) -> None:
    """A copy larger than the window was refused by the provider: the strategy is told no usage
    for it, and the usage of every copy that fitted."""
    trace = build([900, 40, 1200, 30])
    strategy = _Usages()
    copies: list[Messages] = []
    replay_trace(
        trace, strategy, tmp_path, count=strchars, rules=OPEN, window=1_000,
        on_request=lambda i, s, out: copies.append(out),
    )  # fmt: skip
    segmenter, sim = Segmenter(strchars), CacheSim("anthropic", OPEN)
    sizes = [
        sim.feed(segmenter.segments(c, system=trace.system), None).input_tokens for c in copies
    ]
    over = [size > 1_000 for size in sizes]
    assert any(over) and not all(over)
    for i in range(1, len(copies)):
        if trace.requests[i - 1].usage is not None:
            assert (strategy.told[i] is None) == over[i - 1]
