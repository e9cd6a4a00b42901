"""The ``toolbudget`` console script: check the packages it runs are its own, then run it.

The command itself is :mod:`budget.cli`. Before importing it, this checks that ``budget`` and
``spill`` (and, for the commands that load it, ``benchmarks``) resolve to this distribution's
folders: a project's own ``benchmarks/`` on the import path would otherwise be imported in its
place, and the command would fail deep inside (``No module named 'benchmarks.report'``).
"""

from __future__ import annotations

import sys

from toolbudget._shadow import shadowed

__all__ = ["main"]

_LOADS_BENCHMARKS = frozenset({"bench", "traces"})
"""The commands that import ``benchmarks``; ``read`` and ``gc`` work whatever it names."""


def _command(argv: list[str]) -> str | None:
    """The command named on the line: the first argument that is not an option (the top-level
    options, ``--verbose``, ``--version``, ``--help``, take no value)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def main() -> None:
    """Entry point of the ``toolbudget`` console script."""
    names = ["budget", "spill"]
    if _command(sys.argv[1:]) in _LOADS_BENCHMARKS:
        names.append("benchmarks")
    problem = shadowed(names)
    if problem is not None:
        sys.stderr.write(f"error: {problem}\n")
        raise SystemExit(2)
    from budget.cli import main as run  # noqa: PLC0415 - only once the packages are ours

    run()
