"""The decision log's records as the journal reads them: which a closing record closed, which
a ``void`` record withdrew, and their fields checked (a checksummed yet malformed record, from
another writer, is skipped, never trusted)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from budget._errors import InputError
from budget.policy import Observed

__all__ = [
    "CLOSING",
    "NOTE",
    "KeptEvidence",
    "closed_records",
    "finite",
    "is_count",
    "last_noted",
    "last_request_refs",
    "note_request",
    "noted_of",
    "restore_policy",
    "split_log",
    "timestamp",
    "tokens_field",
    "unnumbered",
    "usage_key",
]


CLOSING = ("req", "ovf")
"""The record kinds that close the records before them: a request's and an overflow's (what a
crash cut off after the last of them is left to the retry)."""


def split_log(
    log: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(the closed records, the decision records among them, the records after the last
    closing one)."""
    kinds = [rec.get("t") for rec in log]
    # Decisions are queued, not built: each is validated when its call id is first asked
    # for, so resuming costs a dict insert per record (docs/performance.md: 10,000 in under 100 ms).
    if "void" in kinds:  # ``in`` compares: any value works, even an unhashable one
        records, unclosed = closed_records(log)
        return records, [rec for rec in records if rec.get("t") == "d"], unclosed
    # Nothing withdrawn (nearly every log): the records up to the last closing one.
    end = len(log)
    while end and kinds[end - 1] not in CLOSING:
        end -= 1
    records = log[:end]
    decisions = [rec for rec, kind in zip(records, kinds, strict=False) if kind == "d"]
    return records, decisions, log[end:]


def last_request_refs(records: list[dict[str, Any]]) -> frozenset[str]:
    """The refs the decisions of the last logged request name (the ``d`` records between the
    last two request records; an overflow record after it names none): the only bodies a store
    that fsyncs after the request is answered may have lost with their decisions kept (the next
    request waits for that sync)."""
    refs: set[str] = set()
    closing = False
    for rec in reversed(records):
        kind = rec.get("t")
        if kind == "req":
            if closing:
                break
            closing = True
        elif kind == "d" and isinstance(ref := rec.get("ref"), str):
            refs.add(ref)
    return frozenset(refs)


