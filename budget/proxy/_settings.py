"""The proxy's settings: where it listens, where it forwards, where sessions live."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from budget._config import BudgetConfig
from budget._errors import ConfigError

__all__ = ["DEFAULT_BUDGET", "ProxySettings"]

DEFAULT_BUDGET: Final[Mapping[str, Any]] = {"include_path": True}
"""Session settings the proxy changes from the library's: the agents behind a proxy all have
file or shell tools (Claude Code, Codex CLI, Gemini CLI, opencode), and no read-back tool is
added to their requests, so envelopes name the spilled file for the agent to read (issue 33,
item 4). Every other setting is the library's default or its ``TOOLBUDGET_*`` variable."""


@dataclass(frozen=True, slots=True)
class ProxySettings:
    """Everything ``toolbudget proxy`` is told."""

    root: Path
    """The directory holding one session directory per conversation (``toolbudget gc`` it)."""
    host: str = "127.0.0.1"
    """Loopback by default: the agent's keys pass through the proxy."""
    port: int = 8788
    anthropic_upstream: str = "https://api.anthropic.com"
    openai_upstream: str = "https://api.openai.com"
    budget: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULT_BUDGET))
    """Settings of every session (``BudgetConfig`` fields); the model is each request's own."""
    max_open: int = 256
    """Sessions kept open at most; the least recently used idle ones are closed beyond it (fewer
    where the open-file limit has no room for them: :mod:`budget.proxy._limits`)."""
    idle_close_s: float = 900.0
    """A session idle this long is closed (its lock released) when another one is opened."""

    def __post_init__(self) -> None:
        for name in ("anthropic_upstream", "openai_upstream"):
            url = urlsplit(getattr(self, name))
            if url.scheme not in ("http", "https") or not url.netloc:
                raise ConfigError(f"{name} must be an http(s) URL, not {getattr(self, name)!r}")
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port must be between 0 and 65535, not {self.port}")
        if self.max_open < 1 or self.idle_close_s <= 0:
            raise ConfigError("max_open must be at least 1 and idle_close_s positive")
        BudgetConfig(**dict(self.budget))  # refused now, not at the first request

    @property
    def loopback(self) -> bool:
        """Whether the proxy listens on this machine only."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False
