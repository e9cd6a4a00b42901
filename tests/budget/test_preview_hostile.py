"""A hostile review of the preview shapes and the read-back selectors (issue 32): adversarial
inputs (huge and blank lines, lone surrogates, CRLF, outputs past the shaping window, broken
NDJSON, diff-looking text, repeated lines for the re-run diff), each defect found pinned by a
regression test, and properties that were missing: every line a preview shows sits under the
right line number, and what it shows and what it says it left out are every line once."""

from __future__ import annotations

import difflib
import json
import re
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import BudgetConfig
from budget._envelope import preview_shape
from budget._errors import InputError
from budget._readback import ReadBack, split_lines
from budget.previews import apply_delta, line_delta
from budget.previews._delta import _split_nl
from budget.previews._detect import is_md_separator
from budget.previews._jsonpath import parse_path, select
from budget.previews._shapes import WINDOW_CHARS
from spill import MemoryStore
from tests.budget.test_preview_properties import LINE_KINDS, json_values, texts

_BLOCK = re.compile(r"^--- lines? ([\d,]+)(?:–([\d,]+))? ---$")
_OLD_MD_SEP = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)+\|?\s*$")
"""The separator pattern the cell-by-cell check replaced (quadratic on blank runs)."""


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return lines


def _check_blocks(text: str, chars: int, tail_share: float) -> None:
    """Every block of a line-shaped preview shows the text's own lines under their numbers (a
    long line cut, saying so), within the budget; shown and left-out lines are each line once."""
    got = preview_shape(text, chars, tail_share=tail_share)
    if got.shape in ("json", "delta") or not text:
        return
    rows = got.body.split("\n")
    if got.shape == "diff":  # its index of files and hunks comes first, then numbered blocks
        rows = rows[next((i for i, row in enumerate(rows) if _BLOCK.match(row)), len(rows)) :]
    if rows and rows[0].startswith("--- characters"):
        return  # one overlong line cut by characters: no line numbers to check
    lines = _lines(text)
    shown: list[int] = []
    k = 0
    while k < len(rows):
        m = _BLOCK.match(rows[k])
        assert m is not None, f"row {k} is not under a block header: {rows[k][:60]!r}"
        a = int(m.group(1).replace(",", ""))
        b = int((m.group(2) or m.group(1)).replace(",", ""))
        for n, row in zip(range(a, b + 1), rows[k + 1 : k + 2 + b - a], strict=True):
            cut = re.fullmatch(r"(.*)… \[[\d,]+ more characters\]", row, re.S)
            assert row == lines[n - 1] or (cut and lines[n - 1].startswith(cut.group(1)))
        shown += range(a, b + 1)
        k += 2 + b - a
    left = [n for a, b in got.left_out for n in range(a, b + 1)]
    assert sorted(shown + left) == list(range(1, len(lines) + 1))
    # head + tail's block headers are not charged to its budget, as version 0's markers were
    # not (test_preview_properties checks its content); every other line shape's are.
    assert got.shape in ("head_tail", "head") or len(got.body) <= chars


@settings(max_examples=300, deadline=None)
@given(texts, st.integers(min_value=50, max_value=3_000), st.sampled_from([0.0, 0.5, 0.75]))
def test_every_shown_line_is_the_texts_line_under_its_number(
    text: str, chars: int, tail_share: float
) -> None:
    """Each numbered block of a preview shows exactly the text's lines of those numbers, and the
    shown lines with the left-out ranges cover every line once."""
    _check_blocks(text, chars, tail_share)


# Outputs past twice the shaping window are shaped from their first and last window: the line
# numbers of the last one are counted from the end.
long_texts = st.tuples(
    st.lists(st.one_of(LINE_KINDS, st.sampled_from(["ok", "1,2,3", "a\tb\tc", "x\r"])), min_size=1),
    st.sampled_from(["\n", "\r\n"]),
    st.booleans(),
).map(lambda t: _repeat(t[1].join(t[0]) + t[1], 2 * WINDOW_CHARS + 1, t[2]))


