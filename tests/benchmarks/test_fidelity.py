"""Bench fidelity (issue 18, items 1, 2, 8): baselines are what the agents sent and paid.

Hand-made traces are counted with ``chars`` (the characters of every string value, keys not
counted) so each figure can be added up by hand; the real traces in ``../shared/traces`` check
the same rules on the recordings.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from benchmarks._count import counter_for
from benchmarks.cache import CacheRules, CacheSim, Segmenter
from benchmarks.calibration import calibrate, format_totals
from benchmarks.header import header_tokens, with_header
from benchmarks.importers import Skipped, load_dir, load_file
from benchmarks.importers._openhands import TRUNCATION_MARKER, truncate_content
from benchmarks.pricing import pricing_for, rules_for
from benchmarks.replay import build_strategies, replay_trace
from benchmarks.report import as_json, render, run_bench
from benchmarks.trace import Request, Trace, Usage
from tests._shared import SharedTraces

Message = dict[str, Any]


def chars(obj: Any) -> int:
    """Characters of every string value in ``obj`` (dict keys not counted)."""
    if isinstance(obj, str):
        return len(obj)
    if isinstance(obj, dict):
        return sum(chars(v) for v in obj.values())
    if isinstance(obj, list | tuple):
        return sum(chars(v) for v in obj)
    return 0


def _text(role: str, text: str) -> Message:
    return {"role": role, "content": [{"type": "text", "text": text}]}


def _trace(
    messages: list[Message],
    requests: list[Request],
    *,
    model: str | None = "claude-sonnet-4-5",
    provider: Any = "anthropic",
    system: str = "",
) -> Trace:
    return Trace(
        name="t/hand",
        path="hand.json",
        format="anthropic",
        provider=provider,
        messages=tuple(messages),
        requests=tuple(requests),
        system=system,
        model=model,
    )


def _results(trace: Trace) -> dict[str, str]:
    return {
        b["tool_use_id"]: "".join(p.get("text", "") for p in b["content"])
        for m in trace.messages
        for b in m["content"]
        if b["type"] == "tool_result"
    }


# -- item 1: OpenHands observations as the model got them ---------------------------------------


def _oh_call(event_id: int, call: str, action: str, response: str, prompt: int) -> dict[str, Any]:
    return {
        "id": event_id,
        "source": "agent",
        "action": action,
        "args": {"command": "ls"},
        "tool_call_metadata": {
            "function_name": action,
            "tool_call_id": call,
            "model_response": {
                "id": response,
                "choices": [{"message": {"content": "", "tool_calls": []}}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": 5},
            },
        },
    }


def _oh_obs(event_id: int, cause: int, kind: str, content: str) -> dict[str, Any]:
    return {
        "id": event_id,
        "source": "environment",
        "observation": kind,
        "cause": cause,
        "content": content,
    }


def test_truncate_content_keeps_head_and_tail_around_openhands_marker() -> None:
    """250 characters cut to 100 keep the first 50 and the last 50 around OpenHands' marker."""
    text = "a" * 60 + "b" * 90 + "c" * 100
    cut = truncate_content(text, 100)
    assert cut == "a" * 50 + "\n[... Observation truncated due to length ...]\n" + "c" * 50
    assert len(cut) == 50 + 47 + 50
    assert truncate_content(text, 250) == text
    assert truncate_content(text, None) == text


def test_openhands_results_are_cut_to_the_recorded_max_message_chars(tmp_path: Path) -> None:
    """A run output over the recorded limit is cut as OpenHands cut it; a file read is not."""
    history = [
        {"id": 0, "source": "user", "action": "message", "args": {"content": "go"}},
        _oh_call(1, "t1", "run", "r1", 500),
        _oh_obs(2, 1, "run", "a" * 60 + "b" * 90 + "c" * 100),
        _oh_call(3, "t2", "read", "r2", 700),
        _oh_obs(4, 3, "read", "r" * 250),
    ]
    doc = {
        "instance_id": "x__y-1",
        "metadata": {"llm_config": {"model": "gpt-4o", "max_message_chars": 100}},
        "history": history,
    }
    path = tmp_path / "output.jsonl"
    path.write_text(json.dumps(doc) + "\n", encoding="utf-8")
    (trace,) = load_file(path, tmp_path, format="openhands")
    results = _results(trace)
    assert results["t1"] == "a" * 50 + TRUNCATION_MARKER + "c" * 50
    assert results["t2"] == "r" * 250
    assert trace.meta["max_message_chars"] == 100
    assert trace.meta["import_notes"]["results_truncated_to_max_message_chars"] == 1


