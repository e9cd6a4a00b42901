"""Hostile recordings: no file of any shape stops the bench, whatever field holds what.

The rule under test: an importer never lets a foreign exception out (anything raised from one file
becomes that file's skip reason), and a trace that loads but cannot be replayed under some strategy
is left out of every strategy's figures with its reason, while every other trace is scored.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.importers import load_dir, load_file
from benchmarks.replay import build_strategies, run
from benchmarks.trace import Request, Trace
from budget._errors import BudgetError

ROOT = Path(__file__).resolve().parents[2]

# One small recording of each format the public set has, cut to its first lines or messages so a
# hypothesis example stays fast (paths under ../shared/traces; read there, never copied).
SEEDS = {
    "claude-code": "claude-code/handgemacht-ai__claude-code-log/test/test_data/real_projects/"
    "-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl",
    "codex-cli": "codex-cli/codemie-ai__codemie-code/src/agents/plugins/codex/__tests__/fixtures/"
    "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl",
    "gemini-cli": "gemini-cli/codemie-ai__codemie-code/tests/integration/metrics/fixtures/gemini/"
    "session-2025-12-01T21-45-5b959dae.json",
    "mini-swe-agent": "mini-swe-agent/gruckion__mini-swe-agent/swebench_results/"
    "20251118_gemini-3-pro-74pct/trajs/astropy__astropy-14369/astropy__astropy-14369.traj.json",
    "openhands": "openhands/All-Hands-AI__OpenHands/tests/runtime/trajs/basic_gui_mode.json",
}
HANDMADE: dict[str, list[dict[str, Any]]] = {
    "anthropic": [
        {"role": "user", "content": "task"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "a", "name": "sh", "input": {"c": "ls"}}],
            "usage": {"input_tokens": 10, "output_tokens": 5},
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "x"}]},
    ],
    "openai-chat": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "task"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "x"},
    ],
    "openai-responses": [
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": "task"},
        {"type": "reasoning", "id": "r", "summary": []},
        {"type": "function_call", "call_id": "a", "name": "sh", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "a", "output": "x"},
    ],
}


def _cut(fmt: str, path: Path) -> tuple[str, Any]:
    """The seed document of ``fmt`` (a list of lines for JSONL) and its file suffix."""
    if path.name.endswith(".jsonl"):
        lines = [orjson.loads(x) for x in path.read_bytes().splitlines()[:40] if x.strip()]
        return ".jsonl", lines
    doc = orjson.loads(path.read_bytes())
    if isinstance(doc, dict) and isinstance(doc.get("messages"), list):
        doc["messages"] = doc["messages"][:8]
    elif isinstance(doc, list):
        doc = doc[:12]
    elif isinstance(doc, dict) and isinstance(doc.get("history"), list):
        doc["history"] = doc["history"][:12]
    return ".json", doc


def _paths(doc: Any, at: tuple[Any, ...] = (), most: int = 600) -> Iterator[tuple[Any, ...]]:
    """Every place in ``doc`` a value sits (dict keys, list indices), the first ``most`` of them."""
    stack = [(at, doc)]
    seen = 0
    while stack and seen < most:
        where, value = stack.pop(0)
        if where:
            yield where
            seen += 1
        if isinstance(value, dict):
            stack.extend(((*where, k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend(((*where, i), v) for i, v in enumerate(value))


def _put(doc: Any, where: tuple[Any, ...], value: Any) -> Any:
    """A copy of ``doc`` with ``value`` at ``where``."""
    out = orjson.loads(orjson.dumps(doc))
    node = out
    for step in where[:-1]:
        node = node[step]
    node[where[-1]] = value
    return out


def _write(path: Path, suffix: str, doc: Any) -> Path:
    if suffix == ".jsonl":
        path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in doc))
    else:
        path.write_bytes(orjson.dumps(doc))
    return path


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
"""Any JSON value: what a hostile or broken recorder may write in any field."""


@pytest.fixture(scope="module")
def seeds(shared_traces: Path) -> dict[str, tuple[str, Any]]:
    """Each format's seed document, from the public traces and the hand-made message lists."""
    out = {fmt: _cut(fmt, shared_traces / rel) for fmt, rel in SEEDS.items()}
    out.update({fmt: (".json", doc) for fmt, doc in HANDMADE.items()})
    return out


