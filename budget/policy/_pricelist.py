"""The providers' published prompt-cache prices, by model: what the cost model prices a cache write
and a cache read at when the caller sets neither (``cache_write_price``, ``cache_read_price``).

A token kept in the prompt costs the read price on every later request, so the read price sets
how fast hiding it pays back: GPT-4o's cached input costs five times Claude's (0.5x against 0.1x
of the base price). A session told its model (``BudgetConfig.model``; the proxy tells it the
request's) prices with that model's list; one that is not is priced with Anthropic's (writes
1.25x, reads 0.1x), the careful side: a read price taken too low only leaves a saving unclaimed,
one taken too high would trim what does not pay back. A caller's own prices win; a caller's
write price sets the 1-hour one in the list's proportion (Anthropic's 1.25 : 2).

Sources (checked 2026-12-07; the benchmark's cache rules cite the same, ``benchmarks/pricing.py``):

Anthropic
    Anthropic docs, "Prompt caching" (platform.claude.com/docs/en/build-with-claude/
    prompt-caching): 5-minute cache writes 1.25x the base input price, 1-hour writes 2x, reads
    0.1x, for every Claude model; explicit breakpoints.
OpenAI
    OpenAI docs, "Prompt caching" (developers.openai.com/api/docs/guides/prompt-caching, June
    2026): automatic, no write surcharge. Cached input by family (OpenAI pricing page, as
    tabulated in the adk-model crate 0.6.0, src/openai/pricing.rs, March 2026; o3 and o4-mini
    as priced since June 2025: $2.00 / $0.50 and $1.10 / $0.275 a million input tokens): GPT-5
    family 0.1x, GPT-4.1, o3 and o4-mini 0.25x, GPT-4o, o1 and o3-mini 0.5x. Another OpenAI model
    caches automatically too, at a price not listed here: 0.1x, the careful side.
Google
    Gemini API docs, "Context caching", implicit caching (ai.google.dev/gemini-api/docs/caching,
    2026-05-07): automatic, no write surcharge; cached tokens 10% of the input price for Gemini
    2.5 and newer, 25% for 2.0.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["ANTHROPIC_PRICES", "PriceList", "price_list"]


@dataclass(frozen=True, slots=True)
class PriceList:
    """One model's prompt-cache prices, as multiples of its base input price."""

    write: float
    """A token written to the cache (1.0 where writes cost no surcharge)."""
    read: float
    """A token read from the cache."""
    write_long: float
    """A token written to an entry that lives an hour (Anthropic: 2x; ``write`` elsewhere)."""
    explicit: bool
    """Explicit breakpoints (Anthropic), not automatic prefix caching (OpenAI, Google)."""
    source: str
    """Whose list, and why (the family and the fragment of the model name that matched)."""
    known: bool = True
    """Whether the model's own price was found (False: its family's careful default, or
    Anthropic's for a model whose maker the name does not tell)."""

    def bill(self, uncached: int, read: int, written: int, written_1h: int = 0) -> float:
        """A usage's billed tokens at these prices (``written_1h`` of ``written`` for an hour)."""
        return (
            uncached
            + read * self.read
            + (written - written_1h) * self.write
            + (written_1h * self.write_long)
        )


ANTHROPIC_PRICES = PriceList(1.25, 0.1, 2.0, explicit=True, source="anthropic")
"""Anthropic's list: every Claude model (a model not recognised is priced alike, ``known`` False)."""

UNKNOWN = replace(ANTHROPIC_PRICES, source="not known: anthropic", known=False)
"""A model whose maker the name does not tell: Anthropic's prices, the careful side."""

OPENAI_READ: tuple[tuple[str, float], ...] = (
    ("gpt-5", 0.1),
    ("gpt-4.1", 0.25),
    ("gpt-4o", 0.5),
)
"""(model-name fragment, cached-input price); the first fragment found wins."""

OPENAI_REASONING: tuple[tuple[str, float], ...] = (
    ("o3-mini", 0.5),
    ("o1", 0.5),
    ("o3", 0.25),
    ("o4", 0.25),
)
"""(start of the model name after any router prefix, cached-input price); the first wins."""

GEMINI_READ: tuple[tuple[str, float], ...] = (
    ("gemini-2.0", 0.25),
    ("gemini-1.5", 0.25),
    ("gemini", 0.1),
)
"""(model-name fragment, cached-input price); the first found wins (2.5 and newer: 0.1x)."""


def price_list(
    model: str | None,
    *,
    write: float | None = None,
    read: float | None = None,
    breakpoints: bool | None = None,
    wire: bool = True,
) -> PriceList:
    """The prompt-cache prices of ``model`` (a name as its API or a router spells it, e.g.
    ``claude-sonnet-4-5``, ``openai/gpt-4o-mini``, ``google/gemini-2.5-pro``): its maker's list
    when the name tells which, Anthropic's (:data:`ANTHROPIC_PRICES`) otherwise; ``write`` and
    ``read``, where given, are the caller's own prices and replace the list's (the 1-hour write
    then in the list's proportion to its write).

    The caching style: ``breakpoints`` where the caller tells it (explicit breakpoints, or
    automatic prefix caching: False), else the maker's; where the name does not tell the maker,
    the style of the API the messages are shaped for (``wire``: ``Format.breakpoints``), since
    OpenAI's message formats carry no breakpoint to cache at. An automatic cache bills no write
    surcharge (OpenAI and Google), explicit breakpoints Anthropic's."""
    listed = _listed(model)
    style = breakpoints if breakpoints is not None else (wire if listed is UNKNOWN else None)
    if style is not None and style != listed.explicit:
        listed = _styled(listed, explicit=style)
    if write is None and read is None:
        return listed
    return PriceList(
        listed.write if write is None else write,
        listed.read if read is None else read,
        listed.write_long if write is None else write * listed.write_long / listed.write,
        explicit=listed.explicit,
        source=f"{listed.source}, the caller's prices",
        known=listed.known,
    )


def _styled(listed: PriceList, *, explicit: bool) -> PriceList:
    """``listed`` with the other caching style, and its write prices."""
    if explicit:
        w, long, style = ANTHROPIC_PRICES.write, ANTHROPIC_PRICES.write_long, "explicit breakpoints"
    else:
        w, long, style = 1.0, 1.0, "automatic caching"
    source = f"{listed.source}, {style}"
    return replace(listed, write=w, write_long=long, explicit=explicit, source=source)


def _listed(model: str | None) -> PriceList:
    name = (model or "").lower()
    if "claude" in name:
        return ANTHROPIC_PRICES
    if "gemini" in name:
        frag, read = next((f, r) for f, r in GEMINI_READ if f in name)
        return PriceList(1.0, read, 1.0, explicit=False, source=f"google {frag}")
    for frag, read in OPENAI_READ:
        if frag in name:
            return PriceList(1.0, read, 1.0, explicit=False, source=f"openai {frag}")
    last = name.rsplit("/", 1)[-1]
    for start, read in OPENAI_REASONING:
        if last.startswith(start):
            return PriceList(1.0, read, 1.0, explicit=False, source=f"openai {start}")
    if "gpt" in name:
        return PriceList(1.0, 0.1, 1.0, explicit=False, source="openai, not listed", known=False)
    return UNKNOWN
