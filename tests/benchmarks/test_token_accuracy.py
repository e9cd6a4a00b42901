"""Tests for the token-accuracy benchmark, on the public recorded traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.importers import load_dir
from benchmarks.tokens import calibrated, main, measure, replay_session, script_mix, summarize
from budget._tokens import estimate_tokens


def test_summarize_quantiles_and_shares() -> None:
    """Summaries give the median and tail of |error| and the underestimate shares."""
    stats = summarize([-0.3, -0.05, 0.0, 0.1, 0.2])
    assert stats is not None
    assert stats.n == 5
    assert stats.median_abs == pytest.approx(0.1)
    assert stats.median == pytest.approx(0.0)
    assert stats.under_share == pytest.approx(0.4)
    assert stats.under10_share == pytest.approx(0.2)
    assert summarize([]) is None


def test_script_mix() -> None:
    """Added text is classed ASCII, CJK-containing or other non-ASCII."""
    assert script_mix([{"role": "user", "content": "plain"}]) == "ascii"
    assert script_mix([{"role": "user", "content": [{"type": "text", "text": "é 中"}]}]) == "cjk"
    assert script_mix([{"role": "user", "content": "naïve →"}]) == "other"


@pytest.mark.traces
def test_estimator_accuracy_on_recorded_usage(shared_traces: Path) -> None:
    """The estimated prompt growth stays within the error measured on the real traces.

    Measured on the 30 public traces with each trace's tokenizer family (1,461 pairs for the
    growth of messages, 1,689 anchored): median |error| 7.6% both ways, each family between
    5.3% and 9.7% (12.1% anchored for the few OpenAI-family pairs), against 14.1% and 11.7%
    with one Claude-calibrated profile for all. The bounds, 10% overall (the target) and 13% a
    family, leave room for importer changes but fail if the family profiles are lost. The
    whole-prompt estimate built on the usage anchor is 10% under in 0.2% of pairs (4 of 1,689).
    """
    traces, _ = load_dir(shared_traces)
    result = measure(traces, estimate_tokens)
    assert result.pairs > 1000
    for method in ("added", "anchored"):
        overall = result.stats(method)
        assert overall is not None and overall.median_abs <= 0.10
        for family in ("anthropic", "google", "openai"):
            stats = result.stats(method, f"family:{family}")
            assert stats is not None and stats.median_abs <= 0.13, (method, family, stats)
    prompt = result.stats("anchored_prompt")
    assert prompt is not None
    assert prompt.median_abs <= 0.005
    assert prompt.under10_share < 0.01


@pytest.mark.traces
def test_learned_correction_cuts_whole_prompt_underestimates(shared_traces: Path) -> None:
    """Replayed through a session, the corrected estimate is under by >2% in <5% of requests.

    Measured on the 30 public traces (1,689 requests): before -> after the correction, whole
    prompt under by more than 2% in 4.3% -> 4.0% (Claude), 0.9% -> 0.9% (Gemini), 6.5% -> 4.3%
    (OpenAI and Llama) of requests; its median |error| 0.11% -> 0.09%, 1.37% -> 1.36%, 0.11% ->
    0.10%; per delta 9.6% -> 8.3%, 38.7% -> 38.5%, 12.1% -> 9.9%. Pinned: the target for every
    family, and no median worse than without the correction.
    """
    traces, _ = load_dir(shared_traces)
    rows = calibrated(replay_session(traces))
    assert rows["all"].n > 1000
    for family in ("anthropic", "google", "openai"):
        row = rows[f"family:{family}"]
        assert row.under < 0.05, (family, row)
        assert row.prompt_median_abs <= row.prompt_median_abs_raw, (family, row)
        assert row.delta_median_abs <= row.delta_median_abs_raw, (family, row)
    assert rows["family:openai"].under_raw > rows["family:openai"].under


@pytest.mark.traces
def test_command_line_writes_json(
    shared_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command prints the table and writes the same figures as JSON."""
    out = tmp_path / "tokens.json"
    assert main(["--traces", str(shared_traces), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "anchored" in printed and "format:claude-code" in printed
    data = json.loads(out.read_text())
    assert data["pairs"] > 1000
    assert data["groups"]["anchored"]["all"]["n"] == data["pairs"]
    assert data["skipped"]["not_grown"] >= 0
    assert "raw -> corrected" in printed
    assert data["session"]["all"]["n"] > 1000
