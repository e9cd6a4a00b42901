"""The root of toolbudget's error tree and the errors the store raises.

They live here, in the lower layer, so that ``spill`` never imports ``budget``; ``budget``
re-exports every one of them (``budget.BudgetError`` *is* :class:`BudgetError`), and the whole
tree, with the errors only ``budget`` raises, is drawn in ``budget/_errors.py``.
"""

from __future__ import annotations

import os

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

    @classmethod
    def held(cls, path: object, holder: str, timeout: float) -> SessionLocked:
        """The error for ``path`` locked by ``holder`` (the lock file's pid, when it names one),
        saying whether that is this very process: a session opened earlier and never closed."""
        pid = holder if holder.isascii() and holder.isdigit() else ""
        who = f"open in another process (pid {pid} per its lock file)" if pid else "open elsewhere"
        if pid == str(os.getpid()):  # a REPL cell that opens the session, run twice
            who = f"already open in this process (pid {pid}): an earlier open not closed"
        return cls(
            f"session {path} is {who}; a session can be open in one place at a time. Close that "
            f"one first (session.close(), or a with block), or pass lock_timeout to wait "
            f"(waited {timeout:g} s)."
        )


class QuotaExceeded(StoreError):
    """Writing this body would exceed the session's size quota."""
