"""The structlog logger toolbudget emits its events on: defined in the lower layer, ``spill``.

See ``spill/_logger.py`` for how it respects (or, unconfigured, quiets) the application's
structlog configuration.
"""

from __future__ import annotations

from spill._logger import get_logger

__all__ = ["get_logger"]
