"""A deterministic prompt-cache simulator, and the price of each request under it.

A request is seen as a sequence of *segments*: first the system prompt and tool definitions, then
one segment per message. Each segment carries a 128-bit xxhash of its canonical JSON bytes (orjson,
sorted keys) and its token count. Prefixes are compared by chaining those hashes, so a request
costs time in proportion to its number of segments, never to its text.

Rules (all measured at segment boundaries; a provider really matches tokens, so a prefix that
ends inside a changed message is counted only up to the last unchanged message):

Anthropic (explicit breakpoints)
    The breakpoint sits at the end of every request (and, for agents that mark their system
    prompt, :attr:`CacheRules.system_breakpoint`, at the end of the system prompt too), so a request that reaches the minimum size
    (default 1,024 tokens; per model in :mod:`benchmarks.pricing`) writes its whole prompt to the
    cache. A later request reads the longest earlier *breakpoint* prefix (the whole of some
    earlier request) that is a prefix of it, is still alive, and ends at most ``lookback``
    *content blocks* (default 20) before the request's own end, as the API looks back at most 20
    blocks from a breakpoint for an earlier cache entry (a message with a string content is one
    block; one with a list of blocks counts each). What is not read is written (1.25x the base
    price, 2x for 1-hour entries); what is read costs 0.1x. A request below the minimum is
    neither read nor written and is billed at the base price.

OpenAI (automatic; also used for Google)
    Every request leaves its prefixes in the cache. The cached part of a request is the longest
    prefix it shares with any earlier request still alive, counted only from the minimum (1,024
    tokens) and rounded down to the minimum plus a multiple of 128 tokens. Reads cost 0.1x; there
    is no write surcharge.

No caching
    ``CacheRules(enabled=False)``: nothing is read or written, every token is billed at the base
    price (a provider or deployment that recorded no cache read at all).

TTL
    An entry lives ``ttl`` seconds (default 300) after it was last written or read, when both
    times are known; an entry is expired once that much time or more has passed. Requests without
    timestamps never expire anything.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import xxhash

from benchmarks._jsonbytes import dumps
from benchmarks.trace import Provider
from budget._errors import ConfigError

__all__ = [
    "CacheResult",
    "CacheRules",
    "CacheSim",
    "Segment",
    "Segmenter",
    "segment_of",
]

Counter = Callable[[Any], int]

_ROOT = b"\x00" * 16


@dataclass(frozen=True, slots=True)
class Segment:
    """One cacheable unit of a request: its content hash and its token count."""

    digest: bytes
    """xxh3-128 of the canonical JSON bytes (16 bytes)."""
    tokens: int
    blocks: int = 1
    """Content blocks it holds, what Anthropic's lookback counts (a string content is one)."""


def _blocks(obj: Any) -> int:
    content = obj.get("content") if isinstance(obj, dict) else None
    return max(1, len(content)) if isinstance(content, list) else 1


def segment_of(obj: Any, count: Counter) -> Segment:
    """The segment of one JSON-like object (a message, or the system-and-tools header)."""
    data = dumps(obj, sort_keys=True)
    return Segment(xxhash.xxh3_128_digest(data), count(obj), _blocks(obj))