def test_openhands_export_without_config_uses_the_30000_default(tmp_path: Path) -> None:
    """A bare event export has no LLM config: 40,000 characters become 15,000 + 47 + 15,000."""
    history = [
        {"id": 0, "source": "user", "action": "message", "args": {"content": "go"}},
        _oh_call(1, "t1", "run", "r1", 500),
        _oh_obs(2, 1, "run", "x" * 20_000 + "y" * 20_000),
        _oh_call(3, "t2", "run", "r2", 600),
        _oh_obs(4, 3, "run", "ok"),
    ]
    path = tmp_path / "traj.json"
    path.write_text(json.dumps(history), encoding="utf-8")
    (trace,) = load_file(path, tmp_path, format="openhands")
    assert _results(trace)["t1"] == "x" * 15_000 + TRUNCATION_MARKER + "y" * 15_000
    assert trace.meta["max_message_chars"] == 30_000


def test_openhands_maven_log_is_replayed_as_sent(shared_traces: Path) -> None:
    """The 915,640-character Maven log of the shared set replays as the 30,047 characters sent."""
    path = shared_traces / "openhands" / "nunu0404__Python_OpenHands" / "output.jsonl"
    (trace,) = load_file(path, shared_traces)
    sizes = sorted(len(t) for t in _results(trace).values())
    assert sizes[-2:] == [30_047, 30_047]


# -- item 1: the header a recording omits -------------------------------------------------------


def _header_trace(first_prompt: int) -> Trace:
    # chars: system "sys" 3 (+ "tools": []), user "hello" 4+4+5 = 13, assistant "ok" 9+4+2 = 15,
    # user "again" 4+4+5 = 13.
    messages = [_text("user", "hello"), _text("assistant", "ok"), _text("user", "again")]
    return _trace(
        messages,
        [Request(1, Usage(first_prompt)), Request(3, Usage(first_prompt + 40))],
        system="sys",
    )


def test_header_is_the_first_recorded_prompt_minus_its_estimate() -> None:
    """Recorded 1,000 tokens for system 3 + message 13 leave a 984-token header; a deficit, 0."""
    assert header_tokens(_header_trace(1000), chars) == 984
    assert header_tokens(_header_trace(10), chars) == 0
    no_usage = _trace([_text("user", "hello")], [Request(1)])
    assert header_tokens(no_usage, chars) == 0


def test_header_is_added_to_every_request_of_every_strategy(tmp_path: Path) -> None:
    """With a 984-token header, requests count 1,000 and 1,028 tokens under none and toolbudget."""
    trace = dataclasses.replace(_header_trace(1000), header_tokens=984)
    off = CacheRules(enabled=False)
    for strategy in build_strategies(["toolbudget"]):
        replay = replay_trace(trace, strategy, tmp_path / strategy.name, count=chars, rules=off)
        assert replay.sizes == (3 + 984 + 13, 3 + 984 + 13 + 15 + 13), strategy.name
        assert replay.billed_tokens == 1000 + 1028


def test_shared_headers_make_the_first_request_match_the_recording(
    shared_trace_set: SharedTraces,
) -> None:
    """Claude Code gets 7-28k header tokens, mini-swe-agent none, and request 0 equals its record."""
    traces, _ = shared_trace_set
    for trace in traces:
        first = trace.requests[0]
        assert first.usage is not None, trace.name
        count = counter_for(trace.model)
        segments = Segmenter(count).segments(
            trace.request_messages(0), system=trace.system, header_tokens=trace.header_tokens
        )
        replayed = sum(s.tokens for s in segments)
        if trace.header_tokens:
            assert replayed == first.usage.prompt_tokens, trace.name
        else:
            assert replayed >= first.usage.prompt_tokens, trace.name
        if trace.format == "claude-code":
            assert 7_000 <= trace.header_tokens <= 30_000, trace.name
        if trace.format == "mini-swe-agent":
            assert trace.header_tokens == 0, trace.name


# -- item 2: cache rules per provider and model ------------------------------------------------


def _priced(model: str | None, provider: Any, usage: Usage | None = None) -> CacheRules:
    return rules_for(
        _trace([_text("user", "x")], [Request(1, usage)], model=model, provider=provider)
    )


