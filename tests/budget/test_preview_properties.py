"""Hypothesis properties of the preview shapes (issue 32): a JSON skeleton parses, a delta
applied to the earlier text gives the new text exactly, every shape fits its budget, and the
same input gives the same bytes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from budget._envelope import envelope, preview_shape
from budget.previews import Earlier, apply_delta, line_delta, shape_preview, skeleton_text
from budget.previews._detect import (
    _ALIGNED,
    _NUMBERED,
    FAILURE,
    MAX_MARK_CHARS,
    MIN_LINES,
    SAMPLE_ROWS,
    SHARE,
    SUMMARY,
    _candidates,
    _delimited,
    _is_failure,
    _is_table,
    _numbered,
    marks,
)
from budget.previews._json import LADDER

_HEADER = re.compile(
    r"^--- (?:preview: .*|lines? [\d,–]+|characters [\d,–]+|files and hunks .*) ---$"
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=300),
    lambda inner: (
        st.lists(inner, max_size=12) | st.dictionaries(st.text(max_size=12), inner, max_size=8)
    ),
    max_leaves=60,
)

LINE_KINDS = st.sampled_from(
    [
        "E       AssertionError: assert 1 == 2",
        "FAILED tests/test_x.py::test_y - boom",
        "===== 1 failed, 3 passed in 0.1s =====",
        "Traceback (most recent call last):",
        "ValueError: bad",
        "main.c:3:1: error: expected ';'",
        "id,name,score",
        "diff --git a/x b/x",
        "@@ -1,2 +1,3 @@",
        "+added line",
        "-removed line",
        '{"k": 1, "v": "x"}',
        "",
        "x" * 700,
    ]
)
texts = st.one_of(
    st.lists(
        st.one_of(LINE_KINDS, st.text(max_size=80).map(lambda s: s.replace("\n", " "))),
        min_size=1,
        max_size=400,
    ).map("\n".join),
    json_values.map(json.dumps),
    st.text(max_size=3_000),
)


@given(json_values)
def test_every_json_skeleton_parses(value: Any) -> None:
    """At every rung of the ladder, the skeleton of any JSON value is valid JSON."""
    for lim in LADDER:
        json.loads(skeleton_text(value, lim))


@settings(max_examples=200)
@given(json_values, st.integers(min_value=100, max_value=3_000))
def test_a_json_preview_is_valid_json_within_its_budget(value: Any, chars: int) -> None:
    """When a document is shown as a skeleton, the skeleton parses and fits the budget."""
    text = json.dumps(value)
    got = shape_preview(text, chars, tail_share=0.5, shape="json")
    if got is not None:
        json.loads(got.body)
        assert len(got.body) <= chars


lines = st.lists(st.sampled_from(["a", "b", "c", "", "a b", "\r", "c\r"]), max_size=40)


@given(lines, lines, st.booleans(), st.booleans())
def test_a_delta_applied_to_the_earlier_text_gives_the_new_text(
    old: list[str], new: list[str], old_nl: bool, new_nl: bool
) -> None:
    """apply_delta(old, line_delta(old, new)) == new, with or without final newlines."""
    a = "\n".join(old) + ("\n" if old_nl and old else "")
    b = "\n".join(new) + ("\n" if new_nl and new else "")
    assert apply_delta(a, line_delta(a, b) or "") == b


@given(st.text(max_size=500), st.text(max_size=500))
def test_a_delta_of_any_texts_round_trips(a: str, b: str) -> None:
    """Arbitrary texts (any characters, lone newlines, no final newline) round-trip too."""
    assert apply_delta(a, line_delta(a, b) or "") == b


def _content(body: str) -> int:
    """Characters of the body's shown lines, without the preview's own marker lines (and the
    newline each block's header takes, which version 0's marker lines took too)."""
    rows = body.split("\n")
    headers = sum(1 for line in rows if _HEADER.match(line))
    return len(body) - sum(len(line) for line in rows if _HEADER.match(line)) - 2 * headers


@settings(max_examples=300)
@given(texts, st.integers(min_value=50, max_value=3_000), st.sampled_from([0.0, 0.5, 0.75]))
def test_every_shape_fits_its_budget(text: str, chars: int, tail_share: float) -> None:
    """Whatever the shape, the preview's shown content is at most the budget; a line shape's
    whole body (its block headers included) is too."""
    got = preview_shape(text, chars, tail_share=tail_share)
    assert _content(got.body) <= chars
    line_shaped = shape_preview(text, chars, tail_share=tail_share)
    if line_shaped is not None:
        assert len(line_shaped.body) <= chars


@settings(max_examples=150)
@given(texts, texts, st.integers(min_value=200, max_value=3_000))
def test_a_delta_preview_fits_its_budget(old: str, new: str, chars: int) -> None:
    """A re-run's preview (its diff, then its own preview) shows at most the budget."""
    got = preview_shape(new, chars, tail_share=0.5, earlier=Earlier("1" * 32, old))
    assert _content(got.body) <= chars