def closed_records(
    log: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(records closed by a request or overflow record, those after the last one), ``void``
    records applied: each withdraws the unclosed decision records it names."""
    records: list[dict[str, Any]] = []
    unclosed: list[dict[str, Any]] = []
    for rec in log:
        kind = rec.get("t")
        if kind == "void":
            ids = rec.get("ids")
            if isinstance(ids, list):
                unclosed = [r for r in unclosed if r.get("t") != "d" or r.get("id") not in ids]
            continue
        unclosed.append(rec)
        if kind in CLOSING:  # a tuple: any value compares, even an unhashable one
            records += unclosed
            unclosed = []
    return records, unclosed


def unnumbered(record: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k != "s"}


def tokens_field(value: object) -> int | None:
    return value if is_count(value) else None


def usage_key(value: object) -> tuple[int, ...] | None:
    if isinstance(value, list) and len(value) == 4 and all(is_count(v) for v in value):
        return tuple(value)
    return None


NOTE = "rb"
"""The record kind of one read-back the host noted (``Budget.note_readback``), logged when it is
noted: ``{"t": "rb", "ref": ref}`` (``ref`` None when the host named none)."""

Noted = tuple[int, int, frozenset[str]]
"""The host's reported read-backs (``Budget.note_readback``): how many, how many named no ref,
and the refs the others named (a request record's ``r``)."""


def noted_of(rec: Mapping[str, Any] | None) -> Noted:
    """The reported read-backs a request record's ``r`` holds (logs before it, or a damaged one:
    none, the logged counts the floor)."""
    value = rec.get("r") if rec is not None else None
    if not (isinstance(value, list) and len(value) == 3):
        return 0, 0, frozenset()
    noted, anonymous, refs = value
    if not (is_count(noted) and is_count(anonymous) and isinstance(refs, list)):
        return 0, 0, frozenset()
    if not all(isinstance(r, str) for r in refs) or anonymous + len(set(refs)) > noted:
        return 0, 0, frozenset()
    return noted, anonymous, frozenset(refs)


def last_noted(log: Sequence[Mapping[str, Any]]) -> Noted:
    """The host's reported read-backs the whole ``log`` holds: a :data:`NOTE` record for each
    (a fact, kept whatever follows it: a read-back noted after the last request, before a
    crash, still counts), after the last request record holding ``r`` (the tally as logs
    written before :data:`NOTE` records held it, in the first request record after a note)."""
    start, base = 0, noted_of(None)
    for i in range(len(log) - 1, -1, -1):
        if log[i].get("t") == "req" and "r" in log[i]:
            start, base = i + 1, noted_of(log[i])
            break
    noted, anonymous, refs = base
    named = set(refs)
    for rec in log[start:]:
        if rec.get("t") != NOTE:
            continue
        ref = rec.get("ref")
        if ref is None:
            anonymous += 1
        elif isinstance(ref, str) and ref:
            named.add(ref)
        else:
            continue  # a malformed note (another writer's): skipped, never trusted
        noted += 1
    return noted, anonymous, frozenset(named)


def is_count(value: object) -> TypeGuard[int]:
    return type(value) is int and value >= 0


def finite(value: object) -> float | None:
    """``value`` as a float when it is a finite number (not a bool), else None."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        as_float = float(value)
    except OverflowError:  # an int past the largest float (10**400): no finite time
        return None
    return as_float if math.isfinite(as_float) else None


def timestamp(now: object) -> float:
    """``now`` (a request's ``now=``) as a float; InputError unless it is a finite number."""
    when = finite(now)
    if when is None:
        raise InputError(f"now must be a finite number of seconds (a Unix time), not {now!r:.80}")
    return when


def note_request(
    marks: list[tuple[int, float]], length: int, at: float, rewritten: int | None = None
) -> None:
    """Add a request of ``length`` messages sent at ``at`` to ``marks`` (kept ordered by length:
    a retry replaces the request it repeats, a shorter history the longer ones it replaces).
    ``rewritten``: the first message its batch rewrote; the requests that held it are dropped
    (their cache entries no longer match the prompt)."""
    keep = length if rewritten is None else min(length, rewritten + 1)
    while marks and marks[-1][0] >= keep:
        marks.pop()
    marks.append((length, at))


@dataclass(frozen=True, slots=True)
class KeptEvidence:
    """What the kept results' read-back evidence had counted (``budget.session._quotes``)."""

    needed: frozenset[str] = frozenset()
    """Kept results an answer was found to need (every request record's ``q``)."""
    kinds: Mapping[str, tuple[int, int, int]] = field(default_factory=dict)
    """Per tool, [exposed, needed, episodes] (each request record's ``k`` holds the tools it
    changed; a log written before episodes were counted holds two: one per needed result)."""
    quoted: Mapping[str, frozenset[int]] = field(default_factory=dict)
    """Per needed result, the hashes of the lines answers quoted (every record's ``e``)."""
    exposed: frozenset[str] = frozenset()
    """Kept results counted as exposed (every record's ``w``; a log written before it: none,
    and the rounds its last request covered say which were counted)."""


def restore_policy(
    records: list[dict[str, Any]],
) -> tuple[Observed, list[tuple[int, float]], KeptEvidence]:
    """What the cost policy learned (the last request record's ``p``; logs written before it:
    nothing), when each request was sent, by its length (``at``, ``m``, ``x``), and the kept
    results' evidence (:class:`KeptEvidence`)."""
    observed = Observed()
    marks: list[tuple[int, float]] = []
    needed: set[str] = set()
    exposed: set[str] = set()
    kinds: dict[str, tuple[int, int, int]] = {}
    quoted: dict[str, set[int]] = {}
    for rec in records:
        m, at = rec.get("m"), finite(rec.get("at"))
        if rec.get("t") != "req" or not is_count(m):
            continue
        observed = Observed.from_record(rec.get("p")) or Observed()
        if at is not None:
            x = rec.get("x")
            note_request(marks, m, at, x if is_count(x) else None)
        for ids, key in ((needed, "q"), (exposed, "w")):
            listed = rec.get(key)
            if isinstance(listed, list):
                ids.update(cid for cid in listed if isinstance(cid, str))
        k = rec.get("k")
        if isinstance(k, dict):
            for tool, counts in k.items():
                # Every needed result is one read-back at least: fewer is no writer's record.
                if (
                    isinstance(counts, list)
                    and len(counts) in (2, 3)
                    and all(map(is_count, counts))
                    and counts[-1] >= counts[1]
                ):
                    kinds[tool] = (counts[0], counts[1], counts[-1])
        e = rec.get("e")
        if isinstance(e, dict):
            for cid, hashes in e.items():
                if isinstance(hashes, list):
                    quoted.setdefault(cid, set()).update(h for h in hashes if is_count(h))
    frozen = {cid: frozenset(h) for cid, h in quoted.items()}
    evidence = KeptEvidence(frozenset(needed), kinds, frozen, frozenset(exposed))
    return observed, marks, evidence
