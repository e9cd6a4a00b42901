"""A deterministic agent conversation that exercises every pass, and how its copies are compared.

The crash soak (``benchmarks/soak.py``) replays it under SIGKILLs; the reliability tests replay
it under faults, damage, hostile permissions and concurrent processes. One conversation of
``rounds`` rounds holds parallel calls, spills by cap and by aggregate, errors, images, empty
outputs, a lone surrogate, the read-back tool, and cold-cache pauses that run staleness batches.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any, Final

import xxhash

from budget import BudgetConfig

__all__ = ["CONFIG", "READ_TOOL", "Message", "Step", "conversation", "digest", "result_texts"]

CONFIG: Final = BudgetConfig(
    result_cap=4_000,
    preview_chars=500,
    group_budget=10_000,
    protect_rounds=3,
    stale_floor=800,
    stub_chars=200,
    min_reclaim_tokens=1_500,
    window=200_000,
)
"""Small caps so that a short conversation exercises every pass; fsync on, as by default."""

READ_TOOL: Final = "toolbudget_read"

Message = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Step:
    """One request of the replay: the history length sent, the clock, the usage passed."""

    length: int
    now: float
    usage: dict[str, int] | None
    read_back: bool
    """Whether the agent reads back the first spilled output of this request's report."""


# -- the conversation -----------------------------------------------------------------------------

_WORDS: Final = (
    "error",
    "warning",
    "passed",
    "failed",
    "def",
    "return",
    "import",
    "assert",
    "构建",
    "测试",
    "🎉",
    "{",
    "}",
    "0x1f",
    "path/to/file.py",
)


def _text(rng: random.Random, chars: int, tag: str) -> str:
    lines: list[str] = []
    size = n = 0
    while size < chars:
        words = rng.choices(_WORDS, k=64)
        for width in rng.choices(range(2, 15), k=8):
            line = f"{tag} {n:05d}: {' '.join(words[:width])}\n"
            words = words[width:] or rng.choices(_WORDS, k=64)
            lines.append(line)
            size += len(line)
            n += 1
    return "".join(lines)[:chars]


def _size(rng: random.Random) -> int:
    roll = rng.random()
    if roll < 0.05:
        return 0
    if roll < 0.45:
        return rng.randint(10, 700)
    if roll < 0.75:
        return rng.randint(800, 4_000)
    if roll < 0.95:
        return rng.randint(4_001, 30_000)
    return rng.randint(30_000, 120_000)


def conversation(seed: int, rounds: int) -> tuple[list[Message], list[Step]]:
    """A deterministic conversation and its requests (one per round, after its results)."""
    rng = random.Random(seed)
    msgs: list[Message] = [{"role": "user", "content": "Fix the failing build, please."}]
    steps: list[Step] = []
    now = 1_000.0
    last_ref_round = -10
    cold = {int(rounds * share) for share in (0.35, 0.68, 0.9)}
    for r in range(rounds):
        k = rng.choice((1, 1, 2, 3))
        calls = [
            (f"toolu_{r:02d}_{j}", rng.choice(("bash", "read", "grep", "web"))) for j in range(k)
        ]
        if r - last_ref_round > 7 and r > 3:
            calls[0] = (calls[0][0], READ_TOOL)  # a read-back call: exempt, pages instead
            last_ref_round = r
        msgs.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Round {r}: looking further."},
                    *[
                        {"type": "tool_use", "id": cid, "name": tool, "input": {"n": r}}
                        for cid, tool in calls
                    ],
                ],
            }
        )
        blocks: list[dict[str, Any]] = []
        for j, (cid, tool) in enumerate(calls):
            text = _text(rng, _size(rng), f"{tool}{r}.{j}")
            if r == 5 and j == 0:
                text += "a lone surrogate \ud800 survives\n" * 200
            content: Any = text
            if r == 9 and j == 0:
                content = [
                    {"type": "text", "text": text or "screenshot"},
                    {
                        "type": "image",
                        "source": {
                            "type": "base64",
                            "media_type": "image/png",
                            "data": "iVBORw0KGgo=",
                        },
                    },
                ]
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": cid, "content": content}
            if rng.random() < 0.1:
                block["is_error"] = True
            blocks.append(block)
        msgs.append({"role": "user", "content": blocks})
        # Mostly warm; now and then a pause longer than the cache TTL (a cold-cache batch).
        now += 400.0 if r in cold else rng.choice((3.0, 8.0, 20.0))
        usage = None
        if r % 3:
            # A cached session's usage (Anthropic shape: most of the prompt read from the cache,
            # the new part written), so the cost model prices batches for a cache.
            usage = {
                "input_tokens": 100,
                "cache_read_input_tokens": 900 * r + 300,
                "cache_creation_input_tokens": 100,
                "output_tokens": 60 + r,
            }
        steps.append(Step(len(msgs), now, usage, read_back=r % 4 == 1))
    return msgs, steps


# -- digests ------------------------------------------------------------------------------------------


def digest(messages: list[Any]) -> str:
    """A digest of a request copy's exact JSON bytes (lone surrogates escaped, as SDKs send)."""
    return xxhash.xxh3_128_hexdigest(json.dumps(messages, ensure_ascii=True).encode())


def result_texts(msgs: list[Message]) -> dict[str, str]:
    """The text of every tool result in ``msgs`` (Anthropic format), by call id."""
    out: dict[str, str] = {}
    for m in msgs:
        if isinstance(m["content"], list):
            for b in m["content"]:
                if b.get("type") == "tool_result":
                    c = b["content"]
                    if isinstance(c, list):
                        c = "\n".join(p["text"] for p in c if p.get("type") == "text")
                    out[b["tool_use_id"]] = c
    return out
