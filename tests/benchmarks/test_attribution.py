"""Cost attribution: each replay's billed tokens split by result size and by age in rounds."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from benchmarks.attribution import AGE_BUCKETS, SIZE_BUCKETS, age_bucket, size_bucket
from benchmarks.importers import load_dir
from benchmarks.replay import build_strategies, replay_trace
from benchmarks.trace import Trace
from tests._shared import SharedTraces


def _trace(tmp_path: Path, sizes: list[int]) -> Trace:
    """An Anthropic trace of one round per entry of ``sizes``, each result that many chars."""
    messages: list[dict[str, object]] = [{"role": "user", "content": "look around"}]
    for k, size in enumerate(sizes):
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{k}", "name": "cat", "input": {}}],
            }
        )
        line = f"line of result {k} padded out to forty chars\n"
        text = (line * (size // len(line) + 1))[:size]
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{k}", "content": text}],
            }
        )
    (tmp_path / "t").mkdir(exist_ok=True)
    (tmp_path / "t" / "a.json").write_bytes(orjson.dumps({"system": "x", "messages": messages}))
    found, skipped = load_dir(tmp_path / "t")
    assert not skipped
    return found[0]


def test_buckets_follow_their_bounds() -> None:
    """A size or an age at a bucket's upper bound is in it; one more is in the next bucket."""
    assert [size_bucket(n) for n in (0, 2_000, 2_001, 50_000, 50_001)] == [
        "<=2k",
        "<=2k",
        "2k-10k",
        "10k-50k",
        ">50k",
    ]
    assert [age_bucket(n) for n in (0, 4, 5, 19, 20, 49, 50)] == [
        "0-4",
        "0-4",
        "5-9",
        "10-19",
        "20-49",
        "20-49",
        "50+",
    ]


def test_results_land_in_the_buckets_of_their_size_and_age(tmp_path: Path) -> None:
    """On 8 rounds of 1,000- and 20,000-character results, ``none``'s result tokens are only in
    the <=2k and 10k-50k rows and in ages 0-4 and 5-9; each column sums to the billed tokens."""
    trace = _trace(tmp_path, [1_000, 20_000] * 4)
    for strategy in build_strategies(["toolbudget"]):
        replay = replay_trace(trace, strategy, tmp_path / strategy.name)
        assert replay.attribution is not None
        by_size, by_age = replay.attribution.by_size, replay.attribution.by_age
        assert sum(by_size.values()) == pytest.approx(replay.billed_tokens)
        assert sum(by_age.values()) == pytest.approx(replay.billed_tokens)
        assert by_size["<=2k"] > 0 and by_size["10k-50k"] > 0
        assert by_size["2k-10k"] == by_size[">50k"] == 0
        assert by_age["0-4"] > 0 and by_age["5-9"] > 0
        assert by_age["10-19"] == by_age["20-49"] == by_age["50+"] == 0
        assert by_size["header"] > 0 and by_size["other messages"] > 0
        results = sum(by_size[name] for name, _ in SIZE_BUCKETS)
        assert results == pytest.approx(sum(by_age[name] for name, _ in AGE_BUCKETS))


def test_attribution_sums_to_the_billed_tokens_on_recorded_traces(
    shared_trace_set: SharedTraces, tmp_path: Path
) -> None:
    """On recorded traces of every format, none's and toolbudget's attributions add up to their
    billed tokens (read-backs included), and only those two strategies are attributed."""
    traces, _ = shared_trace_set
    picked = {t.format: t for t in traces if len(t.requests) <= 40}
    assert len(picked) >= 3
    for trace in picked.values():
        for strategy in build_strategies(["toolbudget", "codex"]):
            replay = replay_trace(trace, strategy, tmp_path / trace.format / strategy.name)
            if strategy.name == "codex":
                assert replay.attribution is None
                continue
            assert replay.attribution is not None
            got = sum(replay.attribution.by_size.values())
            assert got == pytest.approx(replay.billed_tokens, rel=1e-9)
            assert replay.attribution.by_size["read-backs"] == pytest.approx(replay.readback_billed)
