"""A hindsight bound: the least any result-dropping strategy could bill on a trace.

The bound is billed as if every tool result toolbudget may trim vanished (its content emptied)
at no cache cost, from the request it may be trimmed at (:func:`benchmarks.turns.trimmable`:
outside the protected last rounds, or from before the user's second-to-last turn): the requests
are as small as dropping old output can make them, and dropping never breaks the cache, so each
request reads from the cache all of the previous request that is still there and writes only
what was appended since. Until then (the protected last :data:`PROTECT_ROUNDS` rounds, the
user's last :data:`PROTECT_TURNS` turns: toolbudget's defaults) a result is kept, cut to its
first ``preview_chars`` characters (toolbudget's default, 2,000) when it is longer than that: the
least any envelope shows. A policy may spill any fresh result longer than its preview at first
sight (``result_cap`` is a ceiling, not the only size that may be spilled: issue 30; the oracle of
:mod:`benchmarks.oracle` does), so the bound is below what toolbudget can reach on every trace.
It follows the rules of the replay: a request whose recorded time comes ``ttl`` seconds or more
after the previous one reads nothing (the cache expired), reads cost ``read_price``, what is
written costs ``write_price`` on Anthropic and the base price elsewhere, a request under the
minimum cacheable size costs the lesser of the base price and its cached price (and is read by
the next one all the same). It ignores read-backs, so no strategy keeping those rounds can bill
less.

``share_of_saving = (1 - ours) / (1 - bound)``, both as ratios to ``none`` on the same traces:
the part of the achievable saving a strategy gets.

The cache rules are the trace's own (:func:`benchmarks.pricing.rules_for`: none where the recording
shows no cache read), and the header includes what the recording omits
(:attr:`benchmarks.trace.Trace.header_tokens`), as in the replay.

Tokens: the request's header and messages are counted with the replay's counter; a vanished
result saves the tokens of its block minus those of the same block with empty content.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.cache import CacheRules, Segmenter
from benchmarks.pricing import billed_write_price, rules_for
from benchmarks.strategies._common import result_text, tool_use_ids
from benchmarks.trace import Trace
from benchmarks.turns import round_starts, trimmable
from budget import BudgetConfig

__all__ = ["PROTECT_ROUNDS", "PROTECT_TURNS", "bound_billed", "share_of_saving"]

# The declared defaults, not ``BudgetConfig()``: that reads TOOLBUDGET_* variables, and a module
# must not read settings (or fail on a bad one) when it is imported. A run passes toolbudget's
# effective settings (benchmarks.settings).
_FIELDS = BudgetConfig.model_fields
PROTECT_ROUNDS: int = _FIELDS["protect_rounds"].default
"""Rounds whose results the bound keeps: toolbudget's default ``protect_rounds``."""
PROTECT_TURNS: int | None = _FIELDS["protect_turns"].default
"""The user's turns before whose second-to-last (by default) a result may vanish too."""
PREVIEW_CHARS: int = _FIELDS["preview_chars"].default
"""A kept result longer than this many characters counts as its first ``PREVIEW_CHARS``."""


def _round_of(trace: Trace) -> dict[str, int]:
    """The round of each call id: its assistant message's place among the rounds, counted as
    the rule of what may be trimmed counts them (:func:`benchmarks.turns.round_starts`)."""
    return {
        call_id: k
        for k, j in enumerate(round_starts(trace))
        for call_id in tool_use_ids(trace.messages[j]["content"])
    }


def bound_billed(
    trace: Trace,
    count: Callable[[Any], int],
    *,
    rules: CacheRules | None = None,
    protect_rounds: int = PROTECT_ROUNDS,
    protect_turns: int | None = PROTECT_TURNS,
    preview_chars: int = PREVIEW_CHARS,
    tools: Any = (),
) -> float:
    """The bound's billed tokens (base-price equivalents) on ``trace``."""
    rules = rules if rules is not None else rules_for(trace)
    write = billed_write_price(trace, rules)
    round_of = _round_of(trace)
    upto = trimmable(trace, [r.n_messages for r in trace.requests], protect_rounds, protect_turns)
    header = (
        Segmenter(count)
        .segments([], system=trace.system, tools=tools, header_tokens=trace.header_tokens)[0]
        .tokens
    )
    msg_tokens = [count(m) for m in trace.messages]
    # (message index, round, tokens saved when the result vanishes, tokens saved by the cap).
    savings: list[tuple[int, int, int, int]] = []
    for j, message in enumerate(trace.messages):
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                rnd = round_of.get(str(block.get("tool_use_id", "")), -1)
                if rnd < 0:
                    continue
                full = count(block)
                saved = max(0, full - count({**block, "content": ""}))
                text = result_text(block.get("content"))
                capped = 0
                if len(text) > preview_chars:
                    capped = max(0, full - count({**block, "content": text[:preview_chars]}))
                savings.append((j, rnd, saved, min(capped, saved)))
    billed = 0.0
    prev_size: int | None = None
    prev_time: float | None = None
    vanished: set[int] = set()
    seen: set[int] = set()
    """Results already sent (a result vanishing before it was ever sent saves nothing cached)."""
    for i, request in enumerate(trace.requests):
        n = request.n_messages
        size = header + sum(msg_tokens[:n])
        newly = 0
        for k, (j, rnd, saved, capped) in enumerate(savings):
            if j >= n:
                break
            if rnd <= upto[i]:
                size -= saved
                if k not in vanished:
                    vanished.add(k)
                    newly += saved - capped if k in seen else 0
            else:
                size -= capped
            seen.add(k)
        expired = (
            rules.ttl is not None
            and prev_time is not None
            and request.timestamp is not None
            and request.timestamp - prev_time >= rules.ttl
        )
        cached = (
            0
            if prev_size is None or expired or not rules.enabled
            else max(0, min(size, prev_size - newly))
        )
        cost = cached * rules.read_price + (size - cached) * write
        # Under the provider's minimum nothing is written or read, every token at the base price,
        # as the replay bills it; a strategy keeping more would be cached: the lesser of the two.
        # (The next request may read it all the same: the bound errs low.)
        billed += min(cost, size) if rules.enabled and size < rules.min_tokens else cost
        prev_size = size
        prev_time = request.timestamp if request.timestamp is not None else prev_time
    return billed


def share_of_saving(ours: float, bound: float) -> float | None:
    """``(1 - ours) / (1 - bound)``: the part of the achievable saving reached (None if none)."""
    if bound >= 1.0:
        return None
    return (1.0 - ours) / (1.0 - bound)
