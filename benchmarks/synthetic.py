"""A generated corpus for scale: N synthetic sessions shaped like the public traces.

``toolbudget bench --generate N [--seed S]`` replays N sessions made here instead of recorded ones.
Their shape follows the public recorded traces (``../shared/traces``), per recording format,
through a small table of summary statistics (:data:`SHAPE_FILE`, ``benchmarks/synthetic_shape.json``)
that :func:`fit` computes from the imported traces: how many traces each format has (the mix of
formats), quantiles of the requests per trace, of the tool-result sizes, of the assistant texts'
sizes and of the pauses between requests, the share of rounds with 1, 2, 3... parallel calls, the
tool mix (each tool's share of the calls), and the provider and most common model (which pick the
cache rules and the token estimator). No text of a trace is in the table; ``python -m benchmarks
synthetic-shape --traces ../shared/traces --out benchmarks/synthetic_shape.json`` writes it again.

A session is drawn from the table with :class:`random.Random` seeded by ``(seed, index)`` alone:
the same seed gives the same sessions, byte for byte, and the first 100 sessions of a 1,000 corpus
are the 100 of a 100 corpus. Sizes are drawn between the fitted quantiles (log-linear inside each
step), so the heavy tail of the recorded results (a few outputs of 100,000+ characters) is kept.
Texts are lines drawn from a vocabulary of code and log words: they tokenize like tool output,
and no assistant text repeats a result line (nothing counts as quoted, :mod:`benchmarks.readbacks`).
There is no recorded usage (no model ran), so the replay adds no header and the cache rules are
the model's.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
import statistics
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from benchmarks.importers._common import parts_text
from benchmarks.trace import Provider, Request, Trace
from budget._errors import ConfigError, InputError

__all__ = ["QUANTILES", "SHAPE_FILE", "command", "fit", "generate", "iter_generate", "load_shape"]

SHAPE_FILE = "synthetic_shape.json"
"""The committed table of summary statistics, beside this module."""
QUANTILES: tuple[float, ...] = (0.0, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1.0)
"""The quantiles the table keeps of every size and count."""
EPOCH = 1_750_000_000.0
"""When the first request of every synthetic session is sent."""
TOP_TOOLS = 8
"""Tools kept by name in a format's mix; the rest share one entry, ``other``."""


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_WORDS = _words(
    "def return self import from class None True False if else for in while try except raise "
    "with as yield lambda assert async await print len range dict list str int float path file "
    "test error warning info debug line col status ok failed passed skipped src lib tests main "
    "config value key index data result request response user model token cache session "
    "0 1 2 3 4 5 6 7 8 9 10 42 100 404 500 0x7f = == != <= >= ( ) [ ] { } : ; , . / - _ + * # @"
)
_PROSE = _words(
    "I will now look at the the failing test and check which function is called before the "
    "error appears so that the fix stays small and the other cases keep working as expected "
    "let me read run search compare change verify then confirm that nothing else breaks here"
)


# -- fitting -------------------------------------------------------------------------------------


def _quantiles(values: Sequence[float]) -> list[float]:
    """The :data:`QUANTILES` of ``values`` (nearest-rank on the sorted values), rounded."""
    ordered = sorted(values)
    if not ordered:
        return [0.0] * len(QUANTILES)
    out = []
    for q in QUANTILES:
        at = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
        out.append(round(float(ordered[at]), 1))
    return out


