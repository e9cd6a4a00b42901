"""The normalized trace model every importer produces and every strategy replays.

Messages are canonical Anthropic Messages dicts (``role`` user/assistant; ``content`` a list of
``text``, ``tool_use``, ``tool_result`` and ``image`` blocks), whatever the recording's format, so a
strategy handles one shape. The provider decides which prompt-cache rules the replay simulates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import xxhash

from benchmarks._jsonbytes import dumps

Provider = Literal["anthropic", "openai", "google"]


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage the provider recorded for one request (its prompt and its answer)."""

    input_tokens: int
    """Prompt tokens billed at the base price (not read from, not written to the cache)."""
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    cache_write_1h_tokens: int = 0
    """Of ``cache_write_tokens``, those written with a 1-hour TTL (Anthropic
    ``cache_creation.ephemeral_1h_input_tokens``), billed 2x instead of 1.25x."""

    @property
    def prompt_tokens(self) -> int:
        """All prompt tokens, however they were billed."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def as_anthropic(self) -> dict[str, Any]:
        """This usage in the Anthropic response shape ``Budget.prepare`` reads (input excludes
        the cache; the cache fields present, so read as such; the writes split by lifetime in
        ``cache_creation`` when some were made for an hour)."""
        shape: dict[str, Any] = {
            "input_tokens": self.input_tokens,
            "cache_read_input_tokens": self.cache_read_tokens,
            "cache_creation_input_tokens": self.cache_write_tokens,
            "output_tokens": self.output_tokens,
        }
        if self.cache_write_1h_tokens:
            long = min(self.cache_write_1h_tokens, self.cache_write_tokens)
            shape["cache_creation"] = {
                "ephemeral_5m_input_tokens": self.cache_write_tokens - long,
                "ephemeral_1h_input_tokens": long,
            }
        return shape


@dataclass(frozen=True, slots=True)
class Request:
    """One model request: the first ``n_messages`` of the trace, and what was recorded of it."""

    n_messages: int
    usage: Usage | None = None
    timestamp: float | None = None
    """Seconds since the epoch, when the recording has them."""


@dataclass(frozen=True, slots=True)
class Trace:
    """One recorded agent session, normalized."""

    name: str
    """Short unique label, e.g. ``claude-code/37f83ec9``."""
    path: str
    """The file it came from, relative to the traces directory."""
    format: str
    """Importer name: claude-code, codex-cli, gemini-cli, mini-swe-agent, openhands, anthropic, openai-chat."""
    provider: Provider
    messages: tuple[dict[str, Any], ...]
    requests: tuple[Request, ...]
    system: str = ""
    model: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    header_tokens: int = 0
    """Tokens of the system prompt and tool definitions the agent sent but the recording omits,
    reconstructed from the recorded usage (:mod:`benchmarks.header`); every strategy's requests
    carry them, unchanged, in their first segment."""

    def request_messages(self, i: int) -> list[dict[str, Any]]:
        """The messages the model saw on request ``i`` (a new list sharing the message dicts)."""
        return list(self.messages[: self.requests[i].n_messages])


def digest(messages: Sequence[dict[str, Any]]) -> bytes:
    """A hash of ``messages``' JSON, to see that a replay left them as they were.

    Any depth an importer accepts (:func:`benchmarks._jsonbytes.dumps`); past the interpreter's
    recursion limit it raises ``RecursionError``, which the importers' check
    (:mod:`benchmarks.importers._check`) turns into the file's skip reason.
    """
    return xxhash.xxh3_128_digest(dumps(list(messages)))
