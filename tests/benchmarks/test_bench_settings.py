"""toolbudget's settings in ``toolbudget bench``: ``--set``, TOOLBUDGET_* variables, the record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from benchmarks.settings import COMPACT_FIXED, parse_sets, resolve
from benchmarks.strategies import toolbudget
from budget import Budget
from budget._errors import ConfigError
from budget.cli import app
from spill import ref_for
from tests.benchmarks.test_bench_cli import _anthropic_file
from tests.strategies import conversation

ROOT = Path(__file__).resolve().parents[2]
TOOLBUDGET = Path(sys.executable).parent / "toolbudget"
"""The console script the package installs: the real entry point."""


@pytest.fixture(autouse=True)
def _structlog_restored(structlog_restored: None) -> None:
    """The CLI configures structlog on the runner's stderr, closed after the call: undo it."""


def _clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without TOOLBUDGET_* variables, this checkout first on the
    path, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("TOOLBUDGET_")}
    env["PYTHONPATH"] = str(ROOT)
    return {**env, **extra}


def _toolbudget(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TOOLBUDGET), *args], capture_output=True, text=True, env=env, timeout=120
    )


def _traces(tmp_path: Path) -> Path:
    traces = tmp_path / "traces"
    traces.mkdir()
    _anthropic_file(traces / "a.json", 8)
    return traces


@pytest.mark.parametrize(
    ("item", "says"),
    [
        ("resultcap=1", "--set resultcap: no such toolbudget setting"),
        ("result_cap", "--set 'result_cap': expected KEY=VALUE"),
        ("result_cap=banana", "result_cap: Input should be a valid integer"),
        ("pressure=1.5", "pressure: Input should be less than or equal to 1"),
    ],
)
def test_a_bad_set_is_a_one_line_error_through_the_entry_point(
    tmp_path: Path, item: str, says: str
) -> None:
    """A bad --set key or value exits 2 with one line on stderr naming it, before any replay."""
    run = _toolbudget(["bench", "--traces", str(_traces(tmp_path)), "--set", item], _clean_env())
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("error: ") and says in lines[0]
    assert "All traces" not in run.stdout


def test_a_bad_environment_value_is_one_line_naming_the_variable(tmp_path: Path) -> None:
    """TOOLBUDGET_RESULT_CAP=banana: one error line naming the variable, no traceback."""
    env = _clean_env(TOOLBUDGET_RESULT_CAP="banana")
    run = _toolbudget(["bench", "--traces", str(_traces(tmp_path))], env)
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert "TOOLBUDGET_RESULT_CAP" in lines[0]


def test_read_ignores_a_bad_setting_it_does_not_use(tmp_path: Path) -> None:
    """``toolbudget read`` prints the output under a bad TOOLBUDGET_RESULT_CAP, and refuses a bad
    value of a setting it uses (the page size) in one line naming the variable."""
    text = "".join(f"row {i}\n" for i in range(20_000))
    with Budget.open(tmp_path / "s") as b:
        b.prepare(conversation([[text]]), now=0)
    args = ["read", str(tmp_path / "s"), ref_for(text), "--limit", "2"]
    ok = _toolbudget(args, _clean_env(TOOLBUDGET_RESULT_CAP="banana", TOOLBUDGET_TOOLS="{bad"))
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout == "row 0\nrow 1\n"
    bad = _toolbudget(args, _clean_env(TOOLBUDGET_READ_PAGE_CHARS="lots"))
    assert bad.returncode == 2
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and "TOOLBUDGET_READ_PAGE_CHARS" in lines[0], bad.stderr


