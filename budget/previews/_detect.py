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
from itertools import filterfalse, islice
from typing import Any, Final, Literal

import orjson

__all__ = [
    "FAILURE",
    "SUMMARY",
    "Shape",
    "classify",
    "detect",
    "is_failure",
    "is_md_separator",
    "is_summary",
    "marks",
]

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
    r"|(?:Exit code|exit code|exit status|Process exited with code) [1-9]\d*"  # a failed command
    r")\s*$"
)
"""Lines that sum a run up: counts of passed and failed, the verdict."""

_FAILURE_PLAIN: Final = (
    r"_{3,} .+ _{3,}|E {2,}\S.*|=+ (?:FAILURES|ERRORS) =+"  # pytest
    r"|(?:FAIL|ERROR): \S+.*"  # unittest
    r"|Traceback \(most recent call last\):"
    r"|(?:[\w.]+\.)?\w*(?:Error|Exception|Exit|Interrupt)(?:: .*)?"  # a traceback's last line
    r"|error(?:\[E\d+\])?: .+|warning: .+"  # cargo, rustc, generic
    r"|thread '.*' panicked at .*|---- \S+ stdout ----"
    r"|test \S+ \.\.\. FAILED"
    r"|--- FAIL: .+|panic: .+"  # go test
    r"|\s*● .+|FAIL \S+.*|\s*✕ .+"  # jest
    r"|\s*× .+"  # miette-style reports (uv, pnpm)
    r"|\[ERROR\] .+"  # mvn
)
_FAILURE_TS: Final = r".+\(\d+,\d+\): error TS\d+: .+|.+:\d+:\d+ - error TS\d+: .+"  # tsc
_FAILURE_CC: Final = r".+?:\d+(?::\d+)?: (?:fatal error|error|warning): .+"  # gcc, clang, javac
_FAILURE_NPM: Final = r"npm ERR! .+|npm error .+"
FAILURE: Final = re.compile(
    rf"^(?:{_FAILURE_PLAIN}|{_FAILURE_TS}|{_FAILURE_CC}|{_FAILURE_NPM})\s*$"
)
"""Lines that start or name one failure, error or warning."""

_FAILURE_CHEAP: Final = re.compile(rf"^(?:{_FAILURE_PLAIN}|{_FAILURE_NPM})\s*$")
_FAILURE_TS_RE: Final = re.compile(rf"^(?:{_FAILURE_TS})\s*$")
_FAILURE_CC_RE: Final = re.compile(rf"^(?:{_FAILURE_CC})\s*$")
""":data:`FAILURE` in three parts, the same lines in all (a line matches an alternation followed
by ``\\s*$`` exactly when it matches one alternative followed by it): the tsc and compiler forms
start with ``.+`` and backtrack over the whole line, so they are tried only on the lines holding
the words each one requires (``error TS``; ``: error: ``, ``: warning: `` or ``: fatal error: ``)."""


def _is_failure(line: str) -> bool:
    """:data:`FAILURE`'s verdict on ``line`` (it holds no newline), its costly forms gated."""
    if _FAILURE_CHEAP.match(line) is not None:
        return True
    if "error TS" in line and _FAILURE_TS_RE.match(line) is not None:
        return True
    return (
        ": error: " in line or ": warning: " in line or ": fatal error: " in line
    ) and _FAILURE_CC_RE.match(line) is not None


