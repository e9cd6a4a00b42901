"""Whether ``budget``, ``spill`` and ``benchmarks`` are toolbudget's own, before importing them.

The three folders keep their import names (the layout is fixed), and ``benchmarks`` in
particular is a name many projects give their own folder: run from such a project (or with it on
``PYTHONPATH``), Python imports that folder instead of toolbudget's and the command fails deep
inside with ``No module named 'benchmarks.report'``. Only the standard library is used here, and
nothing is imported: :func:`importlib.util.find_spec` only locates a top-level package.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterable

__all__ = ["shadowed"]

HOME = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
"""The directory holding toolbudget's packages side by side (site-packages, or a checkout)."""


def shadowed(names: Iterable[str]) -> str | None:
    """One line saying which of ``names`` is not toolbudget's own package, or None if all are."""
    for name in names:
        own = os.path.join(HOME, name)
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):  # a broken foreign package: still not ours
            spec = None
        origin = spec.origin if spec is not None else None
        if origin is None:
            return (
                f"toolbudget's {name!r} package is missing (expected in {own}): "
                "reinstall toolbudget"
            )
        found = os.path.dirname(os.path.realpath(origin))
        if found != own:
            return (
                f"a foreign {name!r} package at {found} shadows toolbudget's own ({own}): it comes "
                "first on the import path (PYTHONPATH or the current directory); rename it, or "
                "run toolbudget from another directory"
            )
    return None
