"""Self-calibration: each session learns what its anchored token estimate misses.

The anchored estimate is the last reported prompt plus an estimate of what was added since
(:func:`budget.tokens._usage.anchored_estimate`). What no character weight can see — framing, reminders
a harness injects, tool definitions loaded mid-session, reasoning that is sent but not kept — is
the same kind of thing request after request in one session. So every request after the first
with usage gives a pair: the growth the session estimated for the previous request, and the growth
the provider then reported. From the recent pairs the session fits a correction of the estimated
growth, ``factor * growth + overhead``, that takes only the bias the pairs consistently show:

* ``factor`` comes from the ratios ``actual / estimated`` of the last :data:`WINDOW` pairs and
  ``overhead`` from what is left (``actual - factor * estimated``), each through a *dead band*
  (:func:`consistent`): when both quartiles of the window lie on one side of "no correction"
  (a ratio of 1, a residual of 0), the quartile nearer to it is taken; when the quartiles
  straddle it, nothing is. Quartiles, not means: one outlier (a compaction the history does not
  show, a huge injected file) moves each by at most one rank of the window.
* Why a dead band rather than the median: in a session the weights already estimate well, the
  median of a few noisy pairs is itself noise, and a correction fitted on it only adds that noise
  (measured: the median fit made the typical whole-prompt error of every family worse, 0.01 to
  0.03 points; with the band it is better than the raw estimate in every family, and stays so
  for windows of 8 to 16 pairs and 2 to 6 pairs before the first correction).
* ``factor`` only scales up (:data:`FACTOR_BOUNDS` starts at 1): it multiplies the growth, and a
  large growth scaled down by a factor learned on small ones is the costly error, an
  underestimate of a big tool result. ``overhead`` corrects both ways within
  :data:`OVERHEAD_BOUNDS`: a per-request offset is what the typical, small growth misses, so a
  session whose weights count high is corrected down by at most 500 tokens a request. (An
  earlier rule, "the correction only adds", kept every overestimate and moved every noisy
  correction upwards: that, with the median, is what made the typical error worse.)
* No correction applies before :data:`MIN_PAIRS` pairs.

The value is frozen and the update pure (:func:`observe`); the session keeps one, writes it to
its decision log and resets it when the model changes or the history diverges (an anchor is
valid only for the history it was measured on).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from budget.tokens._usage import ProviderUsage

__all__ = [
    "FACTOR_BOUNDS",
    "MIN_PAIRS",
    "OVERHEAD_BOUNDS",
    "WINDOW",
    "Anchor",
    "Calibration",
    "consistent",
    "fit",
    "from_record",
    "learn",
    "observe",
    "restore",
]

WINDOW: Final = 16
"""Recent pairs the correction is fitted on: enough for a stable median, recent enough to follow
a session whose harness changes what it injects."""
MIN_PAIRS: Final = 3
"""Pairs needed before any correction applies (one or two say nothing about a median)."""
FACTOR_BOUNDS: Final = (1.0, 1.5)
"""The multiplicative factor's range: it only scales the growth up (a large growth scaled down
is the costly underestimate), and no recorded session needed more than 1.5 times the estimated
growth."""
OVERHEAD_BOUNDS: Final = (-500, 2_000)
"""Tokens a request may add or remove on top of the scaled estimate: the corrected estimate is
never more than 500 tokens below the raw one."""
QUARTILES: Final = 4
"""The dead band is the window's interquartile range (``statistics.quantiles(n=4)``)."""
RECORD: Final = "cal"
"""The decision-log record type (readers that do not know it skip it: they read ``d``, ``req``,
``ovf`` and ``void`` records only). Written with the request that learned, before its ``req``
record; the last one in the log counts, even after the last ``req`` (a request cut off after its
response came): nothing withdraws it, and the next request's record closes it. Its request number
keeps two requests' records distinct, so a retry repeats one only when it learned the same."""


@dataclass(frozen=True, slots=True)
class Anchor:
    """An anchored estimate waiting for the usage of the request it was made for."""

    usage: ProviderUsage
    """The usage the estimate was anchored on (the response before that request)."""
    growth: int
    """Estimated tokens the request added on top of ``usage.prompt_tokens``."""
    messages: int
    """Messages in that request's history: the next one must extend it."""