def _repeat(chunk: str, at_least: int, final_newline: bool) -> str:
    text = chunk * (at_least // len(chunk) + 1)
    return text if final_newline else text.removesuffix("\n") + "end"


@settings(max_examples=40, deadline=None)
@given(long_texts, st.integers(min_value=200, max_value=3_000))
def test_a_windowed_output_numbers_its_lines_as_the_whole_text(text: str, chars: int) -> None:
    """An output past twice the window (CRLF or not, final newline or not) still shows each
    line under its number in the whole text, within the budget."""
    _check_blocks(text, chars, 0.5)


def test_a_line_of_blanks_is_no_slow_table_check() -> None:
    """A markdown-looking output whose second line is 40,000 tabs and blanks is shaped at once
    (before: 32 s in the separator pattern's backtracking, on the request path)."""
    text = "| a | b |\n" + "\t " * 20_000 + "-\n" + "| 1 | 2 |\n" * 10
    started = time.perf_counter()
    preview_shape(text, 2_000, tail_share=0.5)
    assert time.perf_counter() - started < 1.0


@settings(max_examples=500)
@given(st.text(alphabet=" \t|:-x\u00a0", max_size=30))
def test_the_separator_check_agrees_with_the_pattern_it_replaced(line: str) -> None:
    """On short lines (where backtracking is cheap) the cell-by-cell separator check says what
    the old pattern said."""
    assert is_md_separator(line) == (_OLD_MD_SEP.match(line) is not None)


def _difflib_delta(old: str, new: str) -> str:
    """Version 1's diff as it was built before the work bound: difflib's opcodes."""
    a, b = _split_nl(old), _split_nl(new)
    out: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        out.append(
            f"@@ -{i1 + 1 if i2 > i1 else i1},{i2 - i1} +{j1 + 1 if j2 > j1 else j1},{j2 - j1} @@"
        )
        for mark, part in (("-", a[i1:i2]), ("+", b[j1:j2])):
            for line in part:
                out.append(mark + line.removesuffix("\n"))
                if not line.endswith("\n"):
                    out.append("\\ No newline at end of file")
    return "\n".join(out)


small_lines = st.lists(
    st.sampled_from(["a", "b", "c", "", "a b", "\r", "@@ -1 +1 @@"]), max_size=60
)


@settings(max_examples=300)
@given(small_lines, small_lines)
def test_the_bounded_diff_is_difflibs_line_for_line(old: list[str], new: list[str]) -> None:
    """Below the work bound the re-run diff is the one version 1 built with difflib (the same
    bytes after the fix), and it applies back to the new text."""
    a, b = "\n".join(old), "\n".join(new)
    got = line_delta(a, b)
    assert got == _difflib_delta(a, b)
    assert apply_delta(a, got) == b


@pytest.mark.parametrize("lines", [10_000, 40_000])
def test_a_repetitive_rerun_is_no_stall(lines: int) -> None:
    """A re-run of a long log of two alternating lines with three lines changed gives its diff
    or none at once (before: 5 s at 10,000 lines, 85 s at 40,000, in difflib's matcher)."""
    old = "".join("ok\n" if i % 2 else "PASSED\n" for i in range(lines))
    new = old.replace("PASSED\n", "FAILED\n", 3)
    started = time.perf_counter()
    got = line_delta(old, new, limit=1_000)
    assert time.perf_counter() - started < 2.0
    assert got is None or apply_delta(old, got) == new


def test_the_work_bound_still_diffs_a_long_log_of_distinct_lines() -> None:
    """The bound refuses only repeated-line work: 100,000 distinct lines with the first and the
    last changed still give their two-hunk diff."""
    old = "".join(f"test_{i} PASSED\n" for i in range(100_000))
    new = "started 12:00\n" + old.replace("test_99999 PASSED", "test_99999 FAILED")
    got = line_delta(old, new, limit=1_000)
    assert got is not None and got.count("@@ ") == 2 and apply_delta(old, got) == new


def _paths(value: Any, at: str = "$") -> list[tuple[str, Any]]:
    """Every (path, value) of ``value`` in the read-back's path syntax."""
    out = [(at, value)]
    if isinstance(value, dict):
        for k, v in value.items():
            step = f".{k}" if re.fullmatch(r"[A-Za-z_$][\w$-]*", k) else f"[{json.dumps(k)}]"
            out += _paths(v, at + step)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, f"{at}[{i}]")
    return out


