"""Issue 12's size targets and module map: no module over 450 lines and no function over 60 in
``budget`` and ``spill``, every module named on ``docs/architecture.md``, and a test suite whose
collection imports none of the heavy SDKs (each xdist worker collects every module).

A few places above the targets are pinned at today's size (they may shrink, never grow), so a
module or function that grows back past a target fails here rather than in a later review.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests._collect_probe import PLUGIN_NAME, CollectImports, imports_collecting_all

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("budget", "spill")
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 60

MODULES_OVER: dict[str, int] = {}
"""Modules above ``MAX_MODULE_LINES`` today, with the most lines each may have."""

FUNCTIONS_OVER: dict[str, int] = {
    "budget/tokens/_usage.py:normalize_usage": 63,
    "spill/_log.py:_decode_lines": 68,
}
"""Functions above ``MAX_FUNCTION_LINES`` today, with the most lines each may have."""


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


SESSION_MAX_MODULE_LINES = 300
"""Issue 29's target for the session's modules (``budget/session/``): parts small enough to
read whole, the public facade only delegating."""


def test_no_module_of_the_session_is_over_300_lines() -> None:
    """Every module of ``budget/session/`` (the facade ``Budget`` included) has at most 300 lines."""
    over = {
        _rel(path): lines
        for path in sorted((REPO / "budget" / "session").glob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > SESSION_MAX_MODULE_LINES
    }
    assert not over, f"session modules over {SESSION_MAX_MODULE_LINES} lines: {over}"


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


def test_collecting_the_test_suite_imports_no_heavy_sdk(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Collecting every test module imports none of ``HEAVY_SDKS``; a module that does is named
    with what it pulled in (this run's collection when it took every module, else a fresh one)."""
    probe = request.config.pluginmanager.get_plugin(PLUGIN_NAME)
    assert isinstance(probe, CollectImports)
    if probe.collected_every_module(REPO / "tests"):
        imported = probe.found
    else:
        imported = imports_collecting_all(REPO / "tests", tmp_path / "found.json")
    assert imported == {}, f"collecting these imports heavy SDKs: {imported}"


@pytest.mark.slow
def test_collecting_the_test_suite_in_a_fresh_interpreter_imports_no_heavy_sdk(
    tmp_path: Path,
) -> None:
    """The same check in a fresh interpreter (what a run of one module falls back to): an SDK
    imported at the top of a test module would be named."""
    imported = imports_collecting_all(REPO / "tests", tmp_path / "found.json")
    assert imported == {}, f"collecting these imports heavy SDKs: {imported}"


INHERITING: dict[str, frozenset[str]] = {}
"""Classes that may still inherit state from another of the project's classes, with those
bases: none since issue 29's last slices (the stores hold their parts), and none may again."""

EXTENSION_BASES = frozenset({"Format", "ShapedFormat", "StoreBase"})
"""The project's bases meant to be subclassed and holding no state: a message format's
(``budget/_view.py``, ``budget/formats/_shapes.py``) and a store's with-blocks
(``spill/_store.py``)."""


def _class_bases() -> dict[str, tuple[str, ...]]:
    """Every class of ``budget`` and ``spill`` (``path:Name``) with the names of its bases."""
    found: dict[str, tuple[str, ...]] = {}
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                names = tuple(ast.unparse(b).split("[")[0].rpartition(".")[2] for b in node.bases)
                found[f"{_rel(path)}:{node.name}"] = names
    return found


def test_no_class_of_budget_or_spill_inherits_state_from_another() -> None:
    """A class of ``budget`` or ``spill`` derives from none of the project's stateful classes:
    protocols, errors, value types (external bases) and the stateless extension bases aside."""
    classes = _class_bases()
    by_name = {key.rpartition(":")[2]: bases for key, bases in classes.items()}
    protocols = {name for name, bases in by_name.items() if "Protocol" in bases}
    allowed = protocols | EXTENSION_BASES
    for roots in ({"Exception", "BaseException"}, {"BaseModel", "BaseSettings", "NamedTuple"}):
        tree = set(roots)
        grown = True
        while grown:  # the error tree, the value types: every class deriving from a root
            found = {name for name, bases in by_name.items() if tree & set(bases)} - tree
            tree |= found
            grown = bool(found)
        allowed |= tree
    inheriting = {
        key: frozenset(stateful)
        for key, bases in classes.items()
        if (stateful := {b for b in bases if b in by_name and b not in allowed})
    }
    assert inheriting == {k: v for k, v in INHERITING.items() if k in inheriting}, inheriting
    assert set(inheriting) <= set(INHERITING), set(inheriting) - set(INHERITING)


def test_no_docstring_holds_a_character_utf8_cannot_encode() -> None:
    """No docstring of the project or its tests holds a lone surrogate: from Python 3.13 the
    compiler encodes each docstring to UTF-8 to dedent it, so such a module cannot be imported
    (python/cpython#142411); write the escape with a doubled backslash instead."""
    bad = []
    for package in ("toolbudget", "budget", "spill", "benchmarks", "tests"):
        for path in sorted((REPO / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(
                    node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
                ):
                    continue
                doc = ast.get_docstring(node, clean=False)
                try:
                    (doc or "").encode("utf-8")
                except UnicodeEncodeError:
                    bad.append(f"{_rel(path)}:{getattr(node, 'lineno', 1)}")
    assert not bad, f"docstrings with a lone surrogate: {bad}"
