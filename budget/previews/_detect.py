"""Which shape a text's preview takes, chosen from its content alone (deterministic).

The order of the checks matters: a diff of a test file holds failure words, a JSON document may
hold a traceback in a string, so diffs and JSON are recognised before error output; a numbered
file read (``cat -n``, an editor's read tool) is shown as head + tail whatever its lines say.

The error patterns are the line formats each tool documents or prints (pytest's summary and
``E`` lines, unittest's ``FAIL:``/``Ran N tests``, cargo's ``error[E…]:``/``test result:``,
go test's ``--- FAIL:``, jest's ``●``/``Tests:``, Maven's ``[ERROR]``/``Tests run:``, tsc's
``error TS…``, the GCC/Clang/javac ``file:line: error:`` form, Python tracebacks); none is tuned
to particular recorded files.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Final, Literal

__all__ = ["FAILURE", "SUMMARY", "Shape", "detect", "is_failure", "is_summary"]

Shape = Literal["errors", "json", "ndjson", "table", "diff", "head_tail"]

SUMMARY: Final = re.compile(
    r"^(?:"
    r"=+ .*\b(?:passed|failed|errors?|error in|skipped|xfailed|deselected|no tests ran)\b.* =+"  # pytest
    r"|=+ short test summary info =+"
    r"|(?:FAILED|ERROR) \S+.*"  # pytest short summary rows
    r"|Ran \d+ tests? in [\d.]+s"  # unittest
    r"|FAILED \((?:failures|errors)=\d+.*\)"
    r"|test result: (?:ok|FAILED)\..*"  # cargo
    r"|error: (?:could not compile|aborting due to).*|error: test failed.*"
    r"|(?:FAIL|ok)\s+\S+\s+[\d.]+s|FAIL"  # go test
    r"|Tests?:\s+.*\b(?:failed|passed|total)\b.*|Test Suites:\s+.*"  # jest
    r"|\[(?:ERROR|INFO)\] (?:BUILD FAILURE|BUILD SUCCESS|Tests run:.*|Failed to execute goal.*)"  # mvn
    r"|Tests run: \d+, Failures: \d+.*"
    r"|Found \d+ errors?.*"  # tsc
    r"|\d+ (?:errors?|warnings?)(?: and \d+ (?:errors?|warnings?))? generated\."  # clang
    r"|\d+ (?:errors?|warnings?)"  # javac
    r"|npm ERR! (?:code|Test failed).*|npm error (?:code|Test failed).*"
    r"|make(?:\[\d+\])?: \*\*\*.*"
    r")\s*$"
)
"""Lines that sum a run up: counts of passed and failed, the verdict."""

FAILURE: Final = re.compile(
    r"^(?:"
    r"_{3,} .+ _{3,}|E {2,}\S.*|=+ (?:FAILURES|ERRORS) =+"  # pytest
    r"|(?:FAIL|ERROR): \S+.*"  # unittest
    r"|Traceback \(most recent call last\):"
    r"|(?:[\w.]+\.)?\w*(?:Error|Exception|Exit|Interrupt)(?:: .*)?"  # a traceback's last line
    r"|error(?:\[E\d+\])?: .+|warning: .+"  # cargo, rustc, generic
    r"|thread '.*' panicked at .*|---- \S+ stdout ----"
    r"|test \S+ \.\.\. FAILED"
    r"|--- FAIL: .+|panic: .+"  # go test
    r"|\s*● .+|FAIL \S+.*|\s*✕ .+"  # jest
    r"|\[ERROR\] .+"  # mvn
    r"|.+\(\d+,\d+\): error TS\d+: .+|.+:\d+:\d+ - error TS\d+: .+"  # tsc
    r"|.+?:\d+(?::\d+)?: (?:fatal error|error|warning): .+"  # gcc, clang, javac
    r"|npm ERR! .+|npm error .+"
    r")\s*$"
)
"""Lines that start or name one failure, error or warning."""

_NUMBERED: Final = re.compile(r"^\s*\d+(?:→|\t|: |\| )")
"""A line of a numbered file read (``cat -n``, an agent's read tool with line numbers)."""
_DIFF_START: Final = re.compile(r"^(?:diff --git |diff -\S+ |Index: |--- \S)")
_HUNK: Final = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")
_MD_SEP: Final = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)+\|?\s*$")
_ALIGNED: Final = re.compile(r"\S(?: {2,}|\t)(?=\S)")

