"""``Ledger.hidden_refs``: counted as decisions are recorded after its first call, it is always
the set a walk over the decisions gives (spilled and trimmed results' refs, replaced decisions
and resumed records included)."""

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
