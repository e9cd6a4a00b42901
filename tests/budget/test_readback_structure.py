"""Read-back by structure (a JSON path, lines around a match) and forgiving arguments (issue 32
item 3, issue 34 item 8), through a real in-memory session and its read-back tool."""

from __future__ import annotations

import json
from typing import Any

import pytest

from budget import Budget, BudgetConfig
from budget._readback import ReadBack
from spill import MemoryStore
from tests.strategies import assistant, results

DOC: dict[str, Any] = {
    "items": [{"id": i, "name": f"item-{i}", "tags": ["a", "b"]} for i in range(200)],
    "total": 200,
    "odd key": {"x y": [1, 2, 3]},
}
LOG = "".join(f"step {i}: ok\n" if i != 120 else "step 120: FAILED badly\n" for i in range(300))


def spilled(text: str) -> tuple[Budget, str]:
    """A session that spilled ``text``, and its ref."""
    b = Budget.in_memory({"result_cap": 1_000, "preview_chars": 400})
    msgs = [{"role": "user", "content": "go"}, assistant(("c", "tool")), results(("c", text))]
    ref = b.prepare(msgs, now=0).report.decisions[0].ref
    assert ref is not None
    return b, ref


def test_numeric_strings_are_taken_for_integer_arguments() -> None:
    """{"offset": "3", "limit": "2"} reads the same page as {"offset": 3, "limit": 2}: models
    send numbers as strings (before: refused as "Input should be a valid integer")."""
    b, ref = spilled(LOG)
    as_strings = b.read_tool_result({"ref": ref, "offset": "3", "limit": " 2 "})
    as_ints = b.read_tool_result({"ref": ref, "offset": 3, "limit": 2})
    assert not as_strings.is_error
    assert as_strings.text == as_ints.text
    assert "step 3: ok" in as_strings.text and "step 5" not in as_strings.text


@pytest.mark.parametrize("bad", ["3.5", "-1", "three", "", "1" * 40])
def test_a_string_that_is_not_a_whole_number_is_still_refused(bad: str) -> None:
    """A numeric-looking string that is not a whole number (or is absurdly long) is an error
    naming the argument, not a guess."""
    b, ref = spilled(LOG)
    got = b.read_tool_result({"ref": ref, "offset": bad})
    assert got.is_error and "offset" in got.text


def test_a_bad_grep_pattern_quotes_only_the_users_pattern() -> None:
    """RE2's message for ``((`` names the pattern as the user wrote it (before: ``(?m)((``,
    the prefix the read-back adds)."""
    b, ref = spilled(LOG)
    got = b.read_tool_result({"ref": ref, "grep": "(("})
    assert got.is_error
    assert got.text == "Error: grep is not a valid regular expression: missing ): (("
    assert "(?m)" not in got.text


def test_a_json_path_reads_one_value() -> None:
    """``$.items[3].name`` reads that value; ``["odd key"]`` and negative indexes work too."""
    b, ref = spilled(json.dumps(DOC))
    got = b.read_tool_result({"ref": ref, "path": "$.items[3].name"})
    assert not got.is_error
    assert got.text.splitlines()[1].endswith('"item-3"')
    assert got.text.splitlines()[0].endswith("(the value at $.items[3].name): lines 1-1 of 1")
    whole = b.read_tool_result({"ref": ref, "path": "$.items[-1]", "limit": 100}).text
    body = "\n".join(line.split("\t", 1)[1] for line in whole.splitlines()[1:-1])
    assert json.loads(body) == DOC["items"][-1]
    odd = b.read_tool_result({"ref": ref, "path": '$["odd key"]["x y"][2]'}).text
    assert odd.splitlines()[1].endswith("\t3")


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("$.items[500]", "$.items has 200 items: no [500]"),
        ("$.nope", '$ has no key "nope" (its keys: items, total, odd key)'),
        ("$.total[0]", "$.total is a number, not an array"),
        ("items[0]", 'path must start with "$"'),
        ("$.items[*]", "is not understood at character 8"),
    ],
)
def test_a_json_path_that_selects_nothing_says_where_it_stops(path: str, says: str) -> None:
    """A path past the document is an error naming the step that fails and what is there."""
    b, ref = spilled(json.dumps(DOC))
    got = b.read_tool_result({"ref": ref, "path": path})
    assert got.is_error
    assert says in got.text


