"""Message-format adapters: find tool calls and results, rewrite results, keep all else.

Three formats are built in: ``anthropic`` (Messages API), ``openai_chat`` (Chat Completions) and
``openai_responses`` (Responses API input items). A session detects its format from the messages
(:func:`detect_format`) or is told it (a name or a :class:`~budget._view.Format`).
"""

from __future__ import annotations

from budget.formats._detect import FORMATS, FormatChoice, detect, detect_format, get_format
from budget.formats.anthropic import ANTHROPIC
from budget.formats.openai_chat import OPENAI_CHAT
from budget.formats.openai_responses import OPENAI_RESPONSES

__all__ = [
    "ANTHROPIC",
    "FORMATS",
    "OPENAI_CHAT",
    "OPENAI_RESPONSES",
    "FormatChoice",
    "detect",
    "detect_format",
    "get_format",
]
