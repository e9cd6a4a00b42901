"""The summarizers compaction can use: :mod:`budget.summarizers`, under the distribution's name."""

from __future__ import annotations

from budget.summarizers import (
    PROMPT,
    Summarizer,
    SummaryTimeout,
    SummaryTooLong,
    anthropic,
    extractive,
    openai,
)

__all__ = [
    "PROMPT",
    "Summarizer",
    "SummaryTimeout",
    "SummaryTooLong",
    "anthropic",
    "extractive",
    "openai",
]
