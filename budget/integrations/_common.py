"""What every integration shares: checking the session it is given, the overflow retry decision."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from budget._errors import ConfigError
from budget.session._budget import Budget
from budget.tokens._overflow import is_context_overflow

__all__ = [
    "attach_summarizer",
    "is_overflow",
    "is_summary",
    "native_summary",
    "require_flag",
    "require_session",
]

_M = TypeVar("_M")


def require_session(session: object, integration: str) -> Budget:
    """``session`` itself when it is a Budget session; ConfigError naming what it is otherwise."""
    if not isinstance(session, Budget):
        raise ConfigError(
            f"{integration} needs a budget.Budget session (Budget.open(path)), "
            f"not {type(session).__name__}"
        )
    return session


def require_flag(value: object, name: str, integration: str) -> bool:
    """``value`` when it is a bool; a ConfigError otherwise: a string such as ``"no"`` would be
    taken as true (the tool added, the retry made) with no word said."""
    if not isinstance(value, bool):
        raise ConfigError(f"{integration}({name}=...) takes True or False, not {value!r:.40}")
    return value


def is_overflow(session: Budget, error: BaseException) -> bool:
    """Tell the session about a prompt-too-long error; True when the request should be retried.

    Other errors are left alone (not even logged): they belong to the caller. At the third
    overflow in a row the session compacts on the retry when it has a summarizer, and raises
    ContextOverflow instead of asking for a retry when nothing is left to do.
    """
    if not isinstance(error, Exception) or not is_context_overflow(error):
        return False
    return session.on_overflow(error)


def attach_summarizer(
    session: Budget, summarizer: Callable[[Sequence[Any]], Any] | None, integration: str
) -> None:
    """Give ``session`` the summarizer an integration was given, so that it compacts (with its
    ``compaction`` setting); a session holding another one is a ConfigError (one summarizer,
    given in one place)."""
    if summarizer is None:
        return
    if not callable(summarizer):
        # Budget.open refuses one too: here it would fail at the first compaction instead.
        raise ConfigError(
            f"{integration}(summarizer=...) takes a callable (see budget.summarizers), "
            f"not {type(summarizer).__name__}"
        )
    compactor = session._compactor
    if compactor.summarizer is not None and compactor.summarizer is not summarizer:
        raise ConfigError(
            f"{integration}: the session was opened with a summarizer already; give it either "
            "to Budget.open or to the integration"
        )
    compactor.summarizer = summarizer


def is_summary(message: object) -> bool:
    """Whether ``message`` is the summary message compaction projects (a user dict, in every
    format; see ``budget.compaction._compaction.summary_message``)."""
    return (
        type(message) is dict
        and message.get("role") == "user"
        and isinstance(message.get("content"), str)
    )


def native_summary(summaries: dict[str, _M], message: Any, make: Callable[[str], _M]) -> Any:
    """``message``, or for compaction's summary the framework's message showing it
    (``make(text)``): the same object while the checkpoint holds (``summaries`` keeps them by
    text: the session hands each copy a summary dict of its own), so the copy's prefix stays the
    same."""
    if not is_summary(message):
        return message
    text = message["content"]
    known = summaries.get(text)
    if known is None:
        if len(summaries) >= 64:
            summaries.clear()  # one per checkpoint: old ones are not sent again
        known = summaries[text] = make(text)
    return known
