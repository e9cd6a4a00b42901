"""Issue 12's size targets and module map: no module over 450 lines and no function over 60 in
``budget`` and ``spill``, every module named on ``docs/architecture.md``, and a test suite whose
collection imports none of the heavy SDKs (each xdist worker collects every module).

A few places above the targets are pinned at today's size (they may shrink, never grow), so a
module or function that grows back past a target fails here rather than in a later review.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("budget", "spill")
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 60

MODULES_OVER: dict[str, int] = {"budget/_session.py": 460}
"""Modules above ``MAX_MODULE_LINES`` today, with the most lines each may have."""

FUNCTIONS_OVER: dict[str, int] = {
    "budget/_usage.py:normalize_usage": 63,
    "spill/_log.py:_decode_lines": 68,
}
"""Functions above ``MAX_FUNCTION_LINES`` today, with the most lines each may have."""


HEAVY_SDKS = frozenset(
    {
        "agents",
        "anthropic",
        "boto3",
        "botocore",
        "langchain",
        "langchain_core",
        "langgraph",
        "langsmith",
        "matplotlib",
        "moto",
        "openai",
        "pydantic_ai",
        "ray",
        "s3fs",
    }
)
"""Top-level packages that cost from a fraction of a second to seconds to import: a test imports
them when it runs (or through a fixture), never at the top of its module."""

_COLLECT_PROBE = """
import json, os, sys

HEAVY = frozenset(json.loads(os.environ["TOOLBUDGET_HEAVY"]))
_seen = set()
_found = {}


def pytest_collectreport(report):
    new = {name.partition(".")[0] for name in sys.modules} & HEAVY - _seen
    if new:
        _found[report.nodeid or "(start-up)"] = sorted(new)
        _seen.update(new)


def pytest_collection_finish(session):
    with open(os.environ["TOOLBUDGET_PROBE_OUT"], "w", encoding="utf-8") as out:
        json.dump(_found, out)
"""


def _sources() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (REPO / package).rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def test_no_module_in_budget_or_spill_is_over_450_lines() -> None:
    """Every module of ``budget`` and ``spill`` has at most 450 lines (or its pinned size)."""
    over = {
        _rel(path): lines
        for path in _sources()
        if (lines := len(path.read_text(encoding="utf-8").splitlines()))
        > MODULES_OVER.get(_rel(path), MAX_MODULE_LINES)
    }
    assert not over, f"modules over {MAX_MODULE_LINES} lines: {over}"


def test_no_function_in_budget_or_spill_is_over_60_lines() -> None:
    """Every function of ``budget`` and ``spill`` spans at most 60 lines (or its pinned size)."""
    over: dict[str, int] = {}
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{_rel(path)}:{node.name}"
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > FUNCTIONS_OVER.get(name, MAX_FUNCTION_LINES):
                    over[name] = lines
    assert not over, f"functions over {MAX_FUNCTION_LINES} lines: {over}"


def test_architecture_page_names_every_module_of_budget_and_spill() -> None:
    """``docs/architecture.md`` has a table row for every top-level module and subpackage."""
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = []
    for package in PACKAGES:
        for child in sorted((REPO / package).iterdir()):
            if child.suffix == ".py":
                name = f"`{package}/{child.name}`"
            elif (child / "__init__.py").is_file():
                name = f"`{package}/{child.name}/`"
            else:
                continue
            if f"| {name} |" not in page:
                missing.append(name)
    assert not missing, f"docs/architecture.md has no row for {missing}"


def test_collecting_the_test_suite_imports_no_heavy_sdk(tmp_path: Path) -> None:
    """Collecting every test module (in a fresh interpreter, as an xdist worker does) imports none
    of ``HEAVY_SDKS``; a module that does is named with what it pulled in."""
    (tmp_path / "collect_probe.py").write_text(_COLLECT_PROBE, encoding="utf-8")
    found = tmp_path / "found.json"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)]),
        "TOOLBUDGET_HEAVY": json.dumps(sorted(HEAVY_SDKS)),
        "TOOLBUDGET_PROBE_OUT": str(found),
    }
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "collect_probe"]
    done = subprocess.run(
        [*command, "-p", "no:cacheprovider", "tests"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2_000:] + done.stderr[-2_000:]
    assert " tests collected" in done.stdout, done.stdout[-2_000:]
    imported = json.loads(found.read_text(encoding="utf-8"))
    assert imported == {}, f"collecting these imports heavy SDKs: {imported}"
