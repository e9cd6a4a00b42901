"""Prompt-cache rules per provider and model, calibrated against what the recording shows.

:func:`rules_for` picks the :class:`~benchmarks.cache.CacheRules` a trace is replayed under: the
published minimum cacheable length and cache-read discount of its model, then two corrections
read from the trace's own recorded usage:

- a recording whose usage shows no cache read at all (self-hosted or routed models that cache
  nothing, e.g. Llama via OpenRouter in OpenHands' examples) is replayed with caching off;
- an Anthropic recording whose cache writes are mostly 1-hour entries
  (``cache_creation.ephemeral_1h_input_tokens``) is replayed with 1-hour entries, billed 2x.

Sources (checked 2026-12-03):

Anthropic, minimum cacheable prompt length per model (:data:`ANTHROPIC_MIN_TOKENS`)
    Anthropic docs, "Prompt caching" (platform.claude.com/docs/en/build-with-claude/
    prompt-caching), as quoted in anthropics/anthropic-sdk-python issue #1194 (2026): 4,096 for
    Claude Opus 4.6, Opus 4.5 and Haiku 4.5; 1,024 for Sonnet 4.6, Sonnet 4.5, Opus 4.1, Opus 4,
    Sonnet 4 and Sonnet 3.7; 2,048 for Haiku 3.5 and Haiku 3. Opus 4.7 is not in that list; a
    later copy of the same page (clawdemy.org cheatsheet, 2026) lists it at 4,096, another (a
    dev.to summary, 2026) at 2,048: 4,096 is used. Writes cost 1.25x the base input price for
    5-minute entries and 2x for 1-hour entries, reads 0.1x; the lookback is 20 content blocks.

OpenAI (:data:`OPENAI_READ_PRICE`)
    OpenAI docs, "Prompt caching" (developers.openai.com/api/docs/guides/prompt-caching, June
    2026): automatic for prompts of 1,024 tokens or more, cache hits in 128-token increments, no
    write surcharge. Cached-input price by family (OpenAI pricing page, as tabulated in the
    adk-model crate 0.6.0, src/openai/pricing.rs, March 2026; o3 and o4-mini as priced since June
    2025, $2.00 / $0.50 and $1.10 / $0.275): GPT-5 family 0.1x, GPT-4.1, o3 and o4-mini 0.25x,
    GPT-4o, o1 and o3-mini 0.5x.

Google Gemini (:data:`GEMINI_MIN_TOKENS`)
    Gemini API docs, "Context caching", implicit caching (ai.google.dev/gemini-api/docs/caching,
    last updated 2026-05-07): minimum 4,096 tokens for Gemini 3 Pro Preview and Gemini 2.5 Pro,
    1,024 for Gemini 3 Flash Preview and Gemini 2.5 Flash; cached tokens cost 10% of the input
    price for Gemini 2.5 and newer (25% for 2.0). Hits are counted in tokens, not in 128-token
    steps. Gemini models reached through an OpenAI-compatible router (mini-swe-agent via
    OpenRouter) keep Gemini's rules: the model decides, not the wire format.

Output prices (:data:`OUTPUT_PRICE`), for the summary calls compaction strategies make: a summary's
output tokens are billed at the model's output price, given here as a multiple of its base input
price (the unit of every billed figure). Published list prices per million tokens (input /
output), checked 2026-12-03:

- Anthropic, "Pricing" (platform.claude.com/docs/en/about-claude/pricing): Opus 4.5-4.7 $5 /
  $25, Sonnet 4-4.6 $3 / $15, Haiku 4.5 $1 / $5, Opus 4-4.1 $15 / $75, Haiku 3.5 $0.80 / $4:
  **5x** for every Claude model.
- OpenAI, "Pricing" (platform.openai.com/docs/pricing, as tabulated in the adk-model crate 0.6.0,
  src/openai/pricing.rs): GPT-5, GPT-5.1 and GPT-5-mini $1.25 / $10 and $0.25 / $2: **8x**;
  GPT-4.1 $2 / $8, GPT-4o $2.50 / $10, o3 $2 / $8, o4-mini $1.10 / $4.40: **4x**.
- Google, "Gemini Developer API pricing" (ai.google.dev/gemini-api/docs/pricing): Gemini 2.5 Pro
  $1.25 / $10 (8x), 2.5 Flash $0.30 / $2.50 (8.3x), Gemini 3 Pro Preview $2 / $12 (6x), Gemini 3
  Flash Preview $0.50 / $3 (6x).
- Other models (self-hosted, routed): 4x, the lowest ratio above, so a summary is never
  overcharged against a peer that makes none.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.cache import CacheRules
from benchmarks.trace import Trace

__all__ = [
    "ANTHROPIC_MIN_TOKENS",
    "GEMINI_MIN_TOKENS",
    "ONE_HOUR_TTL_S",
    "OPENAI_READ_PRICE",
    "OUTPUT_PRICE",
    "Pricing",
    "billed_write_price",
    "family_of",
    "output_price",
    "pricing_for",
    "rules_for",
]

ANTHROPIC_MIN_TOKENS: tuple[tuple[str, int], ...] = (
    ("opus-4-7", 4096),
    ("opus-4-6", 4096),
    ("opus-4-5", 4096),
    ("haiku-4-5", 4096),
    ("3-5-haiku", 2048),
    ("haiku-3-5", 2048),
    ("3-haiku", 2048),
)
"""(model-name fragment, minimum cacheable tokens); the first fragment found wins; 1,024 otherwise."""

OPENAI_READ_PRICE: tuple[tuple[str, float], ...] = (
    ("gpt-5", 0.1),
    ("gpt-4.1", 0.25),
    ("gpt-4o", 0.5),
    ("o3-mini", 0.5),
    ("o1", 0.5),
    ("o3", 0.25),
    ("o4", 0.25),
)
"""(model-name fragment, cache-read price as a multiple of the input price); 0.5 otherwise."""

GEMINI_MIN_TOKENS: tuple[tuple[str, int, float], ...] = (
    ("gemini-3-pro", 4096, 0.1),
    ("gemini-3-flash", 1024, 0.1),
    ("gemini-2.5-pro", 4096, 0.1),
    ("gemini-2.5-flash", 1024, 0.1),
    ("gemini-2.0", 4096, 0.25),
)
"""(model-name fragment, minimum tokens, read price); 4,096 tokens and 0.1x otherwise."""

OUTPUT_PRICE: tuple[tuple[str, float], ...] = (
    ("claude", 5.0),
    ("gpt-5", 8.0),
    ("gpt-4.1", 4.0),
    ("gpt-4o", 4.0),
    ("o1", 4.0),
    ("o3", 4.0),
    ("o4", 4.0),
    ("gemini-3", 6.0),
    ("gemini-2.5-flash", 2.5 / 0.30),
    ("gemini-2.5-pro", 8.0),
)
"""(model-name fragment, output price as a multiple of the base input price); the first found
wins, :data:`DEFAULT_OUTPUT_PRICE` otherwise (sources in the module docstring)."""

DEFAULT_OUTPUT_PRICE = 4.0

ONE_HOUR_TTL_S = 3600.0
ONE_HOUR_WRITE_PRICE = 2.0


@dataclass(frozen=True, slots=True)
class Pricing:
    """The cache rules of one trace and why they were chosen."""

    family: str
    """``anthropic``, ``openai`` or ``google``: whose published rules apply."""
    rules: CacheRules
    basis: str
    """A short human-readable reason, e.g. ``claude opus-4-5: min 4096`` or ``no cache read``."""


def family_of(trace: Trace) -> str:
    """Whose caching rules apply: the model's maker when the name tells, else the provider."""
    model = (trace.model or "").lower()
    if "claude" in model:
        return "anthropic"
    if "gemini" in model:
        return "google"
    if "gpt" in model or model.split("/")[-1][:2] in ("o1", "o3", "o4"):
        return "openai"
    return trace.provider