def test_anthropic_minimum_cacheable_length_per_model() -> None:
    """Opus 4.5 and Haiku 4.5 cache from 4,096 tokens, Haiku 3.5 from 2,048, Sonnet 4.5 from 1,024."""
    assert _priced("claude-opus-4-5-20251101", "anthropic").min_tokens == 4096
    assert _priced("claude-haiku-4-5-20251001", "anthropic").min_tokens == 4096
    assert _priced("claude-3-5-haiku-20241022", "anthropic").min_tokens == 2048
    assert _priced("claude-sonnet-4-5-20250929", "anthropic").min_tokens == 1024
    assert _priced("claude-sonnet-4-20250514", "anthropic").min_tokens == 1024


def test_one_hour_writes_recorded_are_billed_twice_the_input_price() -> None:
    """Mostly 1-hour writes recorded: entries live an hour and a 2,000-token write bills 4,000."""
    one_hour = Usage(10, cache_read_tokens=5, cache_write_tokens=300, cache_write_1h_tokens=300)
    rules = _priced("claude-opus-4-7", "anthropic", one_hour)
    assert (rules.ttl, rules.write_price, rules.min_tokens) == (3600.0, 2.0, 4096)
    five_min = Usage(10, cache_read_tokens=5, cache_write_tokens=300)
    assert _priced("claude-opus-4-7", "anthropic", five_min).write_price == 1.25
    sim = CacheSim("anthropic", CacheRules(min_tokens=0, write_price=2.0))
    segs = Segmenter(lambda _: 1000).segments([_text("user", "x")])
    assert sim.feed(segs).billed_tokens == 4000.0


def test_anthropic_lookback_counts_content_blocks_not_messages() -> None:
    """An entry 26 blocks back (2 messages) is out of reach; 20 blocks back it is read."""

    def request(results: int) -> list[Message]:
        calls = [{"type": "tool_use", "id": f"c{i}", "name": "t", "input": {}} for i in range(19)]
        blocks = [
            {"type": "tool_result", "tool_use_id": f"c{i}", "content": []} for i in range(results)
        ]
        return [
            _text("user", "task"),
            {"role": "assistant", "content": calls[:1]},
            {"role": "user", "content": blocks},
        ]

    for results, cached in ((25, 0), (19, 200)):
        sim = CacheSim("anthropic", CacheRules(min_tokens=0, ttl=None))
        segmenter = Segmenter(lambda _: 100)
        # Request 1: header 100 + task 100, written. Request 2 adds 1 + ``results`` blocks.
        sim.feed(segmenter.segments(request(results)[:1]))
        assert sim.feed(segmenter.segments(request(results))).cached_tokens == cached, results


def test_openai_and_gemini_rules_by_model_family() -> None:
    """GPT-5 reads at 0.1x, GPT-4.1 at 0.25x, GPT-4o at 0.5x; Gemini 3 Pro from 4,096, exact."""
    assert _priced("gpt-5.5", "openai").read_price == 0.1
    assert _priced("openai/gpt-5-ca", "openai").read_price == 0.1
    assert _priced("gpt-4.1-mini", "openai").read_price == 0.25
    assert _priced("gpt-4o", "openai").read_price == 0.5
    gpt = _priced("gpt-5", "openai")
    assert (gpt.min_tokens, gpt.step) == (1024, 128)
    gemini = _priced("google/gemini-3-pro-preview", "openai")  # via OpenRouter: Gemini's rules
    assert (gemini.min_tokens, gemini.step, gemini.read_price) == (4096, 1, 0.1)
    assert _priced("gemini-2.5-flash", "google").min_tokens == 1024


def test_no_cache_read_recorded_means_no_caching(tmp_path: Path) -> None:
    """A recording with usage but no cache read replays with nothing cached: billed = sent."""
    usage = Usage(900)
    messages = [_text("user", "a" * 2000), _text("assistant", "ok"), _text("user", "b" * 10)]
    requests = [Request(1, usage), Request(3, usage)]
    trace = _trace(messages, requests, model="llama-4-maverick", provider="openai")
    assert pricing_for(trace).basis == "no cache read recorded"
    (none,) = build_strategies([])
    replay = replay_trace(trace, none, tmp_path, count=chars)
    # chars: header 0; user 4+4+2000 = 2008; then + assistant 15 + user 4+4+10 = 18.
    assert replay.sizes == (2008, 2008 + 15 + 18)
    assert replay.cached_tokens == 0
    assert replay.billed_tokens == 2008 + 2041


# -- item 2: the calibration table ------------------------------------------------------------


