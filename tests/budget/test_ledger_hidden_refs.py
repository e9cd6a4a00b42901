"""``Ledger.hidden_refs``: counted as decisions are recorded after its first call, it is always
the set a walk over the decisions gives (spilled and trimmed results' refs, replaced decisions
and resumed records included). ``Ledger.hidden_since``: each hidden ref dated by the fewest
messages of a request since it was hidden, the same from the live requests and from a log."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from budget._ledger import Decision, Ledger

REFS = [f"{i:032x}" for i in range(4)]
"""A few refs, so that two calls share one (the same text spilled twice)."""


def _walk(ledger: Ledger) -> set[str]:
    return {d.ref for d in ledger if d.ref is not None and d.needs_body}


def _decision(call: int, kind: str, ref: int, chars: int) -> Decision:
    hides = kind in ("spilled", "trimmed")
    return Decision(
        call_id=f"c{call}",
        kind=kind,  # type: ignore[arg-type]
        reason="fits" if kind == "kept" else "pays",
        chars=chars,
        text="shown" if hides else None,
        ref=REFS[ref] if hides else None,
        tool="Bash",
        digest=REFS[ref],
    )


_steps = st.lists(
    st.tuples(
        st.integers(0, 5),
        st.sampled_from(["kept", "spilled", "trimmed"]),
        st.integers(0, 3),
        st.sampled_from([100, 200]),
        st.booleans(),
    ),
    max_size=40,
)


@given(_steps)
def test_the_counted_refs_are_the_walked_ones(steps: list[tuple[Any, ...]]) -> None:
    """Recording decisions (replacing, keeping a trimmed one final, sharing refs) with the refs
    asked for at random points gives, each time, what walking the decisions gives."""
    ledger = Ledger()
    for call, kind, ref, chars, ask in steps:
        ledger.record(_decision(call, kind, ref, chars))
        if ask:
            assert set(ledger.hidden_refs()) == _walk(ledger)
    assert set(ledger.hidden_refs()) == _walk(ledger)


def test_restored_records_are_counted_when_first_asked() -> None:
    """Records queued by a resume are folded in by the first call, then kept up to date."""
    ledger = Ledger()
    spilled = _decision(1, "spilled", 0, 100).to_record()
    kept = _decision(2, "kept", 1, 100).to_record()
    ledger.restore([{**spilled, "id": "c1"}, {**kept, "id": "c2"}])
    assert set(ledger.hidden_refs()) == {REFS[0]}
    ledger.record(_decision(2, "trimmed", 1, 100))
    assert set(ledger.hidden_refs()) == {REFS[0], REFS[1]}


def _hiding(call: int, ref: int, kind: str = "spilled") -> Decision:
    return _decision(call, kind, ref, 100)


def test_a_ref_is_dated_by_the_shortest_request_since_it_was_hidden() -> None:
    """Hidden by a request of 5 messages: 5; a longer request and a trim of the same text keep
    it; a history cut back to 4 messages dates every hidden ref 4; a kept ref has no date."""
    ledger = Ledger()
    ledger.record(_hiding(1, 0))
    assert ledger.hidden_since(REFS[0]) is None  # not logged yet: the request is under way
    ledger.requested(5, [REFS[0]])
    ledger.record(_decision(2, "kept", 1, 100))
    ledger.requested(8, [])
    assert (ledger.hidden_since(REFS[0]), ledger.hidden_since(REFS[1])) == (5, None)
    ledger.record(_hiding(1, 0, "trimmed"))
    ledger.record(_hiding(2, 1, "trimmed"))
    ledger.requested(9, [REFS[0], REFS[1]])
    assert (ledger.hidden_since(REFS[0]), ledger.hidden_since(REFS[1])) == (5, 9)
    ledger.requested(4, [])
    assert (ledger.hidden_since(REFS[0]), ledger.hidden_since(REFS[1])) == (4, 4)
    ledger.requested(12, [])
    assert (ledger.hidden_since(REFS[0]), ledger.hidden_since(REFS[1])) == (4, 4)


def test_a_request_record_without_a_length_leaves_its_decisions_to_the_next() -> None:
    """A log's hiding decisions are dated by the request record closing them; one without a
    length (another writer's) leaves them to the next request record's."""
    ledger = Ledger()
    records: list[dict[str, Any]] = [
        _hiding(1, 0).to_record(),
        {"t": "req", "n": 1},
        _hiding(2, 1).to_record(),
        {"t": "req", "n": 2, "m": 7},
    ]
    ledger.restore(r for r in records if r["t"] == "d")
    ledger.requested_in(records)
    assert (ledger.hidden_since(REFS[0]), ledger.hidden_since(REFS[1])) == (7, 7)


_requests = st.lists(
    st.tuples(
        st.integers(0, 30),
        st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["kept", "spilled", "trimmed"]),
                           st.integers(0, 3)), max_size=4),
    ),
    max_size=12,
)  # fmt: skip


@given(_requests)
def test_a_log_dates_the_hidden_refs_as_the_live_requests_did(
    requests: list[tuple[int, list[tuple[int, str, int]]]],
) -> None:
    """Requests of any lengths (growing, retried, cut back) with their decisions: a ledger
    restored from their log (decision records, each request's record closing them) dates every
    hidden ref as the live ledger did."""
    live, records = Ledger(), list[dict[str, Any]]()
    for length, made in requests:
        decisions = [_decision(call, kind, ref, 100) for call, kind, ref in made]
        for d in decisions:
            live.record(d)
        live.requested(length, [d.ref for d in decisions if d.ref is not None and d.needs_body])
        records += [d.to_record() for d in decisions] + [{"t": "req", "m": length}]
    resumed = Ledger()
    resumed.restore(r for r in records if r["t"] == "d")
    resumed.requested_in(records)
    assert [resumed.hidden_since(r) for r in REFS] == [live.hidden_since(r) for r in REFS]