MIN_LINES: Final = 5
"""Fewer lines than this are not a table or error log worth shaping: head + tail shows them."""
SHARE: Final = 0.8
"""Share of the (non-blank) lines that must fit a table's column pattern."""


def is_summary(line: str) -> bool:
    """Whether ``line`` sums a test or build run up."""
    return SUMMARY.match(line) is not None


def is_failure(line: str) -> bool:
    """Whether ``line`` starts or names one failure, error or warning."""
    return FAILURE.match(line) is not None


def _is_json(text: str) -> bool:
    head = text.lstrip()[:1]
    if head not in ("{", "["):
        return False
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _is_ndjson(lines: Sequence[str]) -> bool:
    rows = [line for line in lines if line.strip()]
    if len(rows) < 2:
        return False
    for line in rows:
        if line.lstrip()[:1] not in ("{", "["):
            return False
        try:
            json.loads(line)
        except ValueError:
            return False
    return True


def _is_diff(lines: Sequence[str]) -> bool:
    starts = sum(1 for line in lines if _DIFF_START.match(line))
    hunks = sum(1 for line in lines if _HUNK.match(line))
    return starts >= 1 and hunks >= 1


def _delimited(rows: Sequence[str], sep: str) -> bool:
    counts = [row.count(sep) for row in rows]
    first = counts[0]
    if first < 1:
        return False
    return sum(1 for c in counts if c == first) >= SHARE * len(rows)


def _tsv(lines: Sequence[str]) -> bool:
    """Tab-separated columns: the same two or more tabs on most lines (a numbered file read
    has one tab a line, then whatever tabs its own lines hold)."""
    rows = [line for line in lines if line.strip()]
    return len(rows) >= MIN_LINES and rows[0].count("\t") >= 2 and _delimited(rows, "\t")


def _is_table(lines: Sequence[str]) -> bool:
    rows = [line for line in lines if line.strip()]
    if len(rows) < MIN_LINES:
        return False
    if len(rows) > 1 and _MD_SEP.match(rows[1]) and rows[0].lstrip().startswith("|"):
        return True
    if _delimited(rows, "\t") or (_delimited(rows, ",") and rows[0].count(",") >= 2):
        return True
    # Aligned columns (``ls -l``, ``ps``, ``docker ps``): the same number of wide gaps per line.
    gaps = [len(_ALIGNED.findall(row.strip())) for row in rows]
    return gaps[0] >= 2 and sum(1 for g in gaps if g == gaps[0]) >= SHARE * len(rows)


ERROR_EVIDENCE: Final = 2
"""Failure or summary lines an output needs to be shown as error output: one alone (a lone
``OK``, one ``warning:`` in a long log) is too weak a sign to move its head out of the preview."""


def _error_lines(lines: Sequence[str]) -> int:
    n = 0
    for line in lines:
        if is_failure(line) or is_summary(line):
            n += 1
            if n >= ERROR_EVIDENCE:
                break
    return n


def detect(text: str, lines: Sequence[str] | None = None) -> Shape:
    """The shape of ``text``'s preview (``lines``: ``text.split("\\n")`` when already split)."""
    lines = text.split("\n") if lines is None else lines
    numbered = sum(1 for line in lines[:200] if _NUMBERED.match(line))
    if numbered >= SHARE * min(len(lines), 200) and not _tsv(lines):
        return "head_tail"
    if _is_diff(lines):
        return "diff"
    if _is_json(text):
        return "json"
    if _is_ndjson(lines):
        return "ndjson"
    if _error_lines(lines) >= ERROR_EVIDENCE:
        return "errors"
    if _is_table(lines):
        return "table"
    return "head_tail"