def _first(model: str, table: tuple[tuple[str, int], ...], default: int) -> int:
    return next((value for frag, value in table if frag in model), default)


def _recorded(trace: Trace) -> tuple[int, int, int, int]:
    """Requests with usage, cache reads, cache writes and 1-hour cache writes recorded."""
    used = [r.usage for r in trace.requests if r.usage is not None]
    return (
        len(used),
        sum(u.cache_read_tokens for u in used),
        sum(u.cache_write_tokens for u in used),
        sum(u.cache_write_1h_tokens for u in used),
    )


def pricing_for(trace: Trace) -> Pricing:
    """The cache rules ``trace`` is replayed under, with the reason."""
    family = family_of(trace)
    model = (trace.model or "").lower()
    used, reads, writes, one_hour = _recorded(trace)
    if used and reads == 0:
        return Pricing(family, CacheRules(enabled=False), "no cache read recorded")
    if family == "anthropic":
        minimum = _first(model, ANTHROPIC_MIN_TOKENS, 1024)
        # Claude Code marks its system prompt (CacheRules.system_breakpoint); other agents'
        # recordings say nothing of theirs: only the request's end is marked (the careful side).
        marked = trace.format == "claude-code"
        note = ", system marked" if marked else ""
        if one_hour * 2 > writes:
            rules = CacheRules(
                min_tokens=minimum,
                ttl=ONE_HOUR_TTL_S,
                write_price=ONE_HOUR_WRITE_PRICE,
                system_breakpoint=marked,
            )
            return Pricing(family, rules, f"min {minimum}, 1-hour writes recorded{note}")
        rules = CacheRules(min_tokens=minimum, system_breakpoint=marked)
        return Pricing(family, rules, f"min {minimum}{note}")
    if family == "google":
        minimum, read = next(
            ((m, r) for frag, m, r in GEMINI_MIN_TOKENS if frag in model), (4096, 0.1)
        )
        rules = CacheRules(min_tokens=minimum, step=1, read_price=read)
        return Pricing(family, rules, f"min {minimum}, read {read}x")
    read_price = next((p for frag, p in OPENAI_READ_PRICE if frag in model), 0.5)
    rules = CacheRules(min_tokens=1024, step=128, read_price=read_price)
    return Pricing(family, rules, f"min 1024 step 128, read {read_price}x")


def rules_for(trace: Trace) -> CacheRules:
    """The :class:`CacheRules` of ``trace`` (see :func:`pricing_for`)."""
    return pricing_for(trace).rules


def billed_write_price(trace: Trace, rules: CacheRules) -> float:
    """What a cache write of ``trace`` is billed at: ``rules``' write price on Anthropic's API
    (explicit writes), the base price on OpenAI's and Google's (automatic caching bills no
    write surcharge), as the cache simulation of its provider bills it."""
    return rules.write_price if trace.provider == "anthropic" else 1.0


def output_price(trace: Trace) -> float:
    """The output price of ``trace``'s model, as a multiple of its base input price."""
    model = (trace.model or "").lower()
    if family_of(trace) == "anthropic" and "claude" not in model:
        return OUTPUT_PRICE[0][1]
    return next((p for frag, p in OUTPUT_PRICE if frag in model), DEFAULT_OUTPUT_PRICE)
