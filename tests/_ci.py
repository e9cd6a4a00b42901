"""Whether the suite runs under CI, and the two guards that turn a silent skip into a failure there.

Under CI a missing prerequisite (the shared traces, an optional framework) is a broken set-up, not
a reason to skip: the run would be green while testing less than it claims.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType

import pytest

__all__ = ["in_ci", "require_dir", "require_module"]

_NOT_CI = frozenset({"", "0", "false", "no", "off"})


def in_ci() -> bool:
    """True when ``CI`` is set to anything but empty, 0, false, no or off (any case).

    CI services set ``CI=true`` (GitHub, GitLab), ``CI=1`` or ``CI=True`` (others, people by hand);
    all of them mean CI.
    """
    return os.environ.get("CI", "").strip().lower() not in _NOT_CI


def require_dir(path: Path, why_absent: str) -> Path:
    """``path`` resolved if it is a directory; else skip with ``why_absent``, or fail under CI."""
    if not path.is_dir():
        if in_ci():
            pytest.fail(f"CI is set but {path} is missing ({why_absent})", pytrace=False)
        pytest.skip(why_absent)
    return path.resolve()


def require_module(name: str, extra: str) -> ModuleType:
    """Import ``name`` for an optional-framework test: skipped when missing, a failure under CI."""
    reason = f"{name} is not installed (extra: {extra})"
    if in_ci():
        try:
            return importlib.import_module(name)
        except ImportError as exc:
            problem = str(exc)
        pytest.fail(f"CI is set but {reason}: {problem}", pytrace=False)
    module: ModuleType = pytest.importorskip(name, reason=reason)
    return module
