"""The structlog logger toolbudget emits its events on (``budget`` and ``spill`` alike).

When the application has configured structlog, every event (one per decision) goes through its
configuration. When it has not, structlog's default would print debug events to stdout, which no
library should do: only warnings and errors are printed then, to stderr. The choice is made at
each event, so configuring structlog after importing toolbudget works.
"""

from __future__ import annotations

import logging
import sys
from functools import cache
from typing import Any

import structlog

__all__ = ["get_logger"]


@cache
def _fallback(name: str) -> Any:
    return structlog.wrap_logger(
        structlog.PrintLogger(sys.stderr),
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.dev.ConsoleRenderer(colors=False),
        ],
        logger_name=name,
    ).bind()  # bound once: the lazy proxy would rebuild the logger on every event (~15 us)


class _Logger:
    """Resolves to the application's structlog logger, or the quiet fallback, at each call."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, method: str) -> Any:
        target = (
            structlog.get_logger(self._name) if structlog.is_configured() else _fallback(self._name)
        )
        return getattr(target, method)


def get_logger(name: str) -> Any:
    """A structlog logger named ``name`` that respects the application's configuration."""
    return _Logger(name)