def test_calibration_sets_recorded_against_simulated(tmp_path: Path) -> None:
    """Recorded 150 of 300 prompt tokens cached: 50%, next to none's simulated share."""
    messages = [_text("user", "a" * 2000), _text("assistant", "ok"), _text("user", "b" * 10)]
    usages = [Usage(100), Usage(50, cache_read_tokens=150)]
    requests = [Request(1, usages[0]), Request(3, usages[1])]
    trace = _trace(messages, requests, model="gpt-4o", provider="openai")
    (none,) = build_strategies([])
    rules = CacheRules(min_tokens=1024, step=128)
    replay = replay_trace(trace, none, tmp_path, count=chars, rules=rules)
    # Request 1 shares the 2,008-token first request: 1,024 + 7 * 128 = 1,920 cached of 2,041.
    assert replay.cached_tokens == 1920
    (row,) = calibrate([trace], [replay])
    assert row.recorded_prompt_tokens == 300
    assert row.recorded_cached_share == 0.5
    assert row.replayed_prompt_tokens == 2008 + 2041
    assert row.simulated_cached_share == 1920 / 4049
    assert row.recorded_misses == 0  # request 1 read 150 tokens
    (total,) = format_totals([row, row])
    assert (total.recorded_prompt_tokens, total.recorded_cached_tokens) == (600, 300)


def test_bench_prints_and_keeps_the_calibration_and_header(tmp_path: Path) -> None:
    """run_bench keeps one calibration row per trace with usage; it is printed and in the JSON."""
    messages = [_text("user", "a" * 2000), _text("assistant", "ok"), _text("user", "b" * 10)]
    usages = [Usage(1500, cache_write_tokens=1000), Usage(20, cache_read_tokens=2500)]
    trace = _trace(messages, [Request(1, usages[0]), Request(3, usages[1])])
    (trace,) = with_header([trace])
    console = Console(record=True, width=200)
    result = run_bench([trace], ["toolbudget"], console=Console(quiet=True), workdir=tmp_path)
    render(result, console)
    out = console.export_text()
    assert "Calibration" in out
    assert f"{trace.header_tokens:,}" in out
    (row,) = as_json(result)["calibration"]
    assert row["header_tokens"] == trace.header_tokens > 0
    assert row["recorded_cached_share"] == 2500 / 5020


def test_calibration_on_shared_traces(shared_trace_set: SharedTraces, tmp_path: Path) -> None:
    """none's simulated cache is within 1.5 points of Claude Code's record and 0 for Llama."""
    traces, _ = shared_trace_set
    chosen = [t for t in traces if t.format == "claude-code" or "llama" in (t.model or "")]
    (none,) = build_strategies([])
    replays = [replay_trace(t, none, tmp_path / str(i)) for i, t in enumerate(chosen)]
    rows = calibrate(chosen, replays)
    by_format = {r.format: r for r in format_totals(rows)}
    cc = by_format["claude-code"]
    assert cc.recorded_cached_share is not None and cc.simulated_cached_share is not None
    assert abs(cc.simulated_cached_share - cc.recorded_cached_share) < 0.015
    # The headers close most of the 31.7M-vs-20.0M gap between recorded and replayed prompts.
    assert cc.replayed_prompt_tokens > 0.9 * cc.recorded_prompt_tokens
    llama = by_format["openhands"]
    assert llama.recorded_cached_tokens == 0 and llama.simulated_cached_tokens == 0
    # Every Llama request after the first is a recorded miss: 48 + 32 + 22.
    assert llama.recorded_misses == llama.requests_with_usage - 3 == 102


# -- item 8: importers never silently shrink a trace -------------------------------------------


def _rollout(tmp_path: Path, token_counts: bool) -> Path:
    lines: list[dict[str, Any]] = [
        {"type": "session_meta", "payload": {"id": "0123abcd-0000", "base_instructions": "sys"}},
        {
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "go"}],
            },
        },
    ]
    for i in range(6):
        call = {"type": "function_call", "name": "exec", "arguments": "{}", "call_id": f"k{i}"}
        lines.append({"type": "response_item", "payload": call})
        if token_counts:
            usage = {"input_tokens": 100 + i, "cached_input_tokens": 0, "output_tokens": 1}
            info = {"last_token_usage": usage}
            lines.append({"type": "event_msg", "payload": {"type": "token_count", "info": info}})
        output = {"type": "function_call_output", "call_id": f"k{i}", "output": f"out {i}"}
        lines.append({"type": "response_item", "payload": output})
    answer = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "done"}],
    }
    lines.append({"type": "response_item", "payload": answer})
    path = tmp_path / f"rollout-{int(token_counts)}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_codex_rollout_without_token_counts_has_one_request_per_answer(tmp_path: Path) -> None:
    """6 calls and a final answer, no token_count events: 7 requests, each call with its result."""
    (trace,) = load_file(_rollout(tmp_path, token_counts=False), tmp_path, format="codex-cli")
    assert len(trace.requests) == 7
    assert all(r.usage is None for r in trace.requests)
    assert _results(trace) == {f"k{i}": f"out {i}" for i in range(6)}
    (counted,) = load_file(_rollout(tmp_path, token_counts=True), tmp_path, format="codex-cli")
    assert len(counted.requests) == 7
    assert [r.usage.input_tokens for r in counted.requests[:6] if r.usage] == list(range(100, 106))


