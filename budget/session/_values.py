"""The frozen values a request passes from step to step (``budget.session._pipeline``): what
the scan of the history found (:class:`Scan`) and what the passes are run for (:class:`Turn`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from budget._view import ToolResult
from budget.tokens._usage import ProviderUsage

__all__ = ["Scan", "Turn"]


@dataclass(frozen=True, slots=True)
class Scan:
    """What a request's scan of its history found."""

    k: int
    """Leading messages whose cached state (and request copy) was reused."""
    old_outputs: list[Any]
    """The copies from ``k`` on handed out by the last request (to tell a stable prefix)."""
    fresh: list[ToolResult]
    """Results with no frozen decision: what the passes decide."""
    results: list[ToolResult]
    """Every result of the messages scanned."""
    diverged: bool
    """The history is not the last one grown (rebuilt, or shorter)."""
    rescan: int
    """Where the messages looked at again start (``k`` but for the last request's last
    messages, reused when they and their copies are unchanged: ``budget.session._tail``)."""


@dataclass(frozen=True, slots=True)
class Turn:
    """What the passes of one request are run for."""

    messages: list[Any]
    k: int
    """Leading messages reused from the last request (see :class:`Scan`)."""
    fresh: list[ToolResult]
    reported: ProviderUsage | None
    """The usage reported with this request, if it anchors this history's estimate."""
    now: float
    retry: bool
