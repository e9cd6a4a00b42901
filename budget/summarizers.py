"""Summarizers for compaction: a callable taking the messages to summarize and returning text.

A summarizer is any callable ``(messages) -> str`` (or an ``async`` one). Three ship here:

- :func:`extractive` is deterministic and calls no model: for tests and benchmarks, where summary
  sizes must be equal from run to run.
- :func:`anthropic` and :func:`openai` wrap the official SDK clients (sync or async). They send
  the messages as one plain-text transcript (so a conversation in any of the three wire formats
  can be summarized by either provider), under a structured prompt, and **no tools**: the
  summarizer must describe the work, never act on it (docs/concepts/compaction.md).

A summarizer whose request is too long for its model raises :class:`SummaryTooLong` (or lets
the provider's own "prompt is too long" error through: the SDK adapters do, and compaction
recognises it as :func:`budget.tokens._overflow.is_context_overflow` does): compaction then drops the
oldest rounds from what it summarizes and asks again. One that runs past ``compact_timeout_s``
fails the compaction with :class:`SummaryTimeout`.

The prompt's sections (goal, key technical points, files involved, errors and fixes, current
work, next steps) follow the structured summary of Claude Code's auto-compact, as the design
articles the project grew from describe it.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from budget._errors import InputError, SummaryTimeout, SummaryTooLong
from budget.compaction._transcript import render_transcript
from budget.formats._common import field

__all__ = [
    "PROMPT",
    "Summarizer",
    "SummaryTimeout",
    "SummaryTooLong",
    "anthropic",
    "extractive",
    "openai",
]

Summarizer = Callable[[Sequence[Any]], "str | Awaitable[str]"]
"""What ``Budget.open(..., summarizer=...)`` takes: messages in, summary text out."""

PROMPT = """\
You are summarizing the earlier part of a coding agent's conversation so that the agent can \
continue its task with only your summary and the most recent messages. Do not continue the task \
and do not call tools: write the summary only.

Write these sections, each under its heading, concise but complete:
1. Goal: what the user asked for, with every explicit requirement and constraint.
2. Key technical points: decisions made, facts learned, approaches chosen or rejected.
3. Files involved: each path read, created or changed, and what matters about it.
4. Errors and fixes: each error met, its cause, and how it was fixed (or that it is open).
5. Current work: what was being done when the conversation was cut, precisely.
6. Next steps: what remains to do, in order.

The conversation follows."""
"""The system prompt of the SDK adapters."""

DEFAULT_MAX_TOKENS = 8_192
"""Output tokens the SDK adapters ask for: well inside the 20k output reserve."""


def anthropic(
    client: Any, *, model: str, max_tokens: int = DEFAULT_MAX_TOKENS, prompt: str = PROMPT
) -> Summarizer:
    """A summarizer calling ``client.messages.create`` (an ``Anthropic`` or ``AsyncAnthropic``).

    The request is the prompt as ``system``, the transcript as the one user turn, and no
    ``tools``; the summary is the text blocks of the response, joined.
    """
    create = _method(client, "messages", "anthropic")

    def request(messages: Sequence[Any]) -> dict[str, Any]:
        return {
            "model": model,
            "max_tokens": max_tokens,
            "system": prompt,
            "messages": [{"role": "user", "content": render_transcript(messages)}],
        }

    def text(response: Any) -> str:
        blocks = field(response, "content") or []
        return "\n".join(
            str(field(b, "text")) for b in blocks if field(b, "type") == "text"
        ).strip()

    return _adapter(create, request, text)


def openai(
    client: Any, *, model: str, max_tokens: int = DEFAULT_MAX_TOKENS, prompt: str = PROMPT
) -> Summarizer:
    """A summarizer calling ``client.chat.completions.create`` (``OpenAI`` or ``AsyncOpenAI``).

    The request is the prompt as the system message, the transcript as the user message, and
    no ``tools``; the summary is the first choice's content.
    """
    chat = getattr(client, "chat", None)
    create = _method(chat, "completions", "openai")

    def request(messages: Sequence[Any]) -> dict[str, Any]:
        return {
            "model": model,
            "max_completion_tokens": max_tokens,
            "messages": [
                {"role": "system", "content": prompt},
                {"role": "user", "content": render_transcript(messages)},
            ],
        }

    def text(response: Any) -> str:
        choices = field(response, "choices") or []
        if not choices:
            return ""
        content = field(field(choices[0], "message"), "content")
        return str(content or "").strip()

    return _adapter(create, request, text)


def _method(owner: Any, attr: str, sdk: str) -> Callable[..., Any]:
    create: object = getattr(getattr(owner, attr, None), "create", None)
    if not callable(create):
        raise InputError(f"summarizers.{sdk}() needs an {sdk} SDK client, not {type(owner)!r}")
    return create


def _adapter(
    create: Callable[..., Any],
    request: Callable[[Sequence[Any]], dict[str, Any]],
    text: Callable[[Any], str],
) -> Summarizer:
    # The SDKs wrap their methods (argument checks): the coroutine is found under the wrappers.
    if inspect.iscoroutinefunction(inspect.unwrap(create)):

        async def summarize_async(messages: Sequence[Any]) -> str:
            return text(await create(**request(messages)))

        return summarize_async

    def summarize(messages: Sequence[Any]) -> str:
        return text(create(**request(messages)))

    return summarize


_PATH_RE = re.compile(
    r"(?<![\w/.-])(?:[\w.-]+/)*[\w-]+\.(?:py|md|txt|json|toml|yaml|yml|js|ts|tsx|go|rs|java|c|h|cpp|sh|cfg|ini|html|css)\b"
)
_ERROR_RE = re.compile(r"(?i)\b(?:error|exception|traceback|failed|failure)\b")


def extractive(*, max_chars: int = 4_000, line_chars: int = 200) -> Summarizer:
    """A deterministic summarizer calling no model, for tests and benchmarks.

    It fills the same sections as the model prompt from the transcript alone: the goal (the
    first user text), the files named, the lines that report errors, and the current work (the
    last assistant text), each line cut to ``line_chars`` and the whole to ``max_chars``. The
    same messages always give the same bytes.
    """
    if max_chars < 100 or line_chars < 20:
        raise InputError("extractive() needs max_chars >= 100 and line_chars >= 20")

    def summarize(messages: Sequence[Any]) -> str:
        lines = render_transcript(messages).splitlines()
        goal = next((ln for ln in lines if ln.startswith("[user]")), "")
        current = next((ln for ln in reversed(lines) if ln.startswith("[assistant]")), "")
        files = sorted({m.group(0) for ln in lines for m in _PATH_RE.finditer(ln)})
        errors = list(dict.fromkeys(ln.strip() for ln in lines if _ERROR_RE.search(ln)))
        sections = [
            ("Goal", [goal]),
            ("Files involved", files),
            ("Errors and fixes", errors[-10:]),
            ("Current work", [current]),
            ("Summarized", [f"{len(messages)} messages"]),
        ]
        out: list[str] = []
        for title, items in sections:
            out.append(f"## {title}")
            out += [f"- {_cut(i, line_chars)}" for i in items if i] or ["- (none)"]
        return _cut("\n".join(out), max_chars)

    return summarize


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
