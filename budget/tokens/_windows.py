"""Context windows of known models, and how a session's window is resolved.

:data:`MODEL_WINDOWS` is plain data: a model-name prefix and the window in tokens (input and
output share it). Names are matched case-insensitively by the longest table entry found in the
name at a word boundary, so provider prefixes (``openrouter/``, ``anthropic/``,
``us.anthropic.``, ``openai/openrouter-``), dated snapshots (``-20250929``, ``@20250929``,
``-v1:0``) and tier suffixes (``-preview``, ``-fast``) do not matter. A ``[1m]`` suffix (Claude
Code's way of asking for the 1M-token beta) means 1,000,000.

Sources were checked on 2026-12-02 against the providers' model pages and gateway catalogs
(platform.claude.com models pages, OpenAI model pages as mirrored by Vercel AI Gateway and
OpenRouter, Google Cloud model cards, Hugging Face model cards). When a family's pages disagree,
the smaller figure is used: too small a window only trims earlier, too large one overflows.
"""

from __future__ import annotations

import re
from collections.abc import Callable, MutableMapping
from typing import Final

from budget._errors import ConfigError

__all__ = ["DEFAULT_WINDOW", "MODEL_WINDOWS", "resolve_window", "table_window"]

DEFAULT_WINDOW: Final = 128_000
"""The window assumed for a model nobody knows: the smallest common window of current models."""

_1M: Final = 1_000_000

