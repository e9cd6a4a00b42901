"""The format cases under tests/fixtures/formats: each history gives exactly its recorded copies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.format_fixtures import Case, expand, load_cases, observed, run

CASES = load_cases()


def test_every_format_has_cases() -> None:
    """Each built-in format has at least three data cases (a format without any is a gap)."""
    per_format = {f: sum(c.format == f for c in CASES) for f in {c.format for c in CASES}}
    assert set(per_format) == {"anthropic", "openai_chat", "openai_responses"}
    assert min(per_format.values()) >= 3, per_format


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_format_case(case: Case, tmp_path: Path) -> None:
    """The request copies, decisions and report counts are the ones recorded in the case file."""
    for n, (request, (sent, prepared)) in enumerate(
        zip(case.data["requests"], run(case, tmp_path), strict=True)
    ):
        got = observed(sent, prepared)
        want_copy: list[Any] = request["copy"]
        assert len(got["copy"]) == len(want_copy), f"request {n}"
        for i, (mine, theirs) in enumerate(zip(got["copy"], want_copy, strict=True)):
            if isinstance(theirs, dict) and set(theirs) == {"$same"}:
                assert mine == theirs, f"request {n}: message {i} is not the caller's object"
            else:
                assert mine == expand(theirs), f"request {n}: message {i} differs"
        assert got["decisions"] == request["decisions"], f"request {n}"
        assert got["report"] == request["report"], f"request {n}"
