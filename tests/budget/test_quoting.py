"""What quotes a result's line (``budget._quoting``): the rule the policy learns by and the bench
charges read-backs by, on the numbered views real agents produce."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from benchmarks.readbacks import quotable_lines
from budget._quoting import MIN_QUOTE_CHARS, quotable, without_gutter

CODE = "        return self._store.get(ref, default=None)  # read it"
"""A line of code long enough to quote."""


def test_claude_code_read_lines_are_quoted_without_their_numbers() -> None:
    """Claude Code's ``Read`` view (``%6d→``) gives the code, as an edit's old text quotes it."""
    view = f"     1→import os\n    12→{CODE}\n"
    assert list(quotable(view)) == [CODE.strip()]


def test_cat_n_nl_and_editor_views_after_a_header_are_quoted_without_their_numbers() -> None:
    """A tab-separated gutter (``cat -n``, ``nl -ba``, OpenHands' editor) after a header line."""
    view = f"Here's the result of running `cat -n` on /repo/x.py:\n   120\t{CODE}\n"
    assert CODE.strip() in set(quotable(view))
    assert without_gutter(f"  7\t{CODE}") == CODE


def test_numbers_that_are_no_gutter_stay() -> None:
    """A number inside a line, or one not followed by the arrow or a tab, is content."""
    text = "2024-01-01 12:30:00 INFO the service started on port 8080 for tenants"
    assert list(quotable(text)) == [text]
    assert without_gutter("total 12 files\tlisted") == "total 12 files\tlisted"


def test_the_bench_uses_the_same_rule() -> None:
    """The bench's quotable lines are the library's: one rule, not two."""
    view = f"     3→{CODE}\nshort\n"
    assert quotable_lines(view) == set(quotable(view)) == {CODE.strip()}


@given(st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=300))
def test_quotable_lines_are_the_long_stripped_lines_without_a_gutter(text: str) -> None:
    """The quotable lines are exactly the stripped lines of the text without its gutters that
    are long enough."""
    lines = [line.strip() for line in without_gutter(text).splitlines()]
    assert list(quotable(text)) == [line for line in lines if len(line) >= MIN_QUOTE_CHARS]