def fit(traces: Iterable[Trace]) -> dict[str, Any]:
    """The summary statistics of ``traces``, per format (the table :func:`generate` draws from)."""
    groups: dict[str, list[Trace]] = {}
    for trace in traces:
        groups.setdefault(trace.format, []).append(trace)
    formats: dict[str, Any] = {}
    for fmt, group in sorted(groups.items()):
        requests: list[int] = []
        results: list[int] = []
        texts: list[int] = []
        gaps: list[float] = []
        calls_per_round: Counter[int] = Counter()
        tools: Counter[str] = Counter()
        for trace in group:
            requests.append(len(trace.requests))
            stamps = [r.timestamp for r in trace.requests if r.timestamp is not None]
            gaps.extend(max(0.0, b - a) for a, b in itertools.pairwise(stamps))
            for message in trace.messages:
                content = message.get("content")
                if not isinstance(content, list):
                    continue
                if message.get("role") == "assistant":
                    calls = [b for b in content if b.get("type") == "tool_use"]
                    if calls:
                        calls_per_round[len(calls)] += 1
                        tools.update(str(b.get("name", "?")) for b in calls)
                    text = parts_text([b for b in content if b.get("type") == "text"])
                    texts.append(len(text))
                else:
                    results.extend(
                        len(parts_text(b.get("content")))
                        for b in content
                        if b.get("type") == "tool_result"
                    )
        total_calls = sum(tools.values()) or 1
        mix = dict(tools.most_common(TOP_TOOLS))
        rest = total_calls - sum(mix.values())
        if rest:
            mix["other"] = rest
        models = Counter(t.model or "" for t in group)
        providers = Counter(t.provider for t in group)
        formats[fmt] = {
            "traces": len(group),
            "provider": providers.most_common(1)[0][0],
            "model": models.most_common(1)[0][0] or None,
            "requests": _quantiles(requests),
            "result_chars": _quantiles(results),
            "assistant_text_chars": _quantiles(texts),
            "gap_s": _quantiles(gaps) if gaps else None,
            "calls_per_round": {
                str(k): round(v / sum(calls_per_round.values()), 4)
                for k, v in sorted(calls_per_round.items())
            },
            "tools": {k: round(v / total_calls, 4) for k, v in mix.items()},
        }
    return {
        "about": "Summary statistics of the public traces per format (benchmarks/synthetic.py); "
        "no trace text.",
        "quantiles": list(QUANTILES),
        "formats": formats,
    }


def load_shape(path: Path | None = None) -> dict[str, Any]:
    """The table of summary statistics: ``path``, or the committed :data:`SHAPE_FILE`."""
    try:
        if path is None:
            data = resources.files("benchmarks").joinpath(SHAPE_FILE).read_bytes()
        else:
            data = path.read_bytes()
        shape: dict[str, Any] = orjson.loads(data)
    except (OSError, orjson.JSONDecodeError) as exc:
        raise InputError(
            f"cannot read the synthetic corpus shape {path or SHAPE_FILE}: {exc}"
        ) from None
    if not shape.get("formats") or list(shape.get("quantiles", ())) != list(QUANTILES):
        raise InputError(f"{path or SHAPE_FILE} is not a table written by benchmarks.synthetic.fit")
    return shape


# -- generation -----------------------------------------------------------------------------------


def _draw(rng: random.Random, quantiles: Sequence[float]) -> float:
    """A value between the fitted quantiles: a uniform rank, log-linear inside its step."""
    u = rng.random()
    k = min(len(QUANTILES) - 2, max(0, bisect.bisect_right(QUANTILES, u) - 1))
    lo, hi = QUANTILES[k], QUANTILES[k + 1]
    a, b = max(quantiles[k], 0.0), max(quantiles[k + 1], 0.0)
    f = (u - lo) / (hi - lo) if hi > lo else 0.0
    if a > 0 and b > 0:
        return math.exp(math.log(a) + f * (math.log(b) - math.log(a)))
    return a + f * (b - a)


def _pick(rng: random.Random, shares: dict[str, float]) -> str:
    return rng.choices(list(shares), weights=list(shares.values()))[0]


def _lines(words: Sequence[str], seed: str) -> tuple[str, ...]:
    """:data:`_POOL_LINES` lines of 3 to 14 of ``words`` (fixed: the same on every run)."""
    rng = random.Random(seed)
    return tuple(" ".join(rng.choices(words, k=rng.randint(3, 14))) for _ in range(_POOL_LINES))


_POOL_LINES = 4096
_CODE_LINES = _lines(_WORDS, "code")
_PROSE_LINES = _lines(_PROSE, "prose")
_MEAN_LINE = 48
"""About the mean length of a pool line with its newline (lines are drawn in batches this big)."""