@pytest.mark.parametrize("fmt", [*SEEDS, *HANDMADE])
def test_any_json_at_any_field_gives_a_trace_or_a_reason(
    fmt: str, seeds: dict[str, tuple[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Any JSON value at any field of a real recording loads or is refused with a BudgetError."""
    suffix, doc = seeds[fmt]
    places = list(_paths(doc))
    assert places, fmt
    folder = tmp_path_factory.mktemp(fmt)

    @settings(
        max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(where=st.sampled_from(places), value=json_values)
    def check(where: tuple[Any, ...], value: Any) -> None:
        path = _write(folder / f"t{suffix}", suffix, _put(doc, where, value))
        with contextlib.suppress(BudgetError):  # refused, naming the file: a foreign shape's due
            load_file(path, folder)
        traces, skipped = load_dir(folder)  # never raises for a file
        assert len(traces) + len(skipped) >= 1
        assert all(s.reason for s in skipped)

    check()


def _deep(depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    node = out
    for _ in range(depth):
        node["a"] = {}
        node = node["a"]
    return out


def _claude_lines(shared_traces: Path) -> list[dict[str, Any]]:
    path = shared_traces / SEEDS["claude-code"]
    return [orjson.loads(x) for x in path.read_bytes().splitlines() if x.strip()]


def _bad_files(shared_traces: Path, folder: Path) -> dict[str, str]:
    """Write the issue's three bad recordings (and a fourth a peer cannot replay) beside a good
    one into ``folder``; their names and the words their skip reason must hold."""
    folder.mkdir(parents=True, exist_ok=True)
    good = shared_traces / SEEDS["gemini-cli"]
    (folder / "good.json").write_bytes(good.read_bytes())
    lines = _claude_lines(shared_traces)

    typed = [dict(x) for x in lines]
    typed[0] = {**typed[0], "type": ["user"]}
    (folder / "list_type.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in typed))

    negative = json.loads(json.dumps(lines))
    first = next(
        x["message"]["id"] for x in negative if x.get("type") == "assistant" and x.get("message")
    )
    for x in negative:
        if x.get("type") == "assistant" and x["message"].get("id") == first:
            x["message"]["usage"]["output_tokens"] = -5
    (folder / "negative.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in negative))

    for name, depth in (("deep300.jsonl", 300), ("deep600.jsonl", 600)):
        deep = json.loads(json.dumps(lines))
        block = next(
            b
            for x in deep
            if x.get("type") == "assistant"
            for b in x["message"].get("content") or []
            if isinstance(b, dict) and b.get("type") == "tool_use"
        )
        block["input"] = _deep(depth)
        # orjson writes at most 255 levels: the standard library writes what a recorder could.
        (folder / name).write_text("".join(json.dumps(x) + "\n" for x in deep), encoding="utf-8")
    return {
        "list_type.jsonl": "unrecognized trace format",
        "negative.jsonl": "output_tokens is -5",
        "deep600.jsonl": "the replay under langchain failed (RecursionError",
    }


def _bench(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-c", "from budget.cli import main; main()", "bench", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=600,
    )


@pytest.mark.slow
def test_the_bench_scores_the_good_traces_beside_bad_ones(
    shared_traces: Path, tmp_path: Path
) -> None:
    """Through the real entry point, each bad file is skipped with its reason, the rest scored."""
    expected = _bad_files(shared_traces, tmp_path / "traces")
    out = _bench(
        "--traces", str(tmp_path / "traces"), "--json", str(tmp_path / "b.json"), cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Traceback" not in out.stderr + out.stdout
    doc = orjson.loads((tmp_path / "b.json").read_bytes())
    reasons = {s["path"]: s["reason"] for s in doc["skipped"]}
    for name, words in expected.items():
        assert words in reasons[name], (name, reasons.get(name))
    scored = {t["trace"] for t in doc["traces"]}
    # The good trace, and the one nested 300 deep that every strategy can replay, are scored.
    assert "gemini-cli/5b959dae" in scored
    assert any("deep300" in t for t in scored)
    assert not any("deep600" in t or "negative" in t for t in scored)


def test_a_directory_of_only_bad_files_is_one_line_of_error(
    shared_traces: Path, tmp_path: Path
) -> None:
    """With no trace left to score, the bench says so in one line and exits non-zero."""
    _bad_files(shared_traces, tmp_path / "traces")
    for keep in ("good.json", "deep300.jsonl", "deep600.jsonl"):
        (tmp_path / "traces" / keep).unlink()
    out = _bench("--traces", str(tmp_path / "traces"), "--strategies", "none", cwd=tmp_path)
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("error: ")


def _deep_file(shared_traces: Path, folder: Path, depth: int) -> None:
    """The claude-code recording with its first tool input nested ``depth`` levels deep."""
    lines = _claude_lines(shared_traces)
    block = next(
        b
        for x in lines
        if x.get("type") == "assistant"
        for b in x["message"].get("content") or []
        if isinstance(b, dict) and b.get("type") == "tool_use"
    )
    block["input"] = _deep(depth)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(10_000)  # only to write the file
    try:
        data = "".join(json.dumps(x) + "\n" for x in lines)
    finally:
        sys.setrecursionlimit(limit)
    (folder / "deep.jsonl").write_text(data, encoding="utf-8")


def test_a_trace_no_strategy_can_encode_is_skipped_at_import(
    shared_traces: Path, tmp_path: Path
) -> None:
    """A tool input nested past the replay's recursion is the file's skip reason, not a traceback,
    on every Python (3.12's JSON encoder goes deeper than 3.11's, the replay's recursion does not)."""
    _deep_file(shared_traces, tmp_path, 1015)  # orjson's parser takes 1,024 levels
    traces, skipped = load_dir(tmp_path)
    assert traces == []
    assert "cannot be encoded for the replay: they nest 1020 levels deep" in skipped[0].reason


def test_the_nesting_a_trace_may_have_follows_the_recursion_limit(
    shared_traces: Path, tmp_path: Path
) -> None:
    """With the interpreter's recursion limit raised, the same 1,015-deep trace loads."""
    _deep_file(shared_traces, tmp_path, 1015)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(2_000)
    try:
        traces, skipped = load_dir(tmp_path)
    finally:
        sys.setrecursionlimit(limit)
    assert skipped == []
    assert [t.path for t in traces] == ["deep.jsonl"]


def test_a_replay_that_fails_leaves_its_trace_out_of_every_strategy(tmp_path: Path) -> None:
    """run() with on_failure drops the failing trace for all strategies; without it, it raises."""
    good = Trace(
        name="t/good",
        path="good.json",
        format="anthropic",
        provider="anthropic",
        messages=(
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
        ),
        requests=(Request(1),),
    )
    bad = dataclasses.replace(good, name="t/bad", path="bad.json")
    chosen = build_strategies(["none", "toolbudget"])

    class Boom:
        """A strategy whose session raises on the bad trace only."""

        name = "boom"

        def open(self, trace: Trace, workdir: Path) -> Any:
            session = chosen[0].open(trace, workdir)
            if trace.name == "t/bad":
                raise RuntimeError("cannot take this one")
            return session

    strategies = [*chosen, Boom()]
    failures: list[tuple[str, str]] = []
    got = run(
        [good, bad],
        strategies,
        tmp_path / "a",
        on_failure=lambda trace, replay: failures.append((trace.name, replay.failed or "")),
    )
    assert {r.trace for r in got} == {"t/good"}
    assert {r.strategy for r in got} == {"none", "toolbudget", "boom"}
    assert failures == [
        ("t/bad", "t/bad: the replay under boom failed (RuntimeError: cannot take this one)")
    ]
    with pytest.raises(RuntimeError, match="cannot take this one"):
        run([good, bad], strategies, tmp_path / "b")


def test_toolbudget_failing_on_a_trace_is_never_a_clean_run(
    shared_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When toolbudget's own replay fails on a trace, the bench reports the rest and exits 1."""
    from typer.testing import CliRunner

    import benchmarks.report
    from budget.cli import app

    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "good.json").write_bytes((shared_traces / SEEDS["gemini-cli"]).read_bytes())
    small = folder / "small.json"
    small.write_bytes(orjson.dumps(HANDMADE["anthropic"]))
    real = build_strategies

    class Failing:
        """toolbudget's strategy, raising on the hand-made trace (a defect stand-in)."""

        def __init__(self, inner: Any) -> None:
            self.inner = inner
            self.name = inner.name

        def open(self, trace: Trace, workdir: Path) -> Any:
            if trace.path == "small.json":
                raise ValueError("a defect of ours")
            return self.inner.open(trace, workdir)

    def patched(names: Any, **kwargs: Any) -> list[Any]:
        return [Failing(s) if s.name == "toolbudget" else s for s in real(names, **kwargs)]

    monkeypatch.setattr(benchmarks.report, "build_strategies", patched)
    out = CliRunner().invoke(
        app,
        [
            "bench",
            "--traces",
            str(folder),
            "--strategies",
            "toolbudget",
            "--json",
            str(tmp_path / "o.json"),
        ],
    )
    assert out.exit_code == 1, out.output
    assert "toolbudget's own replay failed on 1 trace(s)" in out.stderr
    doc = orjson.loads((tmp_path / "o.json").read_bytes())
    assert [t["trace"] for t in doc["traces"] if t["strategy"] == "toolbudget"] == [
        "gemini-cli/5b959dae"
    ]
    assert doc["skipped"] == [
        {
            "path": "small.json",
            "reason": "anthropic/small: the replay under toolbudget failed (ValueError: a defect of ours)",
            "strategy": "toolbudget",
        }
    ]


def test_a_lone_surrogate_escape_keeps_the_trace_and_its_last_request(
    shared_traces: Path, tmp_path: Path
) -> None:
    """A recorder in UTF-16 (JavaScript's JSON.stringify) writes half an emoji cut by a slice as
    a lone ``\\ud83d`` escape: the trace is scored with U+FFFD in its place, not skipped, and a
    last line holding one is not dropped as if torn; every strategy replays it."""
    lines = _claude_lines(shared_traces)
    (tmp_path / "clean").mkdir()
    (tmp_path / "clean" / "t.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    clean, _ = load_dir(tmp_path / "clean")
    results = [
        b
        for x in lines
        if x.get("type") == "user" and isinstance(x["message"].get("content"), list)
        for b in x["message"]["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]
    results[0]["content"] = "cut at an emoji \ud83d"  # json.dumps writes it as the lone escape
    lines[-1]["cut"] = "\udc00 and the last line too"
    (tmp_path / "cut").mkdir()
    data = "".join(json.dumps(x) + "\n" for x in lines)
    assert "\\ud83d" in data
    (tmp_path / "cut" / "t.jsonl").write_text(data)
    traces, skipped = load_dir(tmp_path / "cut")
    assert skipped == [] and len(traces) == 1
    assert len(traces[0].requests) == len(clean[0].requests)
    assert "cut at an emoji \ufffd" in orjson.dumps(traces[0].messages).decode()
    # The strategies that need no agent SDK (those run on their own lane, tests/_lanes.py).
    plain = ["none", "toolbudget", "claude-code", "codex", "gemini-cli", "opencode", "swe-agent"]
    replays = run(traces, build_strategies(plain), tmp_path / "w")
    assert {r.trace for r in replays} == {traces[0].name} and not any(r.failed for r in replays)


def test_a_byte_order_mark_is_ignored_and_a_finished_bad_last_line_is_an_error(
    shared_traces: Path, tmp_path: Path
) -> None:
    """A UTF-8 BOM before a recording is read past; a last line that ends with its newline but
    is not JSON is an error (only a line cut before its newline is a torn write, dropped)."""
    source = shared_traces / SEEDS["claude-code"]
    clean = load_file(source, source.parent)
    (tmp_path / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + source.read_bytes())
    (with_bom,) = load_file(tmp_path / "bom.jsonl", tmp_path)
    assert len(with_bom.requests) == len(clean[0].requests)
    gemini = shared_traces / SEEDS["gemini-cli"]
    (tmp_path / "bom.json").write_bytes(b"\xef\xbb\xbf" + gemini.read_bytes())
    assert load_file(tmp_path / "bom.json", tmp_path)[0].requests
    body = source.read_bytes().rstrip(b"\n")
    (tmp_path / "torn.jsonl").write_bytes(body + b'\n{"type": "assistant", "mess')
    assert len(load_file(tmp_path / "torn.jsonl", tmp_path)[0].requests) == len(clean[0].requests)
    (tmp_path / "bad.jsonl").write_bytes(body + b'\n{"type": 1e400, "x": }\n')
    with pytest.raises(BudgetError, match="is not valid JSON"):
        load_file(tmp_path / "bad.jsonl", tmp_path)


def test_a_json_write_that_fails_leaves_the_previous_file_whole(
    shared_traces: Path, tmp_path: Path
) -> None:
    """A --json write cut off half-way (the disk full at 4 KB) is one error line and leaves the
    previous run's JSON as it was, with no partial file beside it, not cut short in place."""
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "good.json").write_bytes((shared_traces / SEEDS["gemini-cli"]).read_bytes())
    previous = orjson.dumps({"summary": [], "note": "x" * 20_000})
    (tmp_path / "r.json").write_bytes(previous)
    args = ["bench", "--traces", str(folder), "--strategies", "none", "--json", "r.json"]
    out = subprocess.run(
        [sys.executable, "-c", "from budget.cli import main; main()", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=600,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096)),
    )
    assert out.returncode == 2, out.stderr[-3000:]
    assert out.stderr.strip().splitlines()[-1] == "error: cannot write r.json: File too large"
    assert (tmp_path / "r.json").read_bytes() == previous
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "traces"]


def test_an_output_that_cannot_be_written_is_one_line_of_error(
    shared_traces: Path, tmp_path: Path
) -> None:
    """--json on a full disk ends the bench with one error line naming the file, no traceback."""
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "good.json").write_bytes((shared_traces / SEEDS["gemini-cli"]).read_bytes())
    out = _bench(
        "--traces", str(folder), "--strategies", "none", "--json", "/dev/full", cwd=tmp_path
    )
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines()[-1] == (
        "error: cannot write /dev/full: No space left on device"
    )
