"""The generated corpus: deterministic for a seed, shaped like the public traces' table."""

from __future__ import annotations

import statistics
from pathlib import Path

import orjson
import pytest

from benchmarks import synthetic
from benchmarks.replay import build_strategies, run
from budget._errors import ConfigError, InputError
from tests._shared import SharedTraces


def test_the_same_seed_gives_the_same_sessions_and_a_larger_n_extends_them() -> None:
    """Two corpora of one seed are equal, another seed differs, and 5 sessions start the 8 ones."""
    a = synthetic.generate(5, seed=3)
    assert a == synthetic.generate(5, seed=3)
    assert synthetic.generate(8, seed=3)[:5] == a
    other = synthetic.generate(5, seed=4)
    assert [t.messages for t in other] != [t.messages for t in a]
    assert len({t.name for t in synthetic.generate(50, seed=3)}) == 50


def test_sessions_are_well_formed_rounds_of_calls_and_results() -> None:
    """Every call is answered by one result in the next message, and requests end on results."""
    for trace in synthetic.generate(20, seed=1):
        assert trace.format.startswith("synthetic-")
        assert trace.requests[-1].n_messages == len(trace.messages)
        stamps = [r.timestamp or 0.0 for r in trace.requests]
        assert all(r.timestamp is not None for r in trace.requests)
        assert stamps == sorted(stamps)
        for k in range(1, len(trace.messages), 2):
            ask, answer = trace.messages[k], trace.messages[k + 1]
            calls = [b["id"] for b in ask["content"] if b["type"] == "tool_use"]
            results = [b["tool_use_id"] for b in answer["content"]]
            assert calls and calls == results


def test_a_generated_corpus_follows_the_table_it_was_drawn_from() -> None:
    """400 sessions: the format mix and each format's median sizes match the table's."""
    shape = synthetic.load_shape()
    corpus = synthetic.generate(400, seed=2)
    formats = shape["formats"]
    total = sum(f["traces"] for f in formats.values())
    for fmt, spec in formats.items():
        group = [t for t in corpus if t.format == f"synthetic-{fmt}"]
        share = len(group) / len(corpus)
        assert abs(share - spec["traces"] / total) < 0.08, fmt
        if len(group) < 30:
            continue
        q = dict(zip(synthetic.QUANTILES, spec["result_chars"], strict=True))
        sizes = [
            len(b["content"][0]["text"])
            for t in group
            for m in t.messages[2::2]
            for b in m["content"]
        ]
        assert q[0.25] <= statistics.median(sizes) <= q[0.75], fmt
        r = dict(zip(synthetic.QUANTILES, spec["requests"], strict=True))
        assert r[0.1] <= statistics.median(len(t.requests) for t in group) <= r[0.9], fmt


def test_the_committed_table_is_the_fit_of_the_public_traces(
    shared_trace_set: SharedTraces,
) -> None:
    """benchmarks/synthetic_shape.json is what fit() computes from ../shared/traces today."""
    found, _ = shared_trace_set
    fitted = synthetic.fit(found)
    assert fitted == synthetic.load_shape(), (
        "the traces or importers changed: python -m benchmarks synthetic-shape "
        "--traces ../shared/traces --out benchmarks/synthetic_shape.json"
    )
    assert sum(f["traces"] for f in fitted["formats"].values()) == len(found)


def test_the_table_holds_numbers_and_names_only() -> None:
    """No text of a trace is committed: every string in the table is a short name."""

    def strings(obj: object) -> list[str]:
        if isinstance(obj, str):
            return [obj]
        if isinstance(obj, dict):
            return [*obj, *(s for v in obj.values() for s in strings(v))]
        if isinstance(obj, list):
            return [s for v in obj for s in strings(v)]
        return []

    shape = synthetic.load_shape()
    names = [s for s in strings(shape) if s != shape["about"]]
    assert names and max(len(s) for s in names) < 40


def test_generated_sessions_replay_under_toolbudget_and_spill_nothing_lost(tmp_path: Path) -> None:
    """A generated corpus replays; everything toolbudget replaced can be read back."""
    corpus = synthetic.generate(6, seed=9)
    replays = run(corpus, build_strategies(["toolbudget"]), tmp_path)
    ours = [r for r in replays if r.strategy == "toolbudget"]
    assert len(ours) == 6
    assert sum(r.requests for r in ours) == sum(len(t.requests) for t in corpus)
    assert all(r.recoverable_chars == r.replaced_chars for r in ours)


def test_bad_sizes_and_tables_are_refused(tmp_path: Path) -> None:
    """N below 1, an unreadable table and a table of another shape each raise a clear error."""
    with pytest.raises(ConfigError, match="at least 1 session"):
        synthetic.generate(0)
    with pytest.raises(InputError, match="cannot read"):
        synthetic.load_shape(tmp_path / "missing.json")
    other = tmp_path / "other.json"
    other.write_bytes(orjson.dumps({"formats": {"x": {}}, "quantiles": [0.5]}))
    with pytest.raises(InputError, match="not a table written by"):
        synthetic.load_shape(other)
