"""The built-in sessions: real tool calls, recorded deterministically, showing the mechanism."""

from __future__ import annotations

import itertools
import sysconfig
from pathlib import Path
from typing import Any

import orjson
import pytest

from benchmarks import recorder
from benchmarks.replay import build_strategies, run
from benchmarks.trace import Trace

pytestmark = pytest.mark.slow  # records the built-in sessions by running real commands

STDLIB = Path(sysconfig.get_paths()["stdlib"])


@pytest.fixture(scope="module")
def builtin(tmp_path_factory: pytest.TempPathFactory) -> list[Trace]:
    """The built-in sessions, recorded once for this module."""
    return recorder.record_builtin(tmp_path_factory.mktemp("rec"))


def _calls(trace: Trace) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(tool_use, tool_result) pairs in order."""
    uses: dict[str, dict[str, Any]] = {}
    pairs = []
    for message in trace.messages:
        for block in message["content"]:
            if block.get("type") == "tool_use":
                uses[block["id"]] = block
            elif block.get("type") == "tool_result":
                pairs.append((uses.pop(block["tool_use_id"]), block))
    assert uses == {}
    return pairs


def _text(result: dict[str, Any]) -> str:
    return "".join(part["text"] for part in result["content"])


def test_sessions_have_the_promised_shape(builtin: list[Trace]) -> None:
    """Three Anthropic sessions of 20-60 rounds, paired calls, pauses past the cache TTL."""
    assert [t.name for t in builtin] == [f"builtin/{s.name}" for s in recorder.SCRIPTS]
    for trace in builtin:
        rounds = sum(1 for m in trace.messages if m["role"] == "assistant")
        assert 20 <= rounds <= 60
        assert trace.provider == "anthropic"
        assert len(trace.requests) == rounds + 1
        assert trace.requests[-1].n_messages == len(trace.messages)
        stamps = [r.timestamp for r in trace.requests]
        assert all(s is not None for s in stamps)
        gaps = [b - a for a, b in itertools.pairwise(stamps)]  # type: ignore[operator]
        assert min(gaps) > 0
        assert max(gaps) > 300
        assert len(_calls(trace)) >= rounds
    size = len(orjson.dumps([t.messages for t in builtin]))
    assert size < 4_000_000


def test_outputs_are_the_real_ones(builtin: list[Trace]) -> None:
    """A cat gives the file's bytes; the test suite fails first and passes at the end."""
    parsers, fixing, _ = builtin
    by_command = {use["input"].get("command"): res for use, res in _calls(parsers)}
    decoder = by_command["cat json/decoder.py"]
    assert _text(decoder) == (STDLIB / "json" / "decoder.py").read_text(encoding="utf-8")
    runs = [
        res for use, res in _calls(fixing) if use["input"].get("command") == "python -m unittest -v"
    ]
    assert len(runs) >= 4
    assert runs[0].get("is_error") is True
    assert _text(runs[0]).startswith("Exit code 1\n")
    assert "FAILED (" in _text(runs[0])
    assert "Ran 24 tests in 0.000s" in _text(runs[0])
    assert runs[-1].get("is_error") is None
    assert _text(runs[-1]).rstrip().endswith("OK")
    # The temporary directory never shows: tracebacks name the project under ~/demo.
    assert f'File "{recorder.SHOWN_ROOT}/fix-tests/textstats.py"' in _text(runs[0])


def test_recording_is_deterministic(builtin: list[Trace], tmp_path: Path) -> None:
    """Recording a session again, elsewhere, gives the same messages and requests."""
    again = recorder.record(recorder.SCRIPTS[0], tmp_path)
    assert again.messages == builtin[0].messages
    assert again.requests == builtin[0].requests


def test_builtin_set_shows_spills_and_a_staleness_batch(
    builtin: list[Trace], tmp_path: Path
) -> None:
    """On the built-in set toolbudget spills, runs a batch, stays in the window, loses nothing."""
    replays = run(builtin, build_strategies(["toolbudget"]), tmp_path)
    ours_all = [r for r in replays if r.strategy == "toolbudget"]
    none_all = [r for r in replays if r.strategy == "none"]
    assert sum(r.overflows for r in none_all) > 0
    assert sum(r.overflows for r in ours_all) == 0
    assert sum(r.notes["staleness_batches"] for r in ours_all) > 0
    assert sum(r.notes["spilled"] for r in ours_all) > 0
    assert all(r.recoverable_chars == r.replaced_chars for r in ours_all)
    assert sum(r.billed_tokens for r in ours_all) < sum(r.billed_tokens for r in none_all)


def test_readme_says_what_the_builtin_sessions_quote(builtin: list[Trace]) -> None:
    """README describes the built-in sessions' quotes as they are: one session quotes, the
    others never do, so the bench's note for traces quoting nothing is not printed for them."""
    from benchmarks.readbacks import Quotes

    quoting = [t.name for t in builtin if any(Quotes(t).events)]
    assert quoting == ["builtin/fix-tests"]
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = " ".join(readme.split("\n## Two commands\n", 1)[1].split("\n## ", 1)[0].split())
    assert "never quotes" not in section and "says so under its table" not in section
    assert "only the session fixing a project edits code it read" in section