_LINE_HEADS: Final = (
    r"=+ |___|E  |FAIL|ERROR|Ran |test |Test:|Tests:|Test Suites:|Tests run: |ok|error|warning: "
    r"|exit code |exit status |Exit code |Process exited with code |\[|Found |npm |make|thread '"
    r"|---|panic: |Traceback|\d+ (?:error|warning)"
)
"""How every :data:`SUMMARY` or :data:`FAILURE` line starts, but for those named by
:data:`_RUN_END` and :data:`_ANYWHERE` (checked alternative by alternative: pytest's summaries
start with ``=+ ``, ``FAIL`` stands for ``FAILED``, ``FAIL:`` and a lone ``FAIL``, ``test `` for
cargo's ``test result:`` too). Case-sensitive, as the patterns are: a log whose every line says
``error`` somewhere (not ``error:`` at its start) has no candidate line."""
_HEAD_CHARS: Final = r"[=_EFRtToewP\[nmp\-\d]"
"""The first characters of :data:`_LINE_HEADS`: a line starting otherwise is passed over with one
class test, before the alternatives are tried one by one."""
_RUN_END: Final = r"(?:(?<=Error)|(?<=Exception)|(?<=Exit)|(?<=Interrupt))"
"""A traceback's last line (``ValueError: x``, ``KeyboardInterrupt``) is a run of word characters
and dots from the line's start that ends in one of these words (then ``: `` or the line's end)."""
MAX_MARK_CHARS: Final = 1_000
"""A line is matched against the patterns by its first this-many characters (a summary or a
failure says what it is at its start; a megabyte on one line must not cost a megabyte scan)."""
_CANDIDATE_BODY: Final = (
    # The first lookahead is the union of the two alternatives' first characters: a line
    # starting with a blank (most lines of a log or of source) fails at one class test.
    rf"(?=[\w.=\[\-])"
    rf"(?:(?={_HEAD_CHARS})(?:{_LINE_HEADS})|(?=[\w.])[\w.]{{0,{MAX_MARK_CHARS}}}+{_RUN_END})"
)
_FIRST_CANDIDATE: Final = re.compile(_CANDIDATE_BODY)
_NEXT_CANDIDATE: Final = re.compile("\n" + _CANDIDATE_BODY)
"""A line that may be a summary or failure line, matched at its start (but for
:data:`_ANYWHERE`'s forms): the first line, and each line after a newline (a pattern starting
with a literal newline is searched at C speed from one newline to the next). The run of a
traceback's last line is taken possessively (no backtracking) and only over the characters the
patterns read: a line of a megabyte of letters costs one pass over its first thousand."""
_ANYWHERE: Final = ("error TS", "●", "✕", "×")
_COMPILER: Final = re.compile(r": (?:error|warning|fatal error): ")
"""What the forms not tied to a line's start hold: tsc's and the compilers' ``file:line: error:``
(their ``.+`` starts anywhere), and jest's and miette's marks after any blanks (``\\s*●``, which
counts more characters as blanks than a line-start pattern could list cheaply). The compilers'
three words are one search (the literal ``: `` it starts with is scanned for at C speed: half the
time of three ``str.find`` scans of a log)."""
_NUMBERED: Final = re.compile(r"^\s*\d+(?:→|\t|: |\| )")
"""A line of a numbered file read (``cat -n``, an agent's read tool with line numbers)."""
_DIFF_START: Final = re.compile(r"^(?:diff --git |diff -\S+ |Index: |--- \S)", re.M)
_HUNK: Final = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@", re.M)
SAMPLE_ROWS: Final = 200
"""Rows a table or NDJSON check reads (the first ones, and the last for NDJSON): the check is
about the text's layout, which its first rows show; the cost stays flat for huge outputs."""
_MD_CELL: Final = re.compile(r"\s*:?-{3,}:?\s*")


def is_md_separator(line: str) -> bool:
    """Whether ``line`` is a markdown table's separator row (``|---|:--:|``): two or more cells
    of three or more dashes (a colon at either end allowed), between optional outer pipes.

    Cell by cell rather than one pattern: the pattern this replaces
    (``^\\s*\\|?\\s*:?-{3,}...``) backtracked over the ways to share a run of blanks between
    its ``\\s*`` terms, quadratic in the line (a line of 40,000 tabs and blanks took 32 s, on
    the request path); each cell here is matched once, in time linear in its length."""
    inner = line.strip()
    inner = inner.removeprefix("|").removesuffix("|")
    cells = inner.split("|")
    return len(cells) >= 2 and all(_MD_CELL.fullmatch(cell) for cell in cells)


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


JSON_CHARS: Final = 4_000_000
"""Longest document parsed for a skeleton (orjson parses at about 1 GB/s; longer documents get
head + tail rather than a parse whose cost grows with them)."""
_LEAD: Final = re.compile(r"\s*")


