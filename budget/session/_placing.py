"""Where a scanned result goes: under the call it answers, with its frozen decision if it has one.

Two plain functions of the history cache's scan (:mod:`budget.session._history`), over the state
it passes in: the calls made so far and how many results answered each id.
"""

from __future__ import annotations

from budget._errors import InputError
from budget._ledger import Decision, Ledger
from budget._log import Events
from budget._view import RawResult, ToolResult, build_result
from budget.session._keys import result_key
from spill import ref_for

__all__ = ["frozen_prior", "place_result"]

Calls = dict[str, list[tuple[str, int, int, str]]]
"""Per call id, each call made with it: (tool, round group, round, call key)."""


def place_result(
    calls: Calls, occ: dict[str, int], image_chars: int, i: int, raw: RawResult
) -> ToolResult:
    """Result ``raw`` of message ``i``, placed under the call it answers (``occ`` counts the
    results each id has had, and is updated)."""
    placed_call = calls.get(raw.call_id)
    if not placed_call:
        raise InputError(
            f"messages[{i}] has a tool result for call id {raw.call_id!r}, "
            "but no earlier message makes that call"
        )
    tool, g, r_round, key = placed_call[-1]
    # Servers that number calls per turn repeat ids: each result answering an id is
    # its own result, keyed by how many answered that id before it.
    n = occ.get(raw.call_id, 0) + 1
    occ[raw.call_id] = n
    return build_result(
        result_key(raw.call_id, n), tool, i, raw.slot, g, r_round, raw.text, raw.is_error,
        raw.other_blocks * image_chars, (i << 16) + raw.slot, key,
    )  # fmt: skip


def frozen_prior(ledger: Ledger, log: Events, result: ToolResult) -> tuple[Decision | None, bool]:
    """(the frozen decision of ``result`` unless its text changed since, whether it changed)."""
    prior = ledger.get(result.call_id)
    if prior is not None and not prior.same_text(
        len(result.text), None if prior.digest is None else ref_for(result.text)
    ):
        # Edited after it was decided (a redaction): a new result, decided anew. Or the very
        # text the session sent for it: the caller passed a request copy back as its history.
        log.warning(
            "toolbudget.session.decision_stale",
            call_id=result.call_id,
            logged_chars=prior.chars,
            chars=len(result.text),
            sent_copy=prior.text is not None and result.text == prior.text,
        )
        return None, True
    return prior, False
