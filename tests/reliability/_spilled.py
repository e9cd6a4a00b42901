"""A session holding one spilled tool output, the starting point of the store-damage tests."""

from __future__ import annotations

from pathlib import Path

from budget import Budget, BudgetConfig
from spill import ref_for
from tests.strategies import assistant, results

__all__ = ["open_spilled"]


def open_spilled(path: Path, config: BudgetConfig, text: str) -> tuple[Budget, str]:
    """An open session at ``path`` that spilled ``text`` as one bash output; (session, its ref)."""
    session = Budget.open(path, config)
    msgs = [{"role": "user", "content": "go"}, assistant(("c", "bash")), results(("c", text))]
    ref = session.prepare(msgs, now=0).report.decisions[0].ref
    assert ref == ref_for(text)
    return session, ref
