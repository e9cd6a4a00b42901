"""The packages depend one way, benchmarks -> budget -> spill, with no cycle inside any of them.

import-linter reads the graph from the source (every ``import`` statement, also those inside
functions, so a lazy import cannot hide a loop) and checks pyproject.toml's contracts; the
fresh-interpreter checks prove what an import really loads.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import budget
import spill
from budget import _errors

REPO = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
CONTRACTS = (
    "The packages depend one way: benchmarks -> budget -> spill",
    "No cycle among the modules and subpackages of any package",
    "The passes import no session code",
)
"""The import contracts of pyproject.toml's ``[tool.importlinter]``, by name."""


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """import-linter's verdict on the packages under ``root``, with ``root``'s pyproject.toml."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo", str(root / "pyproject.toml")],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _copy_packages(dest: Path) -> Path:
    """The three packages and pyproject.toml copied under ``dest`` (sources only)."""
    for package in ("toolbudget", "benchmarks", "budget", "spill"):
        shutil.copytree(
            REPO / package, dest / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy2(REPO / "pyproject.toml", dest / "pyproject.toml")
    return dest


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


def test_the_import_contracts_are_kept() -> None:
    """lint-imports keeps every contract: layers benchmarks -> budget -> spill, no cycle inside a
    package, the passes importing no session code (lazy imports inside functions count too)."""
    done = _lint_imports(REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    for name in CONTRACTS:
        assert f"{name} KEPT" in done.stdout, done.stdout


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        ("spill/_store.py", "import budget._config\n", CONTRACTS[0]),
        ("benchmarks/perf.py", "from benchmarks import cli\n", CONTRACTS[1]),
        ("budget/passes/cap.py", "from budget.session import _journal\n", CONTRACTS[2]),
        ("budget/_wrap.py", "import toolbudget\n", CONTRACTS[0]),
    ],
)
def test_each_contract_breaks_on_the_import_it_forbids(
    tmp_path: Path, module: str, line: str, broken: str
) -> None:
    """One forbidden import added to a copy of the packages (an upward import, the benchmarks'
    old circle, a pass importing the journal) breaks its contract, so the check above can fail."""
    root = _copy_packages(tmp_path)
    with (root / module).open("a", encoding="utf-8") as out:
        out.write(line)
    done = _lint_imports(root)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{broken} BROKEN" in done.stdout, done.stdout


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
