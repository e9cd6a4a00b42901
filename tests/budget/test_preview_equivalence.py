"""The preview code rewritten for speed gives the bytes the code it replaced gave: each replaced
function is kept here, as it was, and compared with the new one on arbitrary inputs."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import example, given, settings
from hypothesis import strategies as st

from budget.previews._detect import (
    _ALIGNED,
    _DIFF_START,
    _HUNK,
    FAILURE,
    MAX_MARK_CHARS,
    MIN_LINES,
    SAMPLE_ROWS,
    SHARE,
    SUMMARY,
    _candidates,
    _delimited,
    _is_diff,
    _is_failure,
    _is_table,
    is_md_separator,
    marks,
)
from tests._lanes import examples

# -- the keyword scan that marks() used before the line-start scan -------------------------------

_OLD_KEYWORDS = (
    "err", "fail", "warn", "exception", "exit", "interrupt", "traceback", "panic", "ran ",
    "test:", "tests:", "test suites:", "tests run:", "test result:", "build failure",
    "build success", "stdout ----", "___", "***", "●", "✕", "×", "\n=", "\ne  ", "\nok",
)  # fmt: skip


def _old_candidates(text: str) -> list[int]:
    low = text.lower()
    if len(low) != len(text):
        return [0, *(i + 1 for i, c in enumerate(text) if c == "\n")]
    lines = text.count("\n") + 1
    low = "\n" + low
    starts: set[int] = set()
    for n, word in enumerate(_OLD_KEYWORDS):
        at = low.find(word)
        while at >= 0:
            starts.add(text.rfind("\n", 0, max(at - 1, 0) + (word[0] == "\n")) + 1)
            nl = low.find("\n", at + 1)
            if nl < 0:
                break
            at = low.find(word, nl if word[0] == "\n" else nl + 1)
        if 2 * len(starts) > lines and n + 1 < len(_OLD_KEYWORDS):
            _old_lines_holding(low[1:], _OLD_KEYWORDS[n + 1 :], starts)
            break
    return sorted(starts)


def _old_lines_holding(low: str, words: Sequence[str], starts: set[int]) -> None:
    inner = tuple(w for w in words if w[0] != "\n")
    leading = tuple(w[1:] for w in words if w[0] == "\n")
    at = 0
    for line in low.split("\n"):
        if at not in starts and (line.startswith(leading) or any(w in line for w in inner)):
            starts.add(at)
        at += len(line) + 1


def _old_marks(text: str, *, stop: int | None = None) -> tuple[list[int], list[int]]:
    summary: list[int] = []
    failures: list[int] = []
    line_no, pos = 0, 0
    for start in _old_candidates(text):
        line_no += text.count("\n", pos, start)
        pos = start
        end = text.find("\n", start)
        line = text[start : start + MAX_MARK_CHARS] if end < 0 else text[start:end]
        line = line[:MAX_MARK_CHARS]
        if SUMMARY.match(line):
            summary.append(line_no)
        elif _is_failure(line):
            failures.append(line_no)
        else:
            continue
        if stop is not None and len(summary) + len(failures) >= stop:
            break
    return summary, failures


# -- inputs: lines built from the pieces every pattern reads, and anything else -------------------

_PIECES = st.sampled_from(
    [
        "=", "==== ", "=== 1 failed, 2 passed in 0.1s ===", "= short test summary info =",
        "___ t ___", "E  ", "E   assert 1", "FAIL", "FAILED", "FAIL:", "FAIL ", "FAILED (errors=1)",
        "ERROR", "ERROR: t", "ERROR t", "Ran 3 tests in 0.1s", "Ran 1 test in 2s",
        "test result: ok.", "test t ... FAILED", "test ", "error", "error:", "error: x",
        "error[E0308]: x", "error: could not compile", "error: test failed", "ok", "ok  \tpkg\t0.1s",
        "ok\x0cpkg 0.1s", "Test:", "Tests: 1 failed, 2 total", "Test Suites: 1 failed",
        "Tests run: 1, Failures: 0", "[ERROR] x", "[INFO] BUILD SUCCESS", "[INFO] Tests run: 1",
        "[ERROR] BUILD FAILURE", "Found 2 errors", "3 errors", "1 warning",
        "2 warnings and 1 error generated.", "٣ errors", "npm ERR! code 1", "npm error x",
        "make: *** x", "make[1]: *** y", "Exit code 1", "exit code 0", "exit status 2",
        "Process exited with code 3", "Traceback (most recent call last):", "ValueError",
        "ValueError: x", "a.b.CustomException", "KeyboardInterrupt", "SystemExit", "Exit",
        ".Error", "x.Error: y", "ÄError", "warning: x", "thread 'main' panicked at x",
        "---- t stdout ----", "--- FAIL: TestX", "panic: x", "  ● x", "● y", "\x0b✕ y",
        "× z", "\u00a0× w", "x.ts(1,2): error TS2304: y", "x.ts:1:2 - error TS1: y",
        "a.c:1:2: error: x", "a.c:1: warning: y", "a.c:3: fatal error: z", "İ", "K", " ", "\t",
        "  ", ":", ": ", ".", "_", "x" * 995, "x" * 1_000, "Error", "\r",
        # A traceback's last line whose run of word characters ends at, or past, the 1,000th
        # character (what the patterns read).
        "x" * 995 + "Error", "x" * 996 + "Error: y", "x" * 994 + "Exit",
    ]
)  # fmt: skip
_LINES = st.lists(
    st.lists(st.one_of(_PIECES, st.text(max_size=8)), max_size=5).map("".join), max_size=40
)
_TEXTS = st.one_of(
    st.tuples(_LINES, st.sampled_from(["\n", "\r\n"])).map(lambda t: t[1].join(t[0])),
    st.text(max_size=400),
)


@settings(max_examples=examples(1_000), deadline=None)
@given(_TEXTS, st.sampled_from([None, 1, 2, 3]))
def test_marks_finds_what_the_keyword_scan_found(text: str, stop: int | None) -> None:
    """``marks`` on the line-start scan gives the summary and failure lines (and stops at the
    same one) that it gave on the lowercased keyword scan it replaced."""
    assert marks(text, stop=stop) == _old_marks(text, stop=stop)


@settings(max_examples=examples(1_000), deadline=None)
@given(_TEXTS)
def test_every_line_the_patterns_match_is_a_candidate(text: str) -> None:
    """The line-start scan passes over no line the summary or failure pattern matches (on the
    first ``MAX_MARK_CHARS`` characters the patterns read)."""
    starts, at = set(_candidates(text)), 0
    for line in text.split("\n"):
        head = line[:MAX_MARK_CHARS]
        if SUMMARY.match(head) or FAILURE.match(head):
            assert at in starts, head[:80]
        at += len(line) + 1


# -- the table check before its first-row gate ----------------------------------------------------


def _old_is_table(lines: Sequence[str]) -> bool:
    rows = [line for line in lines[:SAMPLE_ROWS] if line.strip()]
    if len(rows) < MIN_LINES:
        return False
    if len(rows) > 1 and is_md_separator(rows[1]) and rows[0].lstrip().startswith("|"):
        return True
    if _delimited(rows, "\t") or (_delimited(rows, ",") and rows[0].count(",") >= 2):
        return True
    first = len(_ALIGNED.findall(rows[0].strip()))
    if first < 2:
        return False
    return sum(1 for row in rows if len(_ALIGNED.findall(row.strip())) == first) >= SHARE * len(
        rows
    )


_ROWS = st.sampled_from(
    [
        "| a | b |", "|---|:--:|", " | x | y | ", "|-|-|", "a\tb\tc", "1\t2", "\t", "a,b,c",
        "1,2", ",,", "x  y  z", "drwxr-xr-x  2 root  root  4096", "a\tb  c", "  ", "", "\u00a0",
        "plain line", "E   assert 1",
    ]
)  # fmt: skip
_ROW = st.one_of(
    _ROWS,
    st.lists(st.one_of(_ROWS, st.text(alphabet=" \t|,-:ab", max_size=6)), max_size=4).map("".join),
    st.text(max_size=20),
)
_TABLES = st.one_of(
    st.lists(_ROW, max_size=SAMPLE_ROWS + 20),
    # Mostly one row repeated (a table's body), with a few others before or among them.
    st.tuples(
        st.lists(_ROW, max_size=3),
        st.lists(_ROW, min_size=1, max_size=2),
        st.integers(MIN_LINES - 2, 60),
        st.lists(_ROW, max_size=4),
    ).map(lambda t: [*t[0], *(t[1] * t[2]), *t[3]]),
)


@settings(max_examples=examples(1_000), deadline=None)
@given(_TABLES)
@example(["", " | a | b |", "|---|---|", "| 1 | 2 |", "| 3 | 4 |", "| 5 | 6 |"])
@example(["name  size  date", "a.txt  10  today", "b.txt  20  today", "c  1  x", "d  2  y"])
def test_the_gated_table_check_agrees_with_the_full_one(lines: list[str]) -> None:
    """The table check that refuses an output by its first non-blank row when no check could
    pass says what building every row and checking them said."""
    assert _is_table(lines) == _old_is_table(lines)


# -- the diff check before its line-start gate ----------------------------------------------------


def _old_is_diff(text: str) -> bool:
    return (
        "@@ -" in text and _DIFF_START.search(text) is not None and _HUNK.search(text) is not None
    )


_DIFF_PIECES = st.sampled_from(
    ["diff --git a/x b/x", "diff -u a b", "Index: x", "--- a/x", "+++ b/x", "@@ -1,2 +1,3 @@",
     "@@ -1 +1 @@", " @@ -1 +1 @@", "x @@ -1", "@@ -", "@@", "+a", "-b", " c", "\r", ""]
)  # fmt: skip
_DIFFS = st.one_of(
    st.lists(st.lists(st.one_of(_DIFF_PIECES, st.text(max_size=5)), max_size=3).map("".join)).map(
        "\n".join
    ),
    st.text(max_size=60),
)


@settings(max_examples=examples(1_000), deadline=None)
@given(_DIFFS)
def test_the_diff_check_gated_on_line_starts_agrees_with_the_one_before(text: str) -> None:
    """Gated on a line starting with ``@@ -`` rather than on ``@@ -`` anywhere, the diff check
    says what it said: its hunk pattern needs such a line anyway."""
    assert _is_diff(text) == _old_is_diff(text)
