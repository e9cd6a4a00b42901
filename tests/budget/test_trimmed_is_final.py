"""A trimmed decision is final for its text (SPEC §3.4): no later decision for it replaces it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from budget import Budget, Decision
from budget._ledger import Ledger
from spill import ref_for
from tests.strategies import SMALL, assistant, big, conversation, results


def tool_text(msg: dict[str, Any]) -> str:
    """The text of the first tool result of a user message built by tests.strategies."""
    content = msg["content"][0]["content"]
    assert isinstance(content, str)
    return content


def test_a_trimmed_result_stays_its_stub_when_it_is_decided_again_for_the_same_text(
    tmp_path: Path,
) -> None:
    """A trimmed result re-sent unchanged (a new list of equal copies) keeps the stub it showed.

    The session compares the history afresh and meets the trimmed result again; a later decision
    for the same text must not replace the trim, or the prefix the provider cached breaks and the
    model sees a text it was told was trimmed. (An edited text is a new result: see
    tests/reliability/test_issue11_state.py.)
    """
    msgs = conversation([[big(40, f"r{r}")] for r in range(6)])
    with Budget.open(tmp_path / "s", SMALL) as b:
        b.prepare(msgs[:7], now=0)
        cold = b.prepare(msgs, now=400)
        assert cold.report.staleness_reason == "cold_cache"
        stub = tool_text(cold.messages[2])
        assert stub.startswith("[toolbudget] Old output of bash trimmed (560 characters")

        again = copy.deepcopy(msgs)
        again += [assistant(("z", "bash")), results(("z", "fine"))]
        after = b.prepare(again, now=401)
        assert tool_text(after.messages[2]) == stub
        assert after.messages[: len(cold.messages)] == cold.messages
        assert after.report.trimmed == cold.report.trimmed
        assert b.read(ref_for(big(40, "r0"))) == big(40, "r0")  # the original is still there


def test_the_ledger_keeps_a_trim_over_any_later_decision_for_the_same_text() -> None:
    """Kept or spilled recorded after trimmed, for the same text, leave the trim in place."""
    text = big(300)
    ref = ref_for(text)
    trimmed = Decision("c1", "trimmed", "cold_cache", len(text), text="stub", ref=ref, digest=ref)
    ledger = Ledger([Decision("c1", "kept", "fits", len(text), digest=ref)])
    ledger.record(trimmed)
    ledger.record(Decision("c1", "kept", "fits", len(text), digest=ref))
    ledger.record(Decision("c1", "spilled", "cap", len(text), text="envelope", ref=ref))
    assert ledger.get("c1") == trimmed
    assert list(ledger) == [trimmed]


def test_the_ledger_lets_a_decision_for_an_edited_text_replace_a_trim() -> None:
    """A decision for another text (the caller redacted the result) replaces the trim."""
    text = big(300)
    ref = ref_for(text)
    trimmed = Decision("c1", "trimmed", "cold_cache", len(text), text="stub", ref=ref, digest=ref)
    ledger = Ledger([trimmed])
    redacted = "x" * len(text)
    kept = Decision("c1", "kept", "fits", len(redacted), digest=ref_for(redacted))
    ledger.record(kept)
    assert ledger.get("c1") == kept


def test_every_decision_names_the_digest_of_the_text_it_was_made_for(tmp_path: Path) -> None:
    """Kept, spilled and trimmed results (a trim takes its frozen decision's digest rather than
    hashing the text again): each logged decision's ``h`` is the hash of its result's text, in
    a session that went on and after a resume."""
    msgs = conversation([[big(40, f"r{r}")] for r in range(6)])
    texts = {m["content"][0]["tool_use_id"]: tool_text(m) for m in msgs if m["role"] == "user"
             and isinstance(m["content"], list)}  # fmt: skip
    with Budget.open(tmp_path / "s", SMALL) as b:
        b.prepare(msgs[:7], now=0)
        assert b.prepare(msgs, now=400).report.staleness_ran
    with Budget.open(tmp_path / "s", SMALL) as b:
        more = [*msgs, assistant(("z", "bash")), results(("z", big(40, "z")))]
        b.prepare(more, now=800)
        texts["z"] = big(40, "z")
    (log,) = list((tmp_path / "s").rglob("*.jsonl"))
    records = [json.loads(line) for line in log.read_text().splitlines()]
    decisions = [r for r in records if r.get("t") == "d"]
    assert {d["kind"] for d in decisions} >= {"trimmed"}
    for d in decisions:
        assert d["h"] == ref_for(texts[d["id"]]), d
