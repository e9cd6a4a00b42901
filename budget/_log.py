"""toolbudget's event emitter: defined in the lower layer, ``spill``.

See ``spill/_logger.py`` for the names (``toolbudget.<area>.<event>``), the stdlib loggers they go
to, and how the application's structlog or logging configuration decides what is emitted.
"""

from __future__ import annotations

from spill._logger import Events, get_logger

__all__ = ["Events", "get_logger"]
