"""Result keys: how the ledger and the log name each result answering a call id.

Servers that number calls per turn repeat ids, so each result answering an id is its own
result, keyed by how many answered that id before it.
"""

from __future__ import annotations

import dataclasses

from budget._ledger import Decision

__all__ = ["as_called", "call_of", "result_key"]

_REPEAT = "\x00"
"""Separates a call id from the number of a repeated result answering it in result keys."""


def result_key(call_id: str, occurrence: int) -> str:
    """The key of the ``occurrence``-th result (from 1) answering ``call_id``: the call id
    itself for the first (what logs have always used), else ``call id + NUL + n``. A call id
    holding NUL always gets the suffix, so two keys never collide."""
    if occurrence == 1 and _REPEAT not in call_id:
        return call_id
    return f"{call_id}{_REPEAT}{occurrence}"


def call_of(key: str) -> str:
    """The call id a result key names."""
    return key.rpartition(_REPEAT)[0] if _REPEAT in key else key


def as_called(decision: Decision | None, call_id: str) -> Decision | None:
    """``decision`` naming ``call_id`` as the caller sent it: the ledger's names a call id
    holding NUL by its key (the id, NUL, the count), which no call ever carried."""
    if decision is None or decision.call_id == call_id:
        return decision
    return dataclasses.replace(decision, call_id=call_id)
