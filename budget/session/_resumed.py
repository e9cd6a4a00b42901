"""The inputs of later decisions a request or an overflow leaves, as log-record fields.

A resumed session must decide as the one that went on (issue 28, items 6-8), so whatever a
request learns in memory that a later request reads goes into the record closing it:

* ``"ca"`` of a request record: the calibration :class:`~budget.tokens._calibration.Anchor` the request
  left (its usage, estimated growth and length), which the next request's usage is measured
  against (a staleness batch and the pressure trigger read the corrected estimate);
* ``"hdr"`` of a request record: the compaction header learned so far (tokens each request carries
  beyond its messages), which sets the compaction threshold and limits;
* ``"rc"`` of an overflow record: that overflow scheduled a reactive compaction for the next
  request.

The compactor's own (the breaker's count, a compaction not reported yet) are
``budget.compaction._resumed``'s.

Every field is optional: a log written before them restores as it did (no anchor, no header,
no reactive compaction scheduled), and a malformed value reads as absent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from budget.session._records import CLOSING
from budget.tokens._calibration import Anchor
from budget.tokens._usage import ProviderUsage

__all__ = ["Reactive", "anchor_field", "header_of", "reactive_of", "read_anchor"]


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
        if kind not in CLOSING:
            continue
        scheduled = kind == "ovf" and rec.get("rc") is True
        if due is None:
            # A request after the scheduling overflow ran it (the flag is cleared as it starts).
            due = scheduled
        count = rec.get("count")
        if scheduled and type(count) is int and count >= 0:
            return Reactive(count, due)
    return Reactive(None, bool(due))