def _json_value(text: str) -> tuple[bool, Any]:
    """(whether ``text`` is one JSON document, its value)."""
    lead = _LEAD.match(text)
    at = lead.end() if lead is not None else 0
    if text[at : at + 1] not in ("{", "[") or len(text) > JSON_CHARS:
        return False, None
    try:
        return True, orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    try:  # what orjson refuses and the standard library reads (lone surrogates, huge ints)
        return True, json.loads(text)
    except (ValueError, RecursionError):
        return False, None


def _candidates(text: str) -> list[int]:
    """Sorted starts of the lines of ``text`` that may be :data:`SUMMARY` or :data:`FAILURE`
    lines: every line either matches; others too (a line starting ``ok`` or ``[``), which the
    patterns then refuse.

    One regex pass over the line starts (:data:`_NEXT_CANDIDATE`, found at C speed, each start
    tried against a class of first characters before anything else), a ``str.find`` scan for each
    of :data:`_ANYWHERE`'s words and a search for :data:`_COMPILER`'s. This replaced a scan for
    lowercased keywords (``err``, ``fail``...), which in a log that says ``error`` on most lines
    left every line to be matched: 200 us of the 8 kB spill's preview."""
    starts = {m.start() + 1 for m in _NEXT_CANDIDATE.finditer(text)}
    if _FIRST_CANDIDATE.match(text):
        starts.add(0)
    for word in _ANYWHERE:
        # A word's last character first: one character is found at memchr's speed (SIMD),
        # several at about 2 characters a ns (3.4 us for "error TS" over an 8 kB log).
        if word[-1] not in text:
            continue
        at = text.find(word)
        while at >= 0:
            starts.add(text.rfind("\n", 0, at) + 1)
            nl = text.find("\n", at + len(word))
            if nl < 0:
                break
            at = text.find(word, nl + 1)
    m = _COMPILER.search(text)
    while m is not None:
        at = m.start()
        starts.add(text.rfind("\n", 0, at) + 1)
        nl = text.find("\n", m.end())
        if nl < 0:
            break
        m = _COMPILER.search(text, nl + 1)
    return sorted(starts)


def marks(text: str, *, stop: int | None = None) -> tuple[list[int], list[int]]:
    """0-based indexes of ``text``'s summary lines and of its other failure lines (lines split
    at ``\\n``), found among the lines that may be either (:func:`_candidates`); ``stop``:
    return once that many are found."""
    summary: list[int] = []
    failures: list[int] = []
    line_no, pos = 0, 0
    for start in _candidates(text):
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


