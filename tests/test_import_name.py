"""One import name equal to the distribution's: ``toolbudget`` exports the public API, and the
``toolbudget`` command says in one line when a foreign ``budget``/``spill``/``benchmarks`` on the
import path shadows its own (issue 34, item 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import budget
import spill
import toolbudget
from tests._entry import run_toolbudget

REPO = Path(__file__).resolve().parents[1]


def test_toolbudget_public_names_are_pinned() -> None:
    """toolbudget exports budget's public names, the stores and the summarizers, no more."""
    assert sorted(toolbudget.__all__) == sorted(
        [
            *budget.__all__,
            "FsspecStore",
            "LocalStore",
            "MemoryStore",
            "Store",
            "gc_sessions",
            "ref_for",
            "summarizers",
        ]
    )


def test_every_name_is_the_very_object_of_its_package() -> None:
    """``toolbudget.X`` is ``budget.X`` (or ``spill.X``): one class, so one ``isinstance`` and
    one ``except`` whichever name the caller imported."""
    for name in toolbudget.__all__:
        if name == "summarizers":
            continue
        home = budget if name in budget.__all__ else spill
        assert getattr(toolbudget, name) is getattr(home, name), name
    theirs = budget.summarizers
    assert toolbudget.summarizers.__all__ == theirs.__all__
    for name in theirs.__all__:
        assert getattr(toolbudget.summarizers, name) is getattr(theirs, name), name
    assert toolbudget.__version__ == budget.__version__


def test_the_integration_modules_re_export_the_integrations() -> None:
    """Each ``toolbudget.integrations`` module lists the same names as its ``budget`` module."""
    for name in ("langchain", "pydantic_ai", "openai_agents"):
        mine = REPO / "toolbudget" / "integrations" / f"{name}.py"
        theirs = REPO / "budget" / "integrations" / f"{name}.py"
        assert mine.is_file(), mine
        # Compared as text: importing them would load the frameworks (tests/test_structure.py).
        listed = _all_of(mine.read_text(encoding="utf-8"))
        assert listed == _all_of(theirs.read_text(encoding="utf-8")), name


def _all_of(source: str) -> list[str]:
    """The names of a module's ``__all__`` literal, read from its source."""
    import ast

    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            assert isinstance(value, list)
            return sorted(value)
    raise AssertionError("no __all__")


def _foreign(tmp_path: Path, name: str) -> Path:
    """A directory holding a project's own package called ``name`` (with a ``report``-less body)."""
    project = tmp_path / "project"
    (project / name).mkdir(parents=True)
    (project / name / "__init__.py").write_text('"""A project\'s own benchmarks."""\n')
    return project


def _run(args: list[str], pythonpath: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_toolbudget(args, cwd=cwd, pythonpath=pythonpath)


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("benchmarks", ["bench", "--limit", "1"]),
        ("budget", ["--version"]),
        ("spill", ["read", ".", "0" * 32]),
    ],
)
def test_a_foreign_package_on_the_path_is_named_in_one_line(
    tmp_path: Path, name: str, args: list[str]
) -> None:
    """With PYTHONPATH naming a folder that holds a project's own ``name`` package first, the
    command exits 2 with one line naming that folder and toolbudget's own, no traceback."""
    project = _foreign(tmp_path, name)
    done = _run(args, f"{project}{os.pathsep}{REPO}", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: a foreign {name!r} package at {project / name} ")
    assert f"shadows toolbudget's own ({REPO / name})" in lines[0]
    assert done.stdout == ""


def test_a_foreign_benchmarks_does_not_stop_the_commands_that_never_load_it(
    tmp_path: Path,
) -> None:
    """``toolbudget --version`` runs as usual beside a project's own ``benchmarks`` package:
    only ``bench`` and ``traces`` import toolbudget's benchmarks."""
    project = _foreign(tmp_path, "benchmarks")
    done = _run(["--version"], f"{project}{os.pathsep}{REPO}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"toolbudget {toolbudget.__version__}"


def test_importing_toolbudget_beside_a_foreign_budget_says_why_on_first_use(
    tmp_path: Path,
) -> None:
    """``import toolbudget`` with a foreign ``budget`` first on the path imports nothing of it;
    the first name used raises ImportError naming the foreign folder."""
    project = _foreign(tmp_path, "budget")
    code = (
        "import sys, toolbudget\n"
        "assert 'budget' not in sys.modules\n"
        "try:\n    toolbudget.Budget\nexcept ImportError as exc:\n    print(exc)\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{project}{os.pathsep}{REPO}"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"a foreign 'budget' package at {project / 'budget'} ")


def test_no_package_of_the_library_imports_toolbudget() -> None:
    """``toolbudget`` is the front door only: no module of budget, spill or benchmarks imports
    it (it imports them), so the layers stay benchmarks -> budget -> spill."""
    import ast

    offenders = []
    for package in ("budget", "spill", "benchmarks"):
        for path in sorted((REPO / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom) and not node.level
                    else []
                )
                if any(n.split(".")[0] == "toolbudget" for n in names):
                    offenders.append(path.relative_to(REPO).as_posix())
    assert offenders == []


def test_importing_toolbudget_and_its_command_loads_no_benchmark_code() -> None:
    """A fresh interpreter importing ``toolbudget`` and ``toolbudget.cli`` has no ``benchmarks``
    module loaded (only ``toolbudget bench`` loads it)."""
    code = "import sys, toolbudget, toolbudget.cli; print(sorted({m.split('.')[0] for m in sys.modules}))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    loaded = done.stdout
    assert "'toolbudget'" in loaded and "'budget'" in loaded
    assert "'benchmarks'" not in loaded