@dataclass(frozen=True, slots=True)
class Calibration:
    """A session's learned correction of its estimated prompt growth (see the module doc)."""

    model: str | None = None
    """The model the pairs were measured on; another model starts afresh."""
    pairs: tuple[tuple[int, int], ...] = ()
    """The last :data:`WINDOW` pairs (estimated growth, reported growth), oldest first."""
    factor: float = 1.0
    overhead: int = 0

    @property
    def active(self) -> bool:
        """Enough pairs to correct anything."""
        return len(self.pairs) >= MIN_PAIRS

    def growth(self, estimated: int) -> int:
        """The corrected growth for an ``estimated`` one (itself until :data:`MIN_PAIRS`)."""
        if not self.active:
            return estimated
        return max(0, round(self.factor * estimated + self.overhead))

    def correct(self, raw: int, floor: int, usage: ProviderUsage | None) -> int:
        """The corrected form of a ``raw`` anchored estimate, never below ``floor`` (the full,
        unanchored estimate); ``raw`` itself without an anchor.

        Since the factor is at least 1 and the overhead at least -500, the result is never more
        than 500 tokens below ``raw``, and a large growth is never scaled down: the estimate
        guards the window and the pressure trigger, where an underestimate is the costly error.
        """
        if usage is None or not self.active:
            return raw
        base = usage.prompt_tokens
        return max(floor, base + self.growth(raw - base))

    def to_record(self, request: int) -> dict[str, Any]:
        """The decision-log record of this state as ``request`` left it (its number keeps the
        records of two requests distinct, so none is taken for a repeat of another)."""
        return {
            "t": RECORD,
            "n": request,
            "model": self.model,
            "pairs": [list(p) for p in self.pairs],
        }


def _clamp(value: float, bounds: tuple[float, float]) -> float:
    return min(max(value, bounds[0]), bounds[1])


def consistent(values: Sequence[float], neutral: float) -> float:
    """The correction ``values`` consistently show against ``neutral`` (no correction): their
    quartile nearer to it when both quartiles lie on one side of it, else ``neutral`` itself
    (fewer than two values show nothing)."""
    if len(values) < 2:
        return neutral
    low, _, high = statistics.quantiles(values, n=QUARTILES, method="inclusive")
    if low > neutral:
        return low
    if high < neutral:
        return high
    return neutral


def fit(pairs: Sequence[tuple[int, int]]) -> tuple[float, int]:
    """(factor, overhead) fitted on ``pairs`` (the module doc), within their bounds; (1.0, 0)
    when the pairs show no consistent bias."""
    ratios = [actual / est for est, actual in pairs if est > 0]
    factor = _clamp(consistent(ratios, 1.0), FACTOR_BOUNDS)
    rest = [actual - factor * est for est, actual in pairs]
    return factor, round(_clamp(consistent(rest, 0.0), OVERHEAD_BOUNDS))


def observe(cal: Calibration, estimated: int, actual: int) -> Calibration:
    """``cal`` after one more pair: ``estimated`` growth against the ``actual`` reported one."""
    pairs = (*cal.pairs, (int(estimated), int(actual)))[-WINDOW:]
    factor, overhead = fit(pairs)
    return Calibration(cal.model, pairs, factor, overhead)


def learn(
    cal: Calibration,
    anchor: Anchor | None,
    usage: ProviderUsage | None,
    messages: int,
    *,
    diverged: bool,
) -> tuple[Calibration, bool]:
    """``cal`` after a request of ``messages`` messages reporting ``usage``, and whether it
    changed: reset when the history ``diverged`` from the one the anchor was made on; one pair
    more when ``usage`` is the response to the anchor's request (a new usage, a longer history)."""
    if diverged:
        return Calibration(cal.model), bool(cal.pairs)
    if anchor is None or usage is None or usage == anchor.usage or messages <= anchor.messages:
        return cal, False
    return observe(cal, anchor.growth, usage.prompt_tokens - anchor.usage.prompt_tokens), True


def _pair(value: object) -> tuple[int, int] | None:
    # bools and floats are not token counts
    if isinstance(value, list) and len(value) == 2 and all(type(v) is int for v in value):
        return value[0], value[1]
    return None


def from_record(rec: Mapping[str, Any], model: str | None) -> Calibration | None:
    """The state a record holds, fresh for another ``model``; None when it is malformed."""
    raw_pairs, raw_model = rec.get("pairs"), rec.get("model")
    if not isinstance(raw_pairs, list) or not (raw_model is None or isinstance(raw_model, str)):
        return None
    pairs = [_pair(p) for p in raw_pairs]
    if any(p is None for p in pairs):
        return None
    if raw_model != model:
        return Calibration(model)
    kept = tuple(p for p in pairs if p is not None)[-WINDOW:]
    factor, overhead = fit(kept)
    return Calibration(model, kept, factor, overhead)


def restore(records: Sequence[Mapping[str, Any]], model: str | None) -> tuple[Calibration, int]:
    """The calibration the last well-formed record of ``records`` holds (fresh when none), and
    how many malformed ones after it were skipped."""
    skipped = 0
    for rec in reversed(records):
        if rec.get("t") != RECORD:
            continue
        cal = from_record(rec, model)
        if cal is not None:
            return cal, skipped
        skipped += 1
    return Calibration(model), skipped