@settings(max_examples=150)
@given(texts, st.integers(min_value=50, max_value=3_000), st.booleans())
def test_the_same_input_gives_the_same_bytes(text: str, chars: int, is_error: bool) -> None:
    """Two envelopes of the same text and settings are the same bytes (no state, no clock)."""

    def make() -> str:
        return envelope(
            text, ref="2" * 32, tool="bash", preview_chars=chars,
            tail_share=0.75 if is_error else 0.5, read_tool="read", version=1,
        )  # fmt: skip

    assert make() == make()


def _marks_by_brute_force(text: str) -> tuple[list[int], list[int]]:
    summary, failures = [], []
    for i, whole in enumerate(text.split("\n")):
        line = whole[:MAX_MARK_CHARS]
        if SUMMARY.match(line):
            summary.append(i)
        elif FAILURE.match(line):
            failures.append(i)
    return summary, failures


@settings(max_examples=300)
@given(
    st.lists(
        st.one_of(
            LINE_KINDS,
            st.text(max_size=60),
            st.sampled_from(
                ["İ", "ok\tpkg\t0.1s", "ok\x0cpkg 0.1s", "Test: 1 passed, 1 total", "E  x"]
            ),
        ),
        max_size=60,
    ).map("\n".join)
)
def test_the_keyword_scan_finds_every_line_the_patterns_match(text: str) -> None:
    """``marks`` (patterns tried only on lines holding a keyword) finds exactly the summary and
    failure lines that matching every line would."""
    assert marks(text) == _marks_by_brute_force(text)


_FAILURE_PIECES = st.sampled_from(
    [
        "src/a.ts(3,14): error TS2304: Cannot find name 'x'.",
        "src/a.ts:3:14 - error TS2304: Cannot find name 'x'.",
        "main.c:3:1: error: expected ';'",
        "main.c:3: warning: unused",
        "Foo.java:12: fatal error: boom",
        ": error: ",
        "error TS",
        ":12: warning: ",
        "x.c:1:2: error:",
        "ValueError: bad",
        "npm ERR! code 1",
        "  ",
        "\t",
        "(1,2)",
    ]
)


@settings(max_examples=500)
@given(st.lists(st.one_of(_FAILURE_PIECES, st.text(max_size=20)), max_size=6).map("".join))
def test_the_gated_failure_check_agrees_with_the_pattern(line: str) -> None:
    """The failure check that tries the backtracking forms only on lines holding their words
    gives the verdict of the one ``FAILURE`` pattern on every newline-free line."""
    line = line.replace("\n", " ")
    assert _is_failure(line) == (FAILURE.match(line) is not None)


