"""The packages depend one way: ``budget`` on ``spill``, never back; nothing imports the benchmarks.

The graph is read from the source (every ``import`` statement, also those inside functions), so
a lazy import cannot hide a loop; the fresh-interpreter checks prove what an import really loads.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

import budget
import spill
from budget import _errors

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("budget", "spill")


def _modules() -> dict[str, Path]:
    """Every module of the walked packages by dotted name (a package by its own name)."""
    out: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The first-party modules ``name`` imports; ``from pkg import sub`` counts as ``pkg.sub``."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            subs = {f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known}
            found.update(subs)
            if len(subs) < len(node.names):
                found.add(base)
    return found


@functools.cache
def _graph() -> dict[str, set[str]]:
    known = _modules()
    return {name: _imports(name, path, known) for name, path in known.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every back edge found by a depth-first walk, as the loop it closes."""
    state: dict[str, int] = {}
    stack: list[str] = []
    loops: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node] & graph.keys()):
            if state.get(nxt) == 1:
                loops.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return loops


_STEPS = (
    "import spill\nfrom spill import LocalStore, MemoryStore, gc_sessions",
    "import budget\nimport budget.cli",
)
"""What a fresh interpreter imports, in this order: spill alone first, then budget and its CLI."""


@functools.cache
def _loaded_after_each_step() -> tuple[frozenset[str], ...]:
    """The top-level package names in ``sys.modules`` after each of ``_STEPS``, run in order in
    one fresh interpreter (once a run: two tests read it)."""
    report = "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
    code = "\n".join(["import sys", *(f"{step}\n{report}" for step in _STEPS)])
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    lines = out.stdout.splitlines()
    assert len(lines) == len(_STEPS), out.stdout
    return tuple(frozenset(line.split()) for line in lines)


def test_budget_and_spill_import_each_other_without_a_cycle() -> None:
    """No chain of imports among budget's and spill's modules leads back to where it started."""
    assert _cycles(_graph()) == []


def test_spill_never_imports_budget_or_the_benchmarks() -> None:
    """spill is the lower layer: none of its modules names budget or benchmarks in an import."""
    graph = _graph()
    upward = {
        (name, dep)
        for name, deps in graph.items()
        if name.split(".")[0] == "spill"
        for dep in deps
        if dep.split(".")[0] in ("budget", "benchmarks")
    }
    assert upward == set()


def test_importing_spill_alone_does_not_import_budget() -> None:
    """A fresh interpreter that imports only spill (and its stores) has no budget module loaded."""
    loaded = _loaded_after_each_step()[0]
    assert "spill" in loaded
    assert "budget" not in loaded


def test_importing_budget_and_its_cli_does_not_import_the_benchmarks() -> None:
    """``import budget`` and ``import budget.cli`` load no benchmark code (only ``bench`` does)."""
    loaded = _loaded_after_each_step()[1]
    assert "budget" in loaded
    assert "benchmarks" not in loaded


def test_the_error_tree_in_the_docstring_is_the_class_tree() -> None:
    """Each error drawn in budget/_errors.py's tree derives from the one drawn above it."""
    doc = inspect.getdoc(_errors) or ""
    rows = re.findall(r"^([ │├└─]*)(\w+)\s", doc, flags=re.MULTILINE)
    tree = [(len(indent), name) for indent, name in rows if hasattr(budget, name)]
    assert [name for _, name in tree] == [
        "BudgetError",
        "ConfigError",
        "InputError",
        "FormatError",
        "FormatUnknown",
        "StoreError",
        "RefError",
        "SessionLocked",
        "QuotaExceeded",
        "ContextOverflow",
    ]
    parents: list[tuple[int, type[BaseException]]] = []
    for depth, name in tree:
        cls = getattr(budget, name)
        while parents and parents[-1][0] >= depth:
            parents.pop()
        if parents:
            assert cls.__bases__[0] is parents[-1][1], name
        parents.append((depth, cls))


def test_spill_raises_the_very_classes_budget_exports() -> None:
    """An error raised by a store is caught as budget's class of the same name: one tree."""
    with spill.MemoryStore() as store, pytest.raises(budget.RefError) as caught:
        store.get("0" * 32)
    assert isinstance(caught.value, budget.StoreError)
    assert isinstance(caught.value, budget.BudgetError)
    assert isinstance(caught.value, KeyError)
