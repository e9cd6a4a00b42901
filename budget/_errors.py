"""The one error tree of toolbudget.

Every error toolbudget raises on purpose derives from :class:`BudgetError`::

    BudgetError
    ├── ConfigError            a setting is invalid (names the field)
    ├── InputError             the messages passed in are malformed (names the message and field)
    │   └── FormatError        the message format is unknown or ambiguous
    │       └── FormatUnknown  asked for the session's format before it is known
    ├── StoreError             the session store cannot do what was asked
    │   ├── RefError           a read-back reference is invalid or unknown
    │   ├── SessionLocked      another process holds the session
    │   └── QuotaExceeded      the session's size quota would be exceeded
    ├── ContextOverflow        the provider refused the prompt as too long, three times in a row
    ├── SummaryTooLong         a summarizer's request is over its model's window (raised by a
    │                          summarizer; compaction drops the oldest rounds and retries)
    └── SummaryTimeout         a summarizer ran past ``compact_timeout_s``

A failed spill is *not* an error for the caller: the text stays inline and the decision is
frozen as ``kept_unspillable``; the store error is logged as an event instead.

The root, ``ConfigError`` and the store errors are defined in ``spill/_errors.py``, the lower
layer that raises them (so ``spill`` never imports ``budget``), and re-exported here as the very
same classes; the errors only ``budget`` raises are defined below.
"""

from __future__ import annotations

from spill._errors import (
    BudgetError,
    ConfigError,
    QuotaExceeded,
    RefError,
    SessionLocked,
    StoreError,
)

__all__ = [
    "BudgetError",
    "ConfigError",
    "ContextOverflow",
    "FormatError",
    "FormatUnknown",
    "InputError",
    "QuotaExceeded",
    "RefError",
    "SessionLocked",
    "StoreError",
    "SummaryTimeout",
    "SummaryTooLong",
]


class InputError(BudgetError, ValueError):
    """The messages passed in are malformed; the message says which one and why."""


class FormatError(InputError):
    """The message format is unknown, ambiguous, or not the one that was named."""


class FormatUnknown(FormatError):
    """The session's format was needed (the read-back tool's shape) before it is known: name it
    with ``Budget.open(..., format=...)`` or pass ``format=`` to the call."""


class ContextOverflow(BudgetError):
    """The provider refused the prompt as too long three times in a row, despite harder budgeting."""


class SummaryTooLong(BudgetError):
    """A summarizer's request is longer than its model accepts.

    Raise it from your own summarizer (the SDK adapters of :mod:`budget.summarizers` need not:
    a provider's "prompt is too long" error is recognised as the same thing). Compaction then
    drops the oldest rounds from what it summarizes and asks again.
    """


class SummaryTimeout(BudgetError, TimeoutError):
    """A summarizer did not return within ``compact_timeout_s``: the compaction failed."""
