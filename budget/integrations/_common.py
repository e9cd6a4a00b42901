"""What every integration shares: checking the session it is given, the overflow retry decision."""

from __future__ import annotations

from budget._errors import ConfigError
from budget._overflow import is_context_overflow
from budget._session import Budget

__all__ = ["is_overflow", "require_session"]


def require_session(session: object, integration: str) -> Budget:
    """``session`` itself when it is a Budget session; ConfigError naming what it is otherwise."""
    if not isinstance(session, Budget):
        raise ConfigError(
            f"{integration} needs a budget.Budget session (Budget.open(path)), "
            f"not {type(session).__name__}"
        )
    return session


def is_overflow(session: Budget, error: BaseException) -> bool:
    """Tell the session about a prompt-too-long error; True when the request should be retried.

    Other errors are left alone (not even logged): they belong to the caller. After the third
    overflow in a row the session raises ContextOverflow instead of asking for a retry.
    """
    if not isinstance(error, Exception) or not is_context_overflow(error):
        return False
    return session.on_overflow(error)
