"""A trimmed decision is final (SPEC §3.4): no later decision replaces it, live or in the ledger."""

from __future__ import annotations

import copy
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


def test_a_trimmed_result_stays_its_stub_when_the_caller_later_edits_it(tmp_path: Path) -> None:
    """A host rewrites an old, already trimmed result: the request copy keeps the stub it showed.

    The edited result no longer matches its logged size, so the session decides it again (kept,
    it fits); that decision must not replace the trim, or the prefix the provider cached breaks
    and the model sees a text it was told was trimmed.
    """
    msgs = conversation([[big(40, f"r{r}")] for r in range(6)])
    with Budget.open(tmp_path / "s", SMALL) as b:
        b.prepare(msgs[:7], now=0)
        cold = b.prepare(msgs, now=400)
        assert cold.report.staleness_reason == "cold_cache"
        stub = tool_text(cold.messages[2])
        assert stub.startswith("[toolbudget] Old output of bash trimmed (560 characters")

        edited = copy.deepcopy(msgs)
        edited[2]["content"][0]["content"] = big(45, "r0")  # 630 characters instead of 560
        edited += [assistant(("z", "bash")), results(("z", "fine"))]
        after = b.prepare(edited, now=401)
        assert tool_text(after.messages[2]) == stub
        assert after.messages[: len(cold.messages)] == cold.messages

        edited += [assistant(("y", "bash")), results(("y", "fine"))]
        later = b.prepare(edited, now=402)
        assert tool_text(later.messages[2]) == stub
        assert b.read(ref_for(big(40, "r0"))) == big(40, "r0")  # the original is still there


def test_the_ledger_keeps_a_trim_over_any_later_decision() -> None:
    """Recording kept or spilled after trimmed leaves the trimmed decision in place."""
    text = big(300)
    ref = ref_for(text)
    trimmed = Decision("c1", "trimmed", "cold_cache", len(text), text="stub", ref=ref)
    ledger = Ledger([Decision("c1", "kept", "fits", len(text))])
    ledger.record(trimmed)
    ledger.record(Decision("c1", "kept", "fits", 10))
    ledger.record(Decision("c1", "spilled", "cap", len(text), text="envelope", ref=ref))
    assert ledger.get("c1") == trimmed
    assert list(ledger) == [trimmed]
