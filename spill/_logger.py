"""The events toolbudget emits (``budget`` and ``spill`` alike), named ``toolbudget.<area>.<event>``.

Each event goes to the standard-library logger named by its area (``toolbudget.session``,
``toolbudget.spill``, ``toolbudget.log``, ``toolbudget.gc``, ``toolbudget.readback``), so
``logging.getLogger("toolbudget").setLevel(...)`` (or a child's) decides which are emitted.

As a library, toolbudget never configures structlog or logging for the application; at each event:

- when the application has configured structlog (``structlog.is_configured()``, which
  ``structlog.testing.capture_logs`` also sets), the event goes through its configuration, as
  ``structlog.get_logger("toolbudget.<area>")`` (a ``structlog.stdlib.LoggerFactory`` makes it that
  stdlib logger). A level set on a ``toolbudget`` logger still filters it first; where none is
  set, the application's own filtering decides (its debug events included).
- when it has not, the event goes through structlog's standard-library integration: a
  ``structlog.stdlib.BoundLogger`` wrapping the stdlib logger, whose message is the event in
  logfmt and whose ``extra`` holds the event name and fields, as
  ``structlog.stdlib.render_to_log_kwargs`` passes them (structlog 26.1, ``structlog/stdlib.py``),
  so a ``ProcessorFormatter`` with ``ExtraAdder()`` in its ``foreign_pre_chain`` recovers them.
  With no logging set up at all, Python's last-resort handler prints warnings and errors to
  stderr, and debug events stay silent.
"""

from __future__ import annotations

import logging
from functools import cache
from typing import Any, Final

import structlog
from structlog.typing import EventDict

__all__ = ["Events", "get_logger"]

ROOT: Final = "toolbudget"

# Attributes a LogRecord already has: an ``extra`` key among them makes logging raise KeyError.
_RECORD_KEYS: Final = frozenset(
    {*logging.LogRecord("", 0, "", 0, "", None, None).__dict__, "message", "asctime"}
)
_LOGFMT: Final = structlog.processors.LogfmtRenderer(key_order=["event"], bool_as_flag=False)


def _to_log_kwargs(_logger: Any, _method: str, event_dict: EventDict) -> dict[str, Any]:
    """The message in logfmt, the event and its fields as ``extra`` (renamed if a record has them)."""
    extra = {(f"event_{k}" if k in _RECORD_KEYS else k): v for k, v in event_dict.items()}
    return {"msg": _LOGFMT(None, "", dict(event_dict)), "extra": extra}


@cache
def _stdlib(area: str) -> logging.Logger:
    # Loggers live as long as the process: looking one up again only costs the module lock.
    return logging.getLogger(area)


@cache
def _bridge(area: str) -> Any:
    """structlog's stdlib BoundLogger on the area's logger, bound once (a lazy proxy rebuilds)."""
    return structlog.wrap_logger(
        _stdlib(area), wrapper_class=structlog.stdlib.BoundLogger, processors=[_to_log_kwargs]
    ).bind()


def _level_set(logger: logging.Logger) -> bool:
    """Whether the application set a level on this ``toolbudget`` logger or one above it."""
    current: logging.Logger | None = logger
    while current is not None and current.name.startswith(ROOT):
        if current.level != logging.NOTSET:
            return True
        current = current.parent
    return False


class Events:
    """Emits events named ``toolbudget.<area>.<event>`` on the stdlib logger of their area.

    Stateless: the configuration is looked at on each event, so configuring structlog or logging
    after importing toolbudget works.
    """

    __slots__ = ()

    def debug(self, event: str, **fields: Any) -> None:
        """Emit a debug event (one per decision)."""
        self._emit(logging.DEBUG, "debug", event, fields)

    def info(self, event: str, **fields: Any) -> None:
        """Emit an info event."""
        self._emit(logging.INFO, "info", event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        """Emit a warning event (something unusual recovered from)."""
        self._emit(logging.WARNING, "warning", event, fields)

    def error(self, event: str, **fields: Any) -> None:
        """Emit an error event (an operation failed; nothing was lost)."""
        self._emit(logging.ERROR, "error", event, fields)

    def emits(self, event: str, level: int = logging.DEBUG) -> bool:
        """Whether an event named ``event`` at ``level`` would be passed on now: a caller that
        emits many (one per decision) builds their fields only then."""
        stdlib = _stdlib(_area(event))
        if structlog.is_configured():
            return not _level_set(stdlib) or stdlib.isEnabledFor(level)
        return stdlib.isEnabledFor(level)

    @staticmethod
    def _emit(level: int, method: str, event: str, fields: dict[str, Any]) -> None:
        area = _area(event)
        stdlib = _stdlib(area)
        if structlog.is_configured():
            if _level_set(stdlib) and not stdlib.isEnabledFor(level):
                return
            getattr(structlog.get_logger(area), method)(event, **fields)
        elif stdlib.isEnabledFor(level):
            getattr(_bridge(area), method)(event, **fields)


def _area(event: str) -> str:
    """The logger area of ``event`` (``toolbudget.<area>.<event>``)."""
    area = event.rpartition(".")[0]
    # A misnamed event (tests/test_docs.py rejects them) still gets out, on the root.
    return area if area.startswith(ROOT) else ROOT


def get_logger(name: str = ROOT) -> Events:
    """toolbudget's event emitter; ``name`` is the root every event name lies under."""
    if name != ROOT:
        raise ValueError(f"toolbudget's events are all under {ROOT!r}, not {name!r}")
    return Events()