class Segmenter:
    """Turns request copies into segments, reusing the work for messages seen last time.

    Strategies return the caller's message dicts untouched when they change nothing, so a message
    object met in the previous request is not serialized again. Only the previous request's
    objects are remembered, which keeps memory bounded by one request.
    """

    def __init__(self, count: Counter) -> None:
        self._count = count
        self._memo: dict[int, tuple[Any, Segment]] = {}

    def segments(
        self,
        messages: Sequence[Any],
        *,
        system: Any = "",
        tools: Any = (),
        header_tokens: int = 0,
    ) -> list[Segment]:
        """The segments of one request: ``{system, tools}`` first, then one per message.

        ``header_tokens`` are added to the first segment: the part of the system prompt and tool
        definitions the recording omits (:attr:`benchmarks.trace.Trace.header_tokens`).
        """
        first = segment_of({"system": system, "tools": list(tools)}, self._count)
        if header_tokens:
            digest = xxhash.xxh3_128_digest(first.digest + header_tokens.to_bytes(8, "little"))
            first = Segment(digest, first.tokens + header_tokens, first.blocks)
        out = [first]
        memo: dict[int, tuple[Any, Segment]] = {}
        for message in messages:
            key = id(message)
            hit = self._memo.get(key)
            # The object is kept alongside its id so the id cannot be reused by another object.
            if hit is not None and hit[0] is message:
                seg = hit[1]
            else:
                seg = segment_of(message, self._count)
            memo[key] = (message, seg)
            out.append(seg)
        self._memo = memo
        return out


@dataclass(frozen=True, slots=True)
class CacheRules:
    """The cache and price parameters; defaults are the providers' published ones."""

    ttl: float | None = 300.0
    """Seconds an entry lives after its last write or read; None: entries never expire."""
    min_tokens: int = 1024
    """Smallest cacheable prefix (Anthropic: smallest request written or read)."""
    lookback: int | None = 20
    """Anthropic: how many content blocks before the request's end an earlier breakpoint may sit."""
    step: int = 128
    """OpenAI: cached tokens above the minimum are counted in steps of this size."""
    write_price: float = 1.25
    """Anthropic cache write, as a multiple of the base input price."""
    read_price: float = 0.1
    """Cache read, as a multiple of the base input price."""
    enabled: bool = True
    """False: the provider caches nothing (every token at the base price)."""
    system_breakpoint: bool = False
    """Anthropic: every request also marks the end of its system prompt, so the tools and system
    (the first segment) have an entry of their own, read whenever the conversation's entry is not
    (a prefix changed in the messages re-writes the messages only). Claude Code does: a request
    whose messages were re-rendered reads "the system+tools floor" and writes the conversation
    (anthropics/claude-code#91514, #96101), and marks the system and the last message
    (netease-lcap/wave-agent#1262 copies "Claude Code's last-message-marker approach")."""

    def __post_init__(self) -> None:
        if self.ttl is not None and self.ttl <= 0:
            raise ConfigError(f"CacheRules.ttl must be positive or None, got {self.ttl}")
        if self.min_tokens < 0:
            raise ConfigError(f"CacheRules.min_tokens must be >= 0, got {self.min_tokens}")
        if self.lookback is not None and self.lookback < 0:
            raise ConfigError(f"CacheRules.lookback must be >= 0 or None, got {self.lookback}")
        if self.step < 1:
            raise ConfigError(f"CacheRules.step must be >= 1, got {self.step}")
        if self.write_price < 0 or self.read_price < 0:
            raise ConfigError(
                f"CacheRules prices must be >= 0, got write {self.write_price}, "
                f"read {self.read_price}"
            )


@dataclass(frozen=True, slots=True)
class CacheResult:
    """How one request's prompt tokens were billed."""

    input_tokens: int
    """All prompt tokens of the request."""
    cached_tokens: int
    """Read from the cache (0.1x)."""
    written_tokens: int
    """Written to the cache (Anthropic: 1.25x; always 0 for OpenAI)."""
    uncached_tokens: int
    """Billed at the base price."""
    billed_tokens: float
    """Base-price equivalent: uncached + write_price*written + read_price*cached."""
    prefix_break: bool
    """This request does not start with the whole previous request."""


@dataclass(slots=True)
class _Entry:
    tokens: int
    touched: float | None


