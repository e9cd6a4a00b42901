"""The compaction bench (SPEC §11.8): output prices, priced summary calls, the compacting peers."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from benchmarks import strategies
from benchmarks._count import count_tokens
from benchmarks.cache import CacheSim, Segmenter
from benchmarks.importers import load_dir
from benchmarks.pricing import output_price
from benchmarks.replay import replay_trace
from benchmarks.strategies._base import Messages, StrategySession
from benchmarks.strategies.langchain_summary import MARKER
from benchmarks.trace import Provider, Trace
from tests._ci import require_module


def _trace(model: str, provider: Provider) -> Trace:
    """An empty trace naming ``model``: what output_price reads."""
    return Trace("t", "t", "anthropic", provider, (), (), model=model)


@pytest.mark.parametrize(
    ("model", "provider", "ratio"),
    [
        ("claude-sonnet-4-5-20250929", "anthropic", 5.0),
        ("claude-opus-4-5", "anthropic", 5.0),
        ("gpt-5-codex", "openai", 8.0),
        ("gpt-4.1-mini", "openai", 4.0),
        ("gpt-4o", "openai", 4.0),
        ("gemini-2.5-pro", "google", 8.0),
        ("gemini-3-flash-preview", "google", 6.0),
        ("openrouter/meta-llama/llama-3.3-70b", "openai", 4.0),
    ],
)
def test_output_price_is_the_providers_ratio_per_model(
    model: str, provider: Provider, ratio: float
) -> None:
    """Each model's output price is its published multiple of the input price (4x when unknown)."""
    assert output_price(_trace(model, provider)) == pytest.approx(ratio)


def test_a_side_call_is_priced_but_does_not_break_the_conversations_prefix() -> None:
    """A summary request fed as a side call is billed, yet the next request is still compared with the last one."""
    seg = Segmenter(count_tokens)
    sim = CacheSim("anthropic")
    convo = [{"role": "user", "content": "x " * 2_000}]
    sim.feed(seg.segments(convo), 0.0)
    side = sim.feed(
        Segmenter(count_tokens).segments([{"role": "user", "content": "y"}]), 1.0, side=True
    )
    assert side.billed_tokens > 0
    nxt = sim.feed(seg.segments([*convo, {"role": "assistant", "content": "ok"}]), 2.0)
    assert not nxt.prefix_break


@pytest.fixture(scope="module")
def mini_swe(shared_traces: Path) -> Trace:
    """The longest mini-swe-agent trace of the public set (small header, many rounds)."""
    found, _ = load_dir(shared_traces / "mini-swe-agent")
    assert found
    return max(found, key=lambda t: len(t.requests))


def test_toolbudget_compact_has_no_overflow_where_budgeting_alone_overflows(
    mini_swe: Trace, tmp_path: Path
) -> None:
    """At a 32k window toolbudget alone overflows; with compaction it never does, and pays its summaries."""
    alone = replay_trace(
        mini_swe,
        strategies.get("toolbudget", window=32_000, fsync=False),
        tmp_path / "a",
        window=32_000,
    )
    compact = replay_trace(
        mini_swe,
        strategies.get("toolbudget-compact", window=32_000, fsync=False),
        tmp_path / "b",
        window=32_000,
    )
    assert alone.overflows > 0
    assert compact.overflows == 0
    assert compact.compactions > 0
    assert 0 < compact.summary_billed < compact.billed_tokens
    assert compact.breaker_openings == 0
    assert compact.recoverable_chars == compact.replaced_chars


def _keep(into: list[Messages], i: int, session: StrategySession, out: Messages) -> None:
    """Keep each request copy (a replay's ``on_request`` hook)."""
    into.append(out)


def test_the_compacting_peers_run_and_price_their_summaries(
    mini_swe: Trace, tmp_path: Path
) -> None:
    """LangChain's SummarizationMiddleware (the real package) and the Claude Code model compact at 32k."""
    require_module("langchain", "langchain")
    for name in ("langchain-summary", "claude-code-compact"):
        seen: list[Messages] = []
        replay = replay_trace(
            mini_swe,
            strategies.get(name, window=32_000),
            tmp_path / name,
            window=32_000,
            on_request=partial(_keep, seen),
        )
        assert replay.compactions > 0, name
        assert replay.summary_billed > 0, name
        firsts = [str(out[0]["content"]) for out in seen if isinstance(out[0]["content"], str)]
        opening = (
            "Here is a summary of the conversation to date:"
            if name == "langchain-summary"
            else "This session is being continued"
        )
        assert any(f.startswith(opening) for f in firsts), name
        assert not any(MARKER in f for f in firsts)


def test_bench_under_a_small_window_adds_the_compacting_strategies(tmp_path: Path) -> None:
    """`toolbudget bench --window 2000` replays the compacting strategies too, each row with its figures."""
    import orjson
    from typer.testing import CliRunner

    from budget.cli import app
    from tests.benchmarks.test_bench_cli import _anthropic_file

    traces = tmp_path / "traces"
    traces.mkdir()
    _anthropic_file(traces / "a.json", 6)
    out = tmp_path / "r.json"
    args = ["bench", "--traces", str(traces), "--window", "2000", "--json", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = {r["strategy"]: r for r in orjson.loads(out.read_bytes())["summary"]}
    assert set(strategies.compacting_names()) <= set(rows)
    assert all(
        {"compactions", "summary_billed", "breaker_openings"} <= set(r) for r in rows.values()
    )
    assert rows["none"]["compactions"] == 0
    default = tmp_path / "d.json"
    args = ["bench", "--traces", str(traces), "--json", str(default)]
    assert CliRunner().invoke(app, args).exit_code == 0
    names = {r["strategy"] for r in orjson.loads(default.read_bytes())["summary"]}
    assert not names & set(strategies.compacting_names())
