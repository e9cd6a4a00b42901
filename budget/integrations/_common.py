"""What every integration shares: checking the session's format, the overflow retry decision."""

from __future__ import annotations

from budget._errors import ConfigError
from budget._overflow import is_context_overflow
from budget._session import Budget
from budget._view import Format

__all__ = ["is_overflow", "require_format"]


def require_format(session: Budget, fmt: Format, integration: str) -> None:
    """Raise ConfigError unless ``session`` reads ``fmt``'s messages (a session per format)."""
    if not isinstance(session, Budget):
        raise ConfigError(
            f"{integration} needs a budget.Budget session, not {type(session).__name__}"
        )
    if session.format.name != fmt.name:
        raise ConfigError(
            f"{integration} needs a session opened with format={fmt.name!r} "
            f"(e.g. Budget.open(path, format=...)); this one reads {session.format.name!r} messages"
        )


def is_overflow(session: Budget, error: BaseException) -> bool:
    """Tell the session about a prompt-too-long error; True when the request should be retried.

    Other errors are left alone (not even logged): they belong to the caller. After the third
    overflow in a row the session raises ContextOverflow instead of asking for a retry.
    """
    if not isinstance(error, Exception) or not is_context_overflow(error):
        return False
    return session.on_overflow(error)
