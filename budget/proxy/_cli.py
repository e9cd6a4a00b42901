"""``toolbudget proxy``'s body, imported only when the command runs (the extra may be absent)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from budget.proxy._serve import serve
from budget.proxy._settings import ProxySettings

__all__ = ["run"]


def run(
    root: Path, host: str, port: int, anthropic_upstream: str | None, openai_upstream: str | None
) -> None:
    """Serve until interrupted, printing one line once listening (a test reads the port)."""
    settings = ProxySettings(root=root.expanduser(), host=host, port=port)
    if anthropic_upstream is not None:
        settings = replace(settings, anthropic_upstream=anthropic_upstream)
    if openai_upstream is not None:
        settings = replace(settings, openai_upstream=openai_upstream)

    def ready(bound: int) -> None:
        shown = f"[{host}]" if ":" in host else host
        print(
            f"toolbudget proxy on http://{shown}:{bound} (sessions in {settings.root})",
            file=sys.stderr,
            flush=True,
        )

    serve(settings, on_ready=ready)