MODEL_WINDOWS: Final[tuple[tuple[str, int], ...]] = (
    # --- Anthropic (platform.claude.com "Models overview" and per-model pages, 2026-12) ---
    # Claude 3.x, 4, 4.1, 4.5: 200K; Sonnet 4 and 4.5 reach 1M only with the context-1m beta
    # (the "[1m]" suffix). Opus 4.6, Sonnet 4.6, Opus 4.7 and 4.8: 1M natively. All 5.x models
    # (Opus 5/5.5, Sonnet 5/5.5, Haiku 5.5, Fable 5.x, Mythos 5.x): 1M. Haiku 4.5: 200K.
    ("claude-3", 200_000),
    ("claude-3-5", 200_000),
    ("claude-3-7", 200_000),
    ("claude-2", 100_000),
    ("claude-sonnet-4", 200_000),
    ("claude-sonnet-4-5", 200_000),
    ("claude-sonnet-4-6", _1M),
    ("claude-opus-4", 200_000),
    ("claude-opus-4-1", 200_000),
    ("claude-opus-4-5", 200_000),
    ("claude-opus-4-6", _1M),
    ("claude-opus-4-7", _1M),
    ("claude-opus-4-8", _1M),
    ("claude-haiku-4", 200_000),
    ("claude-haiku-4-5", 200_000),
    ("claude-opus-5", _1M),
    ("claude-sonnet-5", _1M),
    ("claude-haiku-5", _1M),
    ("claude-fable", _1M),
    ("claude-mythos", _1M),
    ("claude", 200_000),  # an unlisted Claude: the long-standing floor of the family
    # --- OpenAI (OpenAI model pages via Vercel AI Gateway / OpenRouter catalogs, 2026-12) ---
    # gpt-4o: 128K; gpt-4.1 family: 1,047,576; gpt-5, 5.1, 5.2 (and codex variants): 400K;
    # gpt-5.4: 1,050,000; gpt-5.5: 1M; gpt-5.6 Sol/Terra/Luna: 1,050,000; o1/o3/o4-mini: 200K.
    ("gpt-3.5-turbo", 16_385),
    ("gpt-4", 8_192),
    ("gpt-4-turbo", 128_000),
    ("gpt-4o", 128_000),
    ("chatgpt-4o", 128_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4.5", 128_000),
    ("gpt-5", 400_000),
    ("gpt-5.4", 1_050_000),
    ("gpt-5.5", _1M),
    ("gpt-5.6", 1_050_000),
    ("gpt-oss", 131_072),
    ("o1", 200_000),
    ("o1-mini", 128_000),
    ("o3", 200_000),
    ("o3-mini", 200_000),
    ("o4-mini", 200_000),
    ("codex-mini", 200_000),
    # --- Google (Google Cloud Gemini model cards, 2026-12): 2.x, 3.x: 1,048,576 input ---
    ("gemini-1.5", _1M),
    ("gemini-2", 1_048_576),
    ("gemini-2.5", 1_048_576),
    ("gemini-3", 1_048_576),
    ("gemini-3-pro-image", 65_536),  # image models take far shorter prompts
    ("gemma-3", 131_072),
    # --- DeepSeek (api-docs.deepseek.com pricing page; Azure Foundry catalog, 2026-12) ---
    # deepseek-chat/-reasoner (V3.x) 128K on the first-party API; V4: 1M.
    ("deepseek", 128_000),
    ("deepseek-chat", 128_000),
    ("deepseek-reasoner", 128_000),
    ("deepseek-v3", 128_000),
    ("deepseek-r1", 128_000),
    ("deepseek-v4", _1M),
    # --- Qwen (Hugging Face model cards, Alibaba via Vercel AI Gateway, 2026-12) ---
    # Qwen2.5: 32K native (128K with YaRN); Qwen3: 32K native in small sizes, 2507 and coder
    # releases 262,144; qwen3-max 262,144.
    ("qwen2.5", 32_768),
    ("qwen3", 32_768),
    ("qwen3-coder", 262_144),
    ("qwen3-max", 262_144),
    ("qwen3-next", 262_144),
    ("qwq", 131_072),
    # --- Meta Llama (Meta model cards; NVIDIA NIM catalog, 2026-12) ---
    # Llama 3.1-3.3: 128K; Llama 4 Maverick 1M, Scout 10M (providers often serve less).
    ("llama-3", 8_192),
    ("llama-3.1", 131_072),
    ("llama-3.2", 131_072),
    ("llama-3.3", 131_072),
    ("llama-4", _1M),
    ("llama-4-maverick", _1M),
    ("llama-4-scout", 10_000_000),
    # --- Mistral (Mistral model docs via LlamaIndex catalog and Ollama cards, 2026-12) ---
    # Mistral Large 2: 128K (Large 3: 256K); Codestral 256K; Devstral 128K (Devstral 2: 256K).
    ("mistral", 32_000),
    ("mistral-large", 131_072),
    ("mistral-medium", 131_072),
    ("mistral-small", 131_072),
    ("codestral", 256_000),
    ("devstral", 131_072),
    ("devstral-2", 256_000),
    ("magistral", 40_000),
)

_TABLE: Final = dict(MODEL_WINDOWS)
# Longest first, so the first entry found in a name is the most specific.
_BY_LENGTH: Final = sorted(_TABLE, key=len, reverse=True)
_ONE_MILLION_SUFFIX: Final = re.compile(r"\[1m\]\s*$")
_BOUNDARY_BEFORE: Final = frozenset("/.:_-@ ")


def _found_at_boundary(name: str, key: str) -> bool:
    """Whether ``key`` occurs in ``name`` starting a word and not followed by a letter."""
    start = name.find(key)
    while start != -1:
        end = start + len(key)
        before_ok = start == 0 or name[start - 1] in _BOUNDARY_BEFORE
        after_ok = end == len(name) or not name[end].isalpha()
        if before_ok and after_ok:
            return True
        start = name.find(key, start + 1)
    return False


def table_window(model: str | None) -> int | None:
    """The window the built-in table gives ``model``, or ``None`` if no entry matches."""
    if not model:
        return None
    name = model.strip().lower()
    if _ONE_MILLION_SUFFIX.search(name):
        return _1M
    for key in _BY_LENGTH:
        if _found_at_boundary(name, key):
            return _TABLE[key]
    return None


def _cache_key(model: str | None) -> str:
    return f"window:{model or ''}"


def resolve_window(
    model: str | None,
    *,
    explicit: int | None = None,
    discover: Callable[[], int | None] | None = None,
    cache: MutableMapping[str, int] | None = None,
) -> int:
    """The context window to budget against, in tokens.

    In order: the ``explicit`` setting; the value the provider-discovery callable reported for
    this model (its answer is stored in ``cache`` under ``"window:<model>"``, which the session
    persists, so it is asked once per model; a failed or empty answer is stored as 0 and not
    asked again); the built-in :data:`MODEL_WINDOWS` table; else :data:`DEFAULT_WINDOW`.
    ``discover`` raising is treated as no answer: a window lookup must not fail a request.
    """
    if explicit is not None:
        if isinstance(explicit, bool) or not isinstance(explicit, int) or explicit <= 0:
            raise ConfigError(f"window must be a positive number of tokens, got {explicit!r}")
        return explicit
    key = _cache_key(model)
    cached = cache.get(key) if cache is not None else None
    if cached is not None and cached > 0:
        return cached
    if discover is not None and cached is None:
        try:
            answer = discover()
        except Exception:  # any provider failure means "unknown", never a failed request
            answer = None
        valid = isinstance(answer, int) and not isinstance(answer, bool) and answer > 0
        if cache is not None:
            cache[key] = answer if valid and answer is not None else 0
        if valid and answer is not None:
            return answer
    known = table_window(model)
    return known if known is not None else DEFAULT_WINDOW