def test_a_json_path_on_ndjson_indexes_its_records() -> None:
    """An NDJSON output is read as the list of its records: ``$[2].id`` is the third's id."""
    text = "".join(json.dumps({"id": i, "v": "x" * 20}) + "\n" for i in range(100))
    b, ref = spilled(text)
    got = b.read_tool_result({"ref": ref, "path": "$[2].id"})
    assert got.text.splitlines()[1].endswith("\t2")


def test_a_path_on_text_that_is_not_json_is_refused() -> None:
    """A path needs a JSON (or NDJSON) output: on a log it is an error saying so."""
    b, ref = spilled(LOG)
    got = b.read_tool_result({"ref": ref, "path": "$.x"})
    assert got.is_error and "not JSON" in got.text


def test_context_shows_the_lines_around_each_match_once() -> None:
    """grep with context 2 shows lines 119-123 around the match on line 121, numbered as in the
    output; overlapping windows of two matches are not repeated."""
    b, ref = spilled(LOG)
    got = b.read_tool_result({"ref": ref, "grep": "FAILED", "context": "2"}).text
    numbers = [int(line.split("\t")[0]) for line in got.splitlines()[1:-1]]
    assert numbers == [119, 120, 121, 122, 123]
    both = b.read_tool_result({"ref": ref, "grep": "step 1[12]0:", "context": 3}).text
    nums = [int(line.split("\t")[0]) for line in both.splitlines()[1:-1]]
    assert nums == sorted(set(nums))
    assert nums == [*range(108, 115), *range(118, 125)]
    store = MemoryStore()
    stored = store.put(LOG)
    exact = ReadBack(store, BudgetConfig()).read(stored, grep="FAILED", context=1)
    assert exact == "step 119: ok\nstep 120: FAILED badly\nstep 121: ok\n"


def test_a_json_nested_deeper_than_python_reads_is_an_error_not_a_crash() -> None:
    """A path into JSON nested 100,000 deep gets an error saying so (before: RecursionError)."""
    b, ref = spilled("[" * 100_000 + "]" * 100_000)
    got = b.read_tool_result({"ref": ref, "path": "$[0]"})
    assert got.is_error and "nested too deeply" in got.text


def test_a_json_with_a_number_past_pythons_digit_limit_is_named_not_called_no_json() -> None:
    """A path into JSON holding a 5,000-digit number gets an error naming that number's length
    (it said the output was not JSON, which it is), and the lines still read back."""
    text = json.dumps({"items": [{"id": i, "v": "x" * 40} for i in range(1_000)]})
    text = text[:-1] + ', "big": ' + "9" * 5_000 + "}"
    b, ref = spilled(text)
    got = b.read_tool_result({"ref": ref, "path": "$.items[0]"})
    assert got.is_error and "more than 4,300 digits" in got.text and "not JSON" not in got.text
    assert b.read(ref) == text


def test_a_page_smaller_than_a_line_number_still_shows_the_line() -> None:
    """With ``read_page_chars`` under a numbered row's prefix, a page shows a character of its
    line (it showed the line number alone, so no call could read any text)."""
    b = Budget.in_memory({"result_cap": 1_000, "preview_chars": 400, "read_page_chars": 3})
    msgs = [{"role": "user", "content": "go"}, assistant(("c", "tool")), results(("c", LOG))]
    ref = b.prepare(msgs, now=0).report.decisions[0].ref
    page = b.read_tool_result({"ref": ref, "offset": 5}).text.splitlines()
    assert page[1].startswith("     6\ts")
    assert "[line 6 continues" in page[1]