@settings(max_examples=400)
@given(
    st.lists(
        st.sampled_from(
            ["error x", "FAILED y", "warn", "=== 1 passed ===", "e  x", "ok \tpkg", "plain", ""]
        )
        | st.text(alphabet="aeflnorw \t=", max_size=12),
        max_size=80,
    ).map("\n".join)
)
def test_the_candidate_lines_are_found_alike_in_dense_and_sparse_logs(text: str) -> None:
    """The line-start scan gives each candidate line once, in order, whether few or most lines
    are candidates, and ``marks`` on it finds what matching every line finds."""
    got = _candidates(text)
    assert got == sorted(set(got))
    assert marks(text) == _marks_by_brute_force(text)


@settings(max_examples=300)
@given(st.lists(st.sampled_from(["  12\tx", "3: y", "7| z", "x", "", "12→ a"]), max_size=260))
def test_the_numbered_check_stops_only_when_decided(lines: list[str]) -> None:
    """The numbered-read check, which stops once too many lines are not numbered, decides as
    counting every sampled line does."""
    numbered = sum(1 for line in lines[:SAMPLE_ROWS] if _NUMBERED.match(line))
    assert _numbered(lines) == (numbered >= SHARE * min(len(lines), SAMPLE_ROWS))


_MD_SEPARATOR_ROW = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)+\|?\s*$")
"""A markdown separator row, for the short rows sampled below (the module's own check is written
cell by cell elsewhere; on these rows the two agree)."""


def _table_counting_every_row(lines: list[str]) -> bool:
    """The table check as it was before the first row decided alone: every row's gaps counted."""
    rows = [line for line in lines[:SAMPLE_ROWS] if line.strip()]
    if len(rows) < MIN_LINES:
        return False
    if len(rows) > 1 and _MD_SEPARATOR_ROW.match(rows[1]) and rows[0].lstrip().startswith("|"):
        return True
    if _delimited(rows, "\t") or (_delimited(rows, ",") and rows[0].count(",") >= 2):
        return True
    gaps = [len(_ALIGNED.findall(row.strip())) for row in rows]
    return gaps[0] >= 2 and sum(1 for g in gaps if g == gaps[0]) >= SHARE * len(rows)


@settings(max_examples=300)
@given(
    st.lists(
        st.sampled_from(
            ["a  b  c", "a  b  c  d", "a\tb\tc", "a,b,c", "|a|b|", "|---|---|", "x y", "", "a  b"]
        ),
        max_size=30,
    )
)
def test_the_table_check_reads_the_first_row_first(rows: list[str]) -> None:
    """The table check that stops at a first row with fewer than two wide gaps decides as
    counting every row's gaps does."""
    assert _is_table(rows) == _table_counting_every_row(rows)


def test_the_same_input_gives_the_same_bytes_in_another_process(tmp_path: Path) -> None:
    """Two interpreters with different hash seeds build the same envelope bytes for each shape
    (no set or dict order, no clock leaks into a preview)."""
    script = tmp_path / "envelopes.py"
    script.write_text(
        "import hashlib, json\n"
        "from budget._envelope import envelope\n"
        "log = ''.join(f'step {i}\\\\n' for i in range(900)) + 'E   boom\\\\nFAILED x - boom\\\\n'\n"
        "texts = [log, json.dumps({'a': list(range(900)), 'b': {'c': 'x' * 900}}),\n"
        "         'h1,h2,h3\\\\n' + ''.join(f'{i},{i},{i}\\\\n' for i in range(900))]\n"
        "for t in texts:\n"
        "    e = envelope(t, ref='0' * 32, tool='t', preview_chars=600, tail_share=0.5,\n"
        "                 read_tool='r', version=1)\n"
        "    print(hashlib.sha256(e.encode()).hexdigest())\n"
    )
    outs = []
    for seed in ("1", "2"):
        env = {
            **os.environ,
            "PYTHONHASHSEED": seed,
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        }
        done = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, env=env, check=True
        )
        outs.append(done.stdout)
    assert outs[0] == outs[1] and len(outs[0].split()) == 3
