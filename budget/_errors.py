"""The one error tree of toolbudget.

Every error toolbudget raises on purpose derives from :class:`BudgetError`::

    BudgetError
    ├── ConfigError            a setting is invalid (names the field)
    ├── InputError             the messages passed in are malformed (names the message and field)
    │   └── FormatError        the message format is unknown or ambiguous
    ├── StoreError             the session store cannot do what was asked
    │   ├── RefError           a read-back reference is invalid or unknown
    │   ├── SessionLocked      another process holds the session
    │   └── QuotaExceeded      the session's size quota would be exceeded
    └── ContextOverflow        the provider refused the prompt as too long, three times in a row

A failed spill is *not* an error for the caller: the text stays inline and the decision is
frozen as ``kept_unspillable``; the store error is logged as an event instead.
"""

from __future__ import annotations

__all__ = [
    "BudgetError",
    "ConfigError",
    "ContextOverflow",
    "FormatError",
    "InputError",
    "QuotaExceeded",
    "RefError",
    "SessionLocked",
    "StoreError",
]


class BudgetError(Exception):
    """Root of every error toolbudget raises on purpose."""


class ConfigError(BudgetError, ValueError):
    """A setting is invalid; the message names the field."""


class InputError(BudgetError, ValueError):
    """The messages passed in are malformed; the message says which one and why."""


class FormatError(InputError):
    """The message format is unknown, ambiguous, or not the one that was named."""


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


class ContextOverflow(BudgetError):
    """The provider refused the prompt as too long three times in a row, despite harder budgeting."""