def _text(rng: random.Random, chars: int, lines: Sequence[str]) -> str:
    """``chars`` characters of lines drawn from ``lines`` (the last one cut)."""
    if chars <= 0:
        return ""
    out: list[str] = []
    size = 0
    while size < chars:
        batch = rng.choices(lines, k=max(1, (chars - size) // _MEAN_LINE + 1))
        out.extend(batch)
        size += sum(map(len, batch)) + len(batch)  # each line with its newline
    return "\n".join(out)[:chars]


def _session(shape: dict[str, Any], seed: int, index: int) -> Trace:
    rng = random.Random(f"toolbudget-synthetic:{seed}:{index}")
    formats = shape["formats"]
    fmt = rng.choices(list(formats), weights=[f["traces"] for f in formats.values()])[0]
    spec = formats[fmt]
    n_requests = max(2, round(_draw(rng, spec["requests"])))
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": _text(rng, 300, _PROSE_LINES)}]}
    ]
    requests: list[Request] = []
    now = EPOCH
    calls_shares = {k: float(v) for k, v in spec["calls_per_round"].items()} or {"1": 1.0}
    for r in range(n_requests):
        requests.append(Request(len(messages), timestamp=now))
        gap = _draw(rng, spec["gap_s"]) if spec.get("gap_s") else 30.0
        now += round(gap, 3)
        if r == n_requests - 1:
            break
        calls = int(_pick(rng, calls_shares))
        content: list[dict[str, Any]] = []
        said = round(_draw(rng, spec["assistant_text_chars"]))
        if said:
            content.append({"type": "text", "text": _text(rng, said, _PROSE_LINES)})
        ids = [f"toolu_{index:06d}_{r:04d}_{c}" for c in range(calls)]
        for call_id in ids:
            tool = _pick(rng, spec["tools"])
            command = _text(rng, rng.randint(10, 80), _CODE_LINES)
            content.append(
                {"type": "tool_use", "id": call_id, "name": tool, "input": {"command": command}}
            )
        messages.append({"role": "assistant", "content": content})
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": call_id,
                        "content": [
                            {
                                "type": "text",
                                "text": _text(
                                    rng, round(_draw(rng, spec["result_chars"])), _CODE_LINES
                                ),
                            }
                        ],
                    }
                    for call_id in ids
                ],
            }
        )
    provider: Provider = spec["provider"]
    return Trace(
        name=f"synthetic/{seed}-{index:06d}",
        path=f"synthetic/{seed}/{index:06d}",
        format=f"synthetic-{fmt}",
        provider=provider,
        messages=tuple(messages),
        requests=tuple(requests),
        model=spec["model"],
    )


def iter_generate(n: int, *, seed: int = 0, shape: dict[str, Any] | None = None) -> Iterator[Trace]:
    """The ``n`` synthetic sessions of ``seed``, one at a time."""
    if n < 1:
        raise ConfigError(f"the corpus needs at least 1 session, got {n}")
    table = shape if shape is not None else load_shape()
    for index in range(n):
        yield _session(table, seed, index)


def generate(n: int, *, seed: int = 0, shape: dict[str, Any] | None = None) -> list[Trace]:
    """The ``n`` synthetic sessions of ``seed`` (deterministic; see the module's docstring)."""
    return list(iter_generate(n, seed=seed, shape=shape))


def describe(traces: Sequence[Trace]) -> dict[str, float]:
    """Median requests and result characters of ``traces`` (to compare a corpus with the table)."""
    sizes = [
        len(parts_text(b.get("content")))
        for t in traces
        for m in t.messages
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    return {
        "requests_median": float(statistics.median(len(t.requests) for t in traces)),
        "result_chars_median": float(statistics.median(sizes)) if sizes else 0.0,
    }


def command(
    traces: Annotated[
        Path | None, typer.Option(help="Recorded traces (default ../shared/traces).")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Where to write the table (default: print it)."),
    ] = None,
) -> None:
    """Fit the synthetic corpus's table of summary statistics to recorded traces."""
    from benchmarks.importers import load_dir

    found, _ = load_dir(traces if traces is not None else Path("../shared/traces"))
    if not found:
        typer.echo(f"error: no trace found under {traces}", err=True)
        raise typer.Exit(2)
    data = orjson.dumps(fit(found), option=orjson.OPT_INDENT_2) + b"\n"
    if out is None:
        sys.stdout.write(data.decode())
    else:
        out.write_bytes(data)
        typer.echo(f"wrote {out} ({len(found)} traces)")