class CacheSim:
    """Simulates one provider's prompt cache over one replay (one trace under one strategy)."""

    def __init__(self, provider: Provider, rules: CacheRules | None = None) -> None:
        if provider not in ("anthropic", "openai", "google"):
            raise ConfigError(f"CacheSim: unknown provider {provider!r}")
        self.provider: Provider = provider
        self.rules = rules if rules is not None else CacheRules()
        self._entries: dict[bytes, _Entry] = {}
        self._prev: tuple[int, bytes] | None = None

    def _alive(self, entry: _Entry, now: float | None) -> bool:
        ttl = self.rules.ttl
        if ttl is None or now is None or entry.touched is None:
            return True
        return now - entry.touched < ttl

    def feed(
        self, segments: Sequence[Segment], timestamp: float | None = None, *, side: bool = False
    ) -> CacheResult:
        """Account one request (its segments, in order) sent at ``timestamp``.

        ``side``: a call beside the conversation (a summary request): priced and cached like any
        request, but the conversation's next request is still compared with the last request
        that was not a side call for ``prefix_break``.
        """
        # chain[k] identifies the prefix of the first k segments; cum[k] is its token count.
        chain = [_ROOT]
        cum = [0]
        for seg in segments:
            chain.append(xxhash.xxh3_128_digest(chain[-1] + seg.digest))
            cum.append(cum[-1] + seg.tokens)
        n = len(segments)
        total = cum[n]

        prefix_break = False
        if self._prev is not None and not side:
            prev_n, prev_digest = self._prev
            prefix_break = prev_n > n or chain[prev_n] != prev_digest
        if not side:
            self._prev = (n, chain[n])

        if not self.rules.enabled:
            cached, written = 0, 0
        elif self.provider == "anthropic":
            blocks = [0]
            for seg in segments:
                blocks.append(blocks[-1] + seg.blocks)
            cached, written = self._anthropic(chain, cum, blocks, timestamp)
        else:
            cached, written = self._openai(chain, cum, timestamp)
        uncached = total - cached - written
        rules = self.rules
        billed = uncached + rules.write_price * written + rules.read_price * cached
        return CacheResult(total, cached, written, uncached, billed, prefix_break)

    def _anthropic(
        self, chain: list[bytes], cum: list[int], blocks: list[int], now: float | None
    ) -> tuple[int, int]:
        n = len(chain) - 1
        total = cum[n]
        if total < self.rules.min_tokens or total == 0:
            return 0, 0
        lookback = self.rules.lookback
        cached = 0
        for k in range(n, 0, -1):
            # blocks[n] - blocks[k]: content blocks between an entry ending at k and this end.
            if lookback is not None and blocks[n] - blocks[k] > lookback:
                break
            entry = self._entries.get(chain[k])
            if entry is not None and self._alive(entry, now):
                entry.touched = now if now is not None else entry.touched
                cached = cum[k]
                break
        if self.rules.system_breakpoint and n > 1 and cum[1] >= self.rules.min_tokens:
            # The system's own breakpoint: its entry is read (refreshed) or written by every
            # request, and it is what is read when no later entry is found.
            header = self._entries.get(chain[1])
            if header is not None and self._alive(header, now):
                header.touched = now if now is not None else header.touched
                cached = max(cached, cum[1])
            else:
                self._entries[chain[1]] = _Entry(cum[1], now)
        self._entries[chain[n]] = _Entry(total, now)
        return cached, total - cached

    def _openai(self, chain: list[bytes], cum: list[int], now: float | None) -> tuple[int, int]:
        n = len(chain) - 1
        common = 0
        for k in range(n, 0, -1):
            entry = self._entries.get(chain[k])
            if entry is not None and self._alive(entry, now):
                common = cum[k]
                break
        for k in range(1, n + 1):
            entry = self._entries.get(chain[k])
            if entry is None:
                self._entries[chain[k]] = _Entry(cum[k], now)
            elif now is not None:
                entry.touched = now
        rules = self.rules
        if common < rules.min_tokens or common == 0:
            return 0, 0
        return rules.min_tokens + (common - rules.min_tokens) // rules.step * rules.step, 0