@settings(max_examples=200)
@given(json_values, st.sampled_from(["\n", "\r\n"]), st.booleans())
def test_every_json_path_selects_its_value(value: Any, newline: str, indent: bool) -> None:
    """Any value of any JSON document (indented or not, LF or CRLF) is what its path selects."""
    text = json.dumps(value, indent=1 if indent else None).replace("\n", newline)
    for path, sub in _paths(value)[:50]:
        if len(path) <= 500:
            assert select(text, path) == sub


def _reader(text: str) -> tuple[ReadBack, str]:
    store = MemoryStore()
    return ReadBack(store, BudgetConfig()), store.put(text)


def test_a_json_path_into_ndjson_with_a_broken_line_names_that_line() -> None:
    """A path into NDJSON whose third line is cut says which line is not JSON (before: "this
    output is not JSON", as if no line were)."""
    rb, ref = _reader('{"a": 1}\n{"a": 2}\n{"a": \n{"a": 4}\n')
    got = rb.result({"ref": ref, "path": "$[1].a"})
    assert got.is_error and "line 3 is not JSON" in got.text and "offset=2" in got.text


def test_a_path_into_prose_is_still_not_json() -> None:
    """Text that is neither JSON nor NDJSON keeps its plain refusal."""
    rb, ref = _reader("hello\nworld\n")
    got = rb.result({"ref": ref, "path": "$[0]"})
    assert got.is_error and "this output is not JSON" in got.text


@pytest.mark.parametrize("grep", ["x$", "^FAIL x$", "(?:x|y)$"])
def test_grep_anchors_match_at_the_end_of_a_crlf_line(grep: str) -> None:
    """``$`` matches at the end of a CRLF line's text (before: nothing matched, the ``\\r`` sat
    before every ``\\n``), in a run of lines and alone."""
    rb, ref = _reader("a\r\nFAIL x\r\nb\r\n" + "pad\r\n" * 5_000 + "FAIL x\r\n")
    chosen, total = rb.lines(ref, grep=grep)
    assert [n for n, _ in chosen] == [2, 5_004] and total == 2


@settings(max_examples=200)
@given(
    # No line ending in "\r": joined with LF it would end "\r\n", a CRLF line of its own.
    st.lists(st.sampled_from(["FAIL x", "x", "", "ok", "a\rx", "\rx"]), min_size=1, max_size=30),
    st.sampled_from(["x$", "^x", "^$", "FAIL", "x\\r?$", "."]),
)
def test_grep_finds_the_same_lines_in_crlf_and_lf_output(lines: list[str], grep: str) -> None:
    """The same lines joined with CRLF or with LF give the same matching line numbers."""
    lf, crlf = _reader("\n".join(lines) + "\n"), _reader("\r\n".join(lines) + "\r\n")
    got_lf = [n for n, _ in lf[0].lines(lf[1], grep=grep)[0]]
    got_crlf = [n for n, _ in crlf[0].lines(crlf[1], grep=grep)[0]]
    assert got_lf == got_crlf
    assert len(split_lines("\r\n".join(lines) + "\r\n")) == len(lines)


def test_a_path_of_backslashes_is_refused_at_once() -> None:
    """``$["`` then 497 backslashes and no closing quote is refused at once (before: the step
    pattern read a run of backslashes in 2**n ways, twice as long for every two more)."""
    started = time.perf_counter()
    with pytest.raises(InputError, match="not understood at character 2"):
        parse_path('$["' + "\\" * 497 + "x")
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize(
    ("path", "key"),
    [
        ('$["a\\u001fb"]', "a\x1fb"),
        ('$["line\\nbreak"]', "line\nbreak"),
        ('$["tab\\there"]', "tab\there"),
        ('$["\\ud83d\\ude00"]', "\U0001f600"),
        ("$['it\\'s']", "it's"),
        ('$["back\\\\slash"]', "back\\slash"),
        ('$["raw\nnewline"]', "raw\nnewline"),
    ],
)
def test_a_quoted_key_reads_its_escapes_as_json_does(path: str, key: str) -> None:
    """A quoted key's ``\\uXXXX``, ``\\n``, ``\\t``, surrogate pairs and a raw newline select the
    key JSON means (before: ``\\u001f`` looked up ``u001f``; a newline was not understood)."""
    assert parse_path(path) == (key,)
    assert select(json.dumps({key: 7}), path) == 7