def test_openhands_pair_schema_without_tool_call_metadata(tmp_path: Path) -> None:
    """Pre-0.10 history pairs with actions parsed from text: 3 runs make 3 requests + 1 answer."""
    pairs: list[Any] = [
        [
            {"id": 0, "source": "user", "action": "message", "args": {"content": "go"}},
            {"observation": "null", "content": ""},
        ]
    ]
    for i in range(3):
        action = {
            "source": "agent",
            "action": "run",
            "args": {"command": f"ls {i}", "thought": f"look {i}"},
        }
        observation = {"observation": "run", "content": f"file{i}", "extras": {"exit_code": 0}}
        pairs.append([action, observation])
    finish = {"id": 9, "source": "agent", "action": "message", "args": {"content": "done"}}
    pairs.append([finish, {"observation": "null", "content": ""}])
    doc = {"instance_id": "old__repo-1", "metadata": {"llm_config": {}}, "history": pairs}
    path = tmp_path / "output.jsonl"
    path.write_text(json.dumps(doc) + "\n", encoding="utf-8")
    (trace,) = load_file(path, tmp_path, format="openhands")
    assert len(trace.requests) == 4
    assert _results(trace) == {f"event-pair-{i + 1}": f"file{i}" for i in range(3)}
    assert trace.messages[1]["content"][0] == {"type": "text", "text": "look 0"}
    assert trace.meta["import_notes"]["calls_without_tool_call_metadata"] == 3


def test_shrunk_traces_are_skipped_with_their_reason(tmp_path: Path) -> None:
    """One request (nothing to budget), or 12 calls in 2 requests (boundaries not recognized), is
    listed as skipped with why and never scored."""
    single = [_text("user", "go"), _text("assistant", "ok")]
    calls = [{"type": "tool_use", "id": f"c{i}", "name": "t", "input": {}} for i in range(12)]
    results = [{"type": "tool_result", "tool_use_id": f"c{i}", "content": "r"} for i in range(12)]
    merged = [
        _text("user", "go"),
        {"role": "assistant", "content": calls},
        {"role": "user", "content": results},
        _text("assistant", "done"),
    ]
    fine = [
        _text("user", "go"),
        _text("assistant", "a"),
        _text("user", "b"),
        _text("assistant", "c"),
    ]
    for name, doc in (("single", single), ("merged", merged), ("fine", fine)):
        body = {"system": "s", "messages": doc}
        (tmp_path / f"{name}.json").write_text(json.dumps(body), encoding="utf-8")
    traces, skipped = load_dir(tmp_path)
    assert [t.path for t in traces] == ["fine.json"]
    reasons = {s.path: s.reason for s in skipped}
    assert set(reasons) == {"single.json", "merged.json"}
    assert "1 request found and no tool call: nothing to budget" in reasons["single.json"]
    assert "only 2 requests for 12 tool calls" in reasons["merged.json"]
    assert all(isinstance(s, Skipped) and "not scored" in s.reason for s in skipped)


def test_no_shared_trace_is_skipped(shared_trace_set: SharedTraces) -> None:
    """The 30 shared traces all import with their requests: none is refused as shrunk."""
    traces, skipped = shared_trace_set
    assert skipped == ()
    assert len(traces) == 30


@pytest.mark.parametrize("requests", [0, 1])
def test_tiny_bench_input_is_refused_not_scored_as_one(tmp_path: Path, requests: int) -> None:
    """A file whose only trace has 0 or 1 requests gives no trace to score (no silent 1.000)."""
    doc = [_text("user", "go")] if requests == 0 else [_text("user", "go"), _text("assistant", "x")]
    (tmp_path / "t.json").write_text(json.dumps({"system": "s", "messages": doc}), "utf-8")
    traces, skipped = load_dir(tmp_path)
    assert traces == []
    assert len(skipped) == 1
