"""Nothing decided, nothing charged (issue 18, item 7): toolbudget bills ``none`` plus its notes.

Where toolbudget spills and trims nothing, its request copies are the history itself except for
SPEC's "(no output)" note on each empty result, so it bills what ``none`` bills plus at most the
notes' tokens. That was already so before issue 18: the 0.3-0.7% excess seen on small OpenAI-chat
sessions is those notes (about 5 tokens per empty result and request, billed at the base price
while they sit in the uncached tail that OpenAI's 128-token steps leave on a short session).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks._count import counter_for
from benchmarks.importers import load_file
from benchmarks.replay import build_strategies, replay_trace
from benchmarks.trace import Trace
from tests._shared import SharedTraces


def _chat(tmp_path: Path, outputs: list[str]) -> Trace:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. " * 60},
        {"role": "user", "content": "Fix the bug."},
    ]
    for i, output in enumerate(outputs):
        arguments = json.dumps({"command": f"make step{i}"})
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "bash", "arguments": arguments},
        }
        messages.append({"role": "assistant", "content": f"Step {i}.", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": output})
    messages.append({"role": "assistant", "content": "Done."})
    path = tmp_path / "chat.json"
    path.write_text(json.dumps({"model": "gpt-4o", "messages": messages}), encoding="utf-8")
    (trace,) = load_file(path, tmp_path, format="openai-chat")
    return trace


def _none_and_ours(trace: Trace, tmp_path: Path) -> tuple[Any, Any]:
    none, ours = build_strategies(["toolbudget"])
    return (
        replay_trace(trace, none, tmp_path / "none"),
        replay_trace(trace, ours, tmp_path / "toolbudget"),
    )


def test_nothing_decided_bills_exactly_none(tmp_path: Path) -> None:
    """A small chat session whose results all fit: toolbudget's requests and bill equal none's."""
    outputs = ["def f():\n    return 1\n" * (20 + 15 * i) for i in range(6)]
    base, ours = _none_and_ours(_chat(tmp_path, outputs), tmp_path)
    assert (ours.notes["spilled"], ours.notes["trimmed"]) == (0, 0)
    assert ours.sizes == base.sizes
    assert ours.billed_tokens == base.billed_tokens


def test_empty_results_cost_only_their_no_output_notes(tmp_path: Path) -> None:
    """Two empty results: toolbudget pays at most the '(no output)' notes' tokens more than none."""
    outputs = ["x = 1\n" * 200, "", "y = 2\n" * 300, "", "z = 3\n" * 100]
    trace = _chat(tmp_path, outputs)
    base, ours = _none_and_ours(trace, tmp_path)
    assert (ours.notes["spilled"], ours.notes["trimmed"]) == (0, 0)
    count = counter_for(trace.model)
    empty = {"type": "tool_result", "tool_use_id": "c1", "content": []}
    noted = {**empty, "content": [{"type": "text", "text": "(no output)"}]}
    note = count(noted) - count(empty)
    # The first note is in requests 2-5 (4 requests), the second in requests 4-5 (2).
    extra = [b - a for a, b in zip(base.sizes, ours.sizes, strict=True)]
    assert extra == [0, 0, note, note, 2 * note, 2 * note]
    # Longer prefixes never cache less; the notes are all that can be billed on top.
    assert ours.cached_tokens >= base.cached_tokens
    assert ours.billed_tokens - base.billed_tokens <= sum(extra)


def test_shared_traces_with_nothing_decided_cost_only_notes(
    shared_trace_set: SharedTraces, tmp_path: Path
) -> None:
    """On small shared traces where toolbudget decides nothing, it bills none plus its notes."""
    traces, _ = shared_trace_set
    small = [t for t in traces if len(t.requests) <= 12]
    assert small
    for i, trace in enumerate(small):
        base, ours = _none_and_ours(trace, tmp_path / str(i))
        if ours.notes["spilled"] or ours.notes["trimmed"]:
            continue
        extra = ours.input_tokens - base.input_tokens
        assert extra >= 0, trace.name
        assert ours.cached_tokens >= base.cached_tokens, trace.name
        assert ours.billed_tokens <= base.billed_tokens + extra, trace.name