def _is_ndjson(lines: Sequence[str]) -> bool:
    sample = [*lines[:SAMPLE_ROWS], *lines[SAMPLE_ROWS:][-SAMPLE_ROWS // 4 :]]
    rows = []
    for line in sample:
        if line.strip():
            if line.lstrip()[:1] not in ("{", "["):
                return False  # a row that is no JSON decides before any row is parsed
            rows.append(line)
    if len(rows) < 2:
        return False
    for line in rows:
        try:
            json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than Python goes
            return False
    return True


_HUNK_LINE: Final = re.compile("\n@@ -")
"""A hunk header after the first line: a literal starting with a newline is searched for at C
speed from one newline to the next (twice as fast as ``"@@ -" in text`` on a log)."""


def _has_hunk_line(text: str) -> bool:
    """Whether a line of ``text`` starts with ``@@ -``, as every hunk header does."""
    # "@" alone is found at memchr's speed: most outputs hold none, and skip the search.
    return text.startswith("@@ -") or ("@" in text and _HUNK_LINE.search(text) is not None)


def _is_diff(text: str) -> bool:
    # Every hunk header starts a line with "@@ -": without one, neither pattern scans the text.
    return (
        _has_hunk_line(text)
        and _DIFF_START.search(text) is not None
        and _HUNK.search(text) is not None
    )


def _delimited(rows: Sequence[str], sep: str) -> bool:
    first = rows[0].count(sep)
    if first < 1:  # decided by the first row: the others are not counted
        return False
    return sum(1 for row in rows if row.count(sep) == first) >= SHARE * len(rows)


def _tsv(lines: Sequence[str]) -> bool:
    """Tab-separated columns: the same two or more tabs on most lines (a numbered file read
    has one tab a line, then whatever tabs its own lines hold)."""
    rows = [line for line in lines[:SAMPLE_ROWS] if line.strip()]
    return len(rows) >= MIN_LINES and rows[0].count("\t") >= 2 and _delimited(rows, "\t")


def _could_head_a_table(first: str) -> bool:
    """Whether ``first``, a text's first non-blank line, leaves any of :func:`_is_table`'s
    checks open: each is decided by its first row (a markdown row starts with ``|``; tabs or
    two commas; two wide gaps), so most outputs are refused without building the rows."""
    return (
        first.lstrip().startswith("|")
        or "\t" in first
        or first.count(",") >= 2
        or len(_ALIGNED.findall(first.strip())) >= 2
    )


def _is_table(lines: Sequence[str]) -> bool:
    head = next((line for line in lines[:SAMPLE_ROWS] if line.strip()), None)
    if head is None or not _could_head_a_table(head):
        return False
    rows = [line for line in lines[:SAMPLE_ROWS] if line.strip()]
    if len(rows) < MIN_LINES:
        return False
    if len(rows) > 1 and is_md_separator(rows[1]) and rows[0].lstrip().startswith("|"):
        return True
    if _delimited(rows, "\t") or (_delimited(rows, ",") and rows[0].count(",") >= 2):
        return True
    # Aligned columns (``ls -l``, ``ps``, ``docker ps``): the same number of wide gaps per line.
    first = len(_ALIGNED.findall(rows[0].strip()))
    if first < 2:  # decided by the first row: the others are not scanned
        return False
    return sum(1 for row in rows if len(_ALIGNED.findall(row.strip())) == first) >= SHARE * len(
        rows
    )


ERROR_EVIDENCE: Final = 2
"""Failure or summary lines an output needs to be shown as error output: one alone (a lone
``FAIL``, one ``warning:`` in a long log) is too weak a sign to move its head out of the preview."""


def _numbered(lines: Sequence[str]) -> bool:
    """Whether at least :data:`SHARE` of the first :data:`SAMPLE_ROWS` lines are numbered (a
    file read): the lines are matched in C, until the lines not numbered are too many for that."""
    rows = min(len(lines), SAMPLE_ROWS)
    need = SHARE * rows
    # The fewest lines not numbered that decide against (rows - misses < need).
    misses = max(int(rows - need), 0)
    while rows - misses >= need:
        misses += 1
    unnumbered = filterfalse(None, map(_NUMBERED.match, islice(lines, rows)))
    return next(islice(unnumbered, misses - 1, None), _NO_LINE) is _NO_LINE


_NO_LINE: Final = object()
"""What :func:`_numbered` finds when the lines not numbered are fewer than would decide."""


def classify(text: str, lines: Sequence[str], *, whole: str | None = None) -> tuple[Shape, Any]:
    """(the shape of ``text``'s preview, its JSON value when the shape is ``json``); ``text``
    may be the windows of a longer ``whole`` (the JSON check reads the whole document)."""
    if _numbered(lines) and not _tsv(lines):
        return "head_tail", None
    if _is_diff(text):
        return "diff", None
    is_json, value = _json_value(text if whole is None else whole)
    if is_json:
        return "json", value
    if _is_ndjson(lines):
        return "ndjson", None
    if sum(map(len, marks(text, stop=ERROR_EVIDENCE))) >= ERROR_EVIDENCE:
        return "errors", None
    if _is_table(lines):
        return "table", None
    return "head_tail", None


def detect(text: str, lines: Sequence[str] | None = None) -> Shape:
    """The shape of ``text``'s preview (``lines``: ``text.split("\\n")`` when already split)."""
    return classify(text, text.split("\n") if lines is None else lines)[0]