def test_the_json_records_every_setting_and_its_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--set and TOOLBUDGET_* reach the replayed toolbudget, and the JSON and the table's
    header say which settings came from where; without them no header line is printed."""
    traces = _traces(tmp_path)
    base = ["bench", "--traces", str(traces), "--strategies", "toolbudget"]
    plain_json = tmp_path / "plain.json"
    plain = CliRunner().invoke(app, [*base, "--json", str(plain_json)])
    assert plain.exit_code == 0, plain.output
    assert "differ from the defaults" not in plain.output
    plain_doc = orjson.loads(plain_json.read_bytes())
    assert {s["source"] for s in plain_doc["settings"].values()} == {"default", "bench"}

    monkeypatch.setenv("TOOLBUDGET_STUB_CHARS", "400")
    out = tmp_path / "set.json"
    # The trace's results are 3,000 characters: a 2,500 cap spills every one of them.
    run = CliRunner().invoke(app, [*base, "--set", "result_cap=2500", "--json", str(out)])
    assert run.exit_code == 0, run.output
    # The header wraps at the terminal's width (80 columns under the runner): compare unwrapped.
    assert (
        "toolbudget settings differ from the defaults: result_cap=2500 (--set), "
        "stub_chars=400 (TOOLBUDGET_STUB_CHARS)" in " ".join(run.output.split())
    )
    doc = orjson.loads(out.read_bytes())
    settings = doc["settings"]
    assert settings["result_cap"] == {"value": 2500, "default": 50_000, "source": "--set"}
    assert settings["stub_chars"] == {
        "value": 400,
        "default": 300,
        "source": "env",
        "variable": "TOOLBUDGET_STUB_CHARS",
    }
    assert settings["include_path"] == {"value": True, "default": False, "source": "bench"}
    assert settings["preview_chars"]["source"] == "default"

    def ours(d: dict[str, Any]) -> dict[str, Any]:
        return next(r for r in d["summary"] if r["strategy"] == "toolbudget")

    assert ours(doc)["input_tokens"] < ours(plain_doc)["input_tokens"]  # the cap was applied


def test_set_parses_like_the_environment_and_refuses_duplicates() -> None:
    """Numbers and booleans stay text for BudgetConfig to parse, ``tools`` is JSON, ``none``
    sets an optional setting to None, and a key given twice is refused."""
    parsed = parse_sets(["Result-Cap=15000", 'tools={"bash": {"cap": 900}}', "window=none"])
    assert parsed == {"result_cap": "15000", "tools": {"bash": {"cap": 900}}, "window": None}
    settings = resolve(["result_cap=15000", "staleness=false"], window=64_000)
    assert settings.config.result_cap == 15_000 and settings.config.staleness is False
    assert settings.config.window == 64_000
    with pytest.raises(ConfigError, match="given twice"):
        parse_sets(["pressure=1", "pressure=0.9"])
    # A setting whose default is a number but which may be None takes ``none`` too.
    assert parse_sets(["protect_turns=none", "quota_bytes=NULL"]) == {
        "protect_turns": None,
        "quota_bytes": None,
    }
    assert resolve(["protect_turns=none"], window=None).config.protect_turns is None


def test_a_setting_past_64_bits_is_printed_and_recorded(tmp_path: Path) -> None:
    """A ``--set`` integer BudgetConfig accepts but orjson cannot encode (past 2**64) is shown
    in the header and written to the JSON exactly, not a traceback after the whole replay."""
    huge = 10**30
    out = tmp_path / "huge.json"
    args = ["bench", "--traces", str(_traces(tmp_path)), "--strategies", "toolbudget"]
    run = CliRunner().invoke(app, [*args, "--set", f"result_cap={huge}", "--json", str(out)])
    assert run.exit_code == 0, run.output
    assert f"result_cap={huge} (--set)" in " ".join(run.output.split())
    doc = json.loads(out.read_bytes())  # the standard library reads any integer
    assert doc["settings"]["result_cap"] == {"value": huge, "default": 50_000, "source": "--set"}


@pytest.mark.parametrize("item", ["include_path=false", "window=none", "compaction=off"])
def test_a_set_back_to_the_library_default_of_a_bench_setting_is_said(item: str) -> None:
    """``--set include_path=false``, ``window=none`` or ``compaction=off`` equal the library's
    defaults but not what the bench runs with (envelopes with paths, ``--window``,
    toolbudget-compact's compaction): the header must say so."""
    name = item.partition("=")[0]
    header = resolve([item], window=64_000).header()
    assert header is not None and f"{name}=" in header and "(--set)" in header
    plain = resolve([], window=64_000)
    assert plain.header() is None
    for s in plain.settings:  # the bench's own values are what its strategy runs with
        if s.source == "bench":
            assert s.usual == (s.value,), s
    same = resolve(["include_path=true", "window=64000"], window=64_000)
    assert same.header() is None  # set to what the bench uses anyway: nothing differs
    compact = toolbudget.STRATEGY_COMPACT.make(window=64_000).config.budget
    assert all(getattr(compact, k) == v for k, v in COMPACT_FIXED.items())
