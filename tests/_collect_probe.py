"""What collecting the test suite imports: the heavy packages each collected module pulled in.

Each xdist worker collects every test module before it runs one, so a module that imports an SDK
at its top costs that import in both workers on every run, whichever tests are selected.
:class:`CollectImports` is registered by tests/conftest.py in every run; a run that collected the
whole suite has the answer already, a partial run (one module, one folder) collects the suite
again in a fresh interpreter, where the same plugin writes its answer to :data:`OUT_ENV`'s file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Final

import orjson
import pytest

from tests._lanes import loaded

__all__ = ["HEAVY_SDKS", "OUT_ENV", "PLUGIN_NAME", "CollectImports", "imports_collecting_all"]

HEAVY_SDKS: Final = frozenset(
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

OUT_ENV: Final = "TOOLBUDGET_COLLECT_IMPORTS_OUT"
"""A file to write :attr:`CollectImports.found` to (JSON) when collection finishes."""

PLUGIN_NAME: Final = "toolbudget-collect-imports"


class CollectImports:
    """A pytest plugin: the :data:`HEAVY_SDKS` first imported while each module was collected
    (``found``, by node id; ``"(start-up)"`` for those loaded before collection)."""

    def __init__(self) -> None:
        self.found: dict[str, list[str]] = {}
        self.modules: set[str] = set()
        self._seen: set[str] = set()
        self._note("(start-up)")

    def _note(self, nodeid: str) -> None:
        new = loaded(HEAVY_SDKS) - self._seen
        if new:
            self.found[nodeid] = sorted(new)
            self._seen |= new

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """Note what the collector just reported imported; remember the modules collected."""
        if report.nodeid.endswith(".py"):
            self.modules.add(report.nodeid)
        self._note(report.nodeid or "(start-up)")

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Write ``found`` to the file :data:`OUT_ENV` names, if it names one."""
        out = os.environ.get(OUT_ENV)
        if out:
            Path(out).write_bytes(orjson.dumps(self.found))

    def collected_every_module(self, tests: Path) -> bool:
        """Whether this run collected every ``test_*.py`` under ``tests``."""
        root = tests.parent
        wanted = {p.relative_to(root).as_posix() for p in tests.rglob("test_*.py")}
        return wanted <= self.modules


def imports_collecting_all(tests: Path, out: Path) -> dict[str, list[str]]:
    """:attr:`CollectImports.found` of collecting every module under ``tests`` in a fresh
    interpreter, as an xdist worker does (``out`` is a scratch file for the answer)."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=tests.parent,
        env={**os.environ, OUT_ENV: str(out)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2_000:] + done.stderr[-2_000:]
    assert " tests collected" in done.stdout, done.stdout[-2_000:]
    found: dict[str, list[str]] = orjson.loads(out.read_bytes())
    return found
