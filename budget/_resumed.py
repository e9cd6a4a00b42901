"""The inputs of later decisions a request or an overflow leaves, as log-record fields.

A resumed session must decide as the one that went on (issue 28, items 6-8), so whatever a
request learns in memory that a later request reads goes into the record closing it:

* ``"ca"`` of a request record: the calibration :class:`~budget._calibration.Anchor` the request
  left (its usage, estimated growth and length), which the next request's usage is measured
  against (a staleness batch and the pressure trigger read the corrected estimate);
* ``"hdr"`` of a request record: the compaction header learned so far (tokens each request carries
  beyond its messages), which sets the compaction threshold and limits;
* ``"rc"`` of an overflow record: that overflow scheduled a reactive compaction for the next
  request;
* a ``"cmpf"`` record (:data:`FAILED`): a compaction failed, and the breaker's count after it;
* ``"pt"`` of a checkpoint record: the tokens it summarized, for the report after it.

Every field is optional: a log written before them restores as it did (no anchor, no header,
no reactive compaction scheduled), and a malformed value reads as absent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from budget._calibration import Anchor
from budget._usage import ProviderUsage

__all__ = [
    "FAILED",
    "Reactive",
    "anchor_field",
    "failures_of",
    "header_of",
    "reactive_of",
    "read_anchor",
    "unreported_of",
]


def anchor_field(anchor: Anchor | None) -> dict[str, Any]:
    """The request record's ``"a"`` field for ``anchor`` (nothing for none)."""
    if anchor is None:
        return {}
    u = anchor.usage
    usage = [u.input_tokens, u.cache_read_tokens, u.cache_write_tokens, u.output_tokens]
    return {"ca": {"u": usage, "g": anchor.growth, "m": anchor.messages}}


def read_anchor(rec: Mapping[str, Any]) -> Anchor | None:
    """The anchor a request record holds; None when it holds none or a malformed one."""
    raw = rec.get("ca")
    if not isinstance(raw, dict):
        return None
    usage, growth, messages = raw.get("u"), raw.get("g"), raw.get("m")
    # The growth may be negative (a history whose copy shrank); counts are never bools.
    if not (isinstance(usage, list) and len(usage) == 4 and all(type(v) is int for v in usage)):
        return None
    if type(growth) is not int or type(messages) is not int or messages < 0:
        return None
    try:
        u = ProviderUsage(
            input_tokens=usage[0],
            cache_read_tokens=usage[1],
            cache_write_tokens=usage[2],
            output_tokens=usage[3],
        )
    except ValidationError:
        return None
    return Anchor(u, growth, messages)


def header_of(rec: Mapping[str, Any]) -> int:
    """The compaction header a request record holds (0 when none, or malformed)."""
    value = rec.get("hdr")
    return value if type(value) is int and value > 0 else 0


@dataclass(frozen=True, slots=True)
class Reactive:
    """The reactive compaction schedule as the closed records leave it."""

    at: int | None = None
    """The overflow count the last reactive compaction was scheduled at."""
    due: bool = False
    """The last closing record is an overflow that scheduled one: the next request compacts."""


def reactive_of(records: Sequence[Mapping[str, Any]]) -> Reactive:
    """The schedule of ``records`` (closed records, oldest first)."""
    due: bool | None = None
    for rec in reversed(records):
        kind = rec.get("t")
        if kind not in ("req", "ovf"):
            continue
        scheduled = kind == "ovf" and rec.get("rc") is True
        if due is None:
            # A request after the scheduling overflow ran it (the flag is cleared as it starts).
            due = scheduled
        count = rec.get("count")
        if scheduled and type(count) is int and count >= 0:
            return Reactive(count, due)
    return Reactive(None, bool(due))


FAILED = "cmpf"
"""The log record of a failed compaction: the breaker's count of consecutive failures after it.
A later checkpoint record (a compaction that succeeded) resets the count; a log written before
these records restores none (the breaker closed, as it resumed before)."""


def failures_of(log: Sequence[Mapping[str, Any]]) -> int:
    """Consecutive failed compactions as the log leaves them."""
    for rec in reversed(log):
        kind = rec.get("t")
        if kind == FAILED:
            count = rec.get("failures")
            return count if type(count) is int and count > 0 else 0
        if kind == "cmp" and not rec.get("clear"):
            return 0
    return 0


def unreported_of(log: Sequence[Mapping[str, Any]]) -> int | None:
    """Prefix tokens of a compaction no request has reported yet (a ``compact()`` call the log
    ends with): the next report says a compaction ran, as in the process that compacted."""
    for rec in reversed(log):
        kind = rec.get("t")
        if kind == "req":
            return None
        if kind == "cmp":
            pt = rec.get("pt")
            return pt if not rec.get("clear") and type(pt) is int and pt >= 0 else None
    return None
