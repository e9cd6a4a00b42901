"""The root of toolbudget's error tree and the errors the store raises.

They live here, in the lower layer, so that ``spill`` never imports ``budget``; ``budget``
re-exports every one of them (``budget.BudgetError`` *is* :class:`BudgetError`), and the whole
tree, with the errors only ``budget`` raises, is drawn in ``budget/_errors.py``.
"""

from __future__ import annotations

__all__ = [
    "BudgetError",
    "ConfigError",
    "QuotaExceeded",
    "RefError",
    "SessionLocked",
    "StoreError",
]


class BudgetError(Exception):
    """Root of every error toolbudget raises on purpose."""


class ConfigError(BudgetError, ValueError):
    """A setting is invalid; the message names the field."""


class StoreError(BudgetError, OSError):
    """The session store cannot do what was asked."""


class RefError(StoreError, KeyError):
    """A read-back reference is malformed or names nothing in this session."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class SessionLocked(StoreError):
    """Another process holds the session directory's lock."""


class QuotaExceeded(StoreError):
    """Writing this body would exceed the session's size quota."""
