"""Message-format adapters: find tool calls and results, rewrite results, keep all else."""

from __future__ import annotations

from budget.formats.anthropic import ANTHROPIC

__all__ = ["ANTHROPIC"]
