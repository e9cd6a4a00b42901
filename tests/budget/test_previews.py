"""Preview shapes (issue 32): each detector on hand-made output of every listed tool and on real
output from the shared traces, and what each shape's preview shows."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from budget import Budget, ToolPolicy
from budget._envelope import envelope
from budget.previews import detect, is_failure, shape_preview
from tests._shared import SharedTraces

REF = "0" * 32
NOISE = [f"collecting module_{i:03d}.py ... done" for i in range(300)]
"""Filler lines (a long build or test run's progress): 300 lines of 35 characters."""


def env(text: str, chars: int = 2_000, *, version: int = 1, is_error: bool = False) -> str:
    """The envelope a session with default settings shows for ``text``."""
    return envelope(
        text,
        ref=REF,
        tool="bash",
        preview_chars=chars,
        tail_share=0.75 if is_error else 0.5,
        read_tool="toolbudget_read",
        version=version,
    )


def buried(block: list[str], summary: list[str]) -> str:
    """``block`` (one failure) in the middle of 600 progress lines, ``summary`` at the end."""
    return "\n".join([*NOISE, *block, *NOISE, *summary]) + "\n"


# One sample per tool issue 32 lists: (failure block, summary, the line the preview must show).
SAMPLES: dict[str, tuple[list[str], list[str], str]] = {
    "pytest": (
        [
            "=================================== FAILURES ===================================",
            "_________________________________ test_parse __________________________________",
            "    def test_parse():",
            ">       assert parse('1') == 2",
            "E       AssertionError: assert 1 == 2",
            "tests/test_parse.py:4: AssertionError",
        ],
        [
            "=========================== short test summary info ============================",
            "FAILED tests/test_parse.py::test_parse - AssertionError: assert 1 == 2",
            "========================= 1 failed, 41 passed in 0.52s =========================",
        ],
        "E       AssertionError: assert 1 == 2",
    ),
    "unittest": (
        [
            "======================================================================",
            "FAIL: test_add (test_math.TestMath.test_add)",
            "----------------------------------------------------------------------",
            "Traceback (most recent call last):",
            '  File "/src/test_math.py", line 9, in test_add',
            "    self.assertEqual(add(1, 1), 3)",
            "AssertionError: 2 != 3",
        ],
        [
            "----------------------------------------------------------------------",
            "Ran 12 tests in 0.004s",
            "",
            "FAILED (failures=1)",
        ],
        "FAIL: test_add (test_math.TestMath.test_add)",
    ),
    "cargo build": (
        [
            "error[E0308]: mismatched types",
            "  --> src/main.rs:4:18",
            "   |",
            '4  |     let x: i32 = "five";',
            "   |            ---   ^^^^^^ expected `i32`, found `&str`",
        ],
        [
            "For more information about this error, try `rustc --explain E0308`.",
            'error: could not compile `demo` (bin "demo") due to 1 previous error',
        ],
        "error[E0308]: mismatched types",
    ),
    "cargo test": (
        [
            "test parser::tests::rejects_empty ... FAILED",
            "---- parser::tests::rejects_empty stdout ----",
            "thread 'parser::tests::rejects_empty' panicked at src/parser.rs:88:9:",
            'assertion failed: parse("").is_err()',
        ],
        [
            "failures:",
            "    parser::tests::rejects_empty",
            "test result: FAILED. 17 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out",
        ],
        "thread 'parser::tests::rejects_empty' panicked at src/parser.rs:88:9:",
    ),
    "go test": (
        [
            "--- FAIL: TestSplit (0.00s)",
            '    split_test.go:21: Split("a,b") = [a b c], want [a b]',
        ],
        ["FAIL", "FAIL\texample.com/split\t0.012s"],
        "--- FAIL: TestSplit (0.00s)",
    ),
    "jest": (
        [
            "FAIL src/sum.test.js",
            "  ● sum › adds two numbers",
            "    expect(received).toBe(expected) // Object.is equality",
            "    Expected: 4",
            "    Received: 5",
        ],
        [
            "Test Suites: 1 failed, 3 passed, 4 total",
            "Tests:       1 failed, 20 passed, 21 total",
        ],
        "● sum › adds two numbers",
    ),
    "npm": (
        ["npm ERR! code ELIFECYCLE", "npm ERR! errno 1", "npm ERR! demo@1.0.0 build: `tsc`"],
        ["npm ERR! Test failed.  See above for more details."],
        "npm ERR! code ELIFECYCLE",
    ),
    "mvn": (
        [
            "[ERROR] Tests run: 5, Failures: 1, Errors: 0, Skipped: 0, Time elapsed: 0.1 s",
            "[ERROR] com.example.AppTest.testApp  Time elapsed: 0.01 s  <<< FAILURE!",
            "java.lang.AssertionError: expected:<1> but was:<2>",
        ],
        [
            "[INFO] BUILD FAILURE",
            "[ERROR] Failed to execute goal org.apache.maven.plugins:maven-surefire-plugin:3.2.5",
        ],
        "[ERROR] com.example.AppTest.testApp  Time elapsed: 0.01 s  <<< FAILURE!",
    ),
    "tsc": (
        [
            "src/app.ts(12,7): error TS2322: Type 'string' is not assignable to type 'number'.",
            "src/util.ts:3:10 - error TS2304: Cannot find name 'foo'.",
        ],
        ["Found 2 errors in 2 files."],
        "src/app.ts(12,7): error TS2322: Type 'string' is not assignable to type 'number'.",
    ),
    "gcc": (
        [
            "main.c: In function 'main':",
            "main.c:5:12: error: 'y' undeclared (first use in this function)",
            "    5 |     return y;",
            "      |            ^",
        ],
        ["make: *** [Makefile:4: main] Error 1"],
        "main.c:5:12: error: 'y' undeclared (first use in this function)",
    ),
    "clang": (
        [
            "lib.cpp:10:3: warning: unused variable 'n' [-Wunused-variable]",
            "lib.cpp:14:9: error: no member named 'sizee' in 'std::vector<int>'",
        ],
        ["1 warning and 1 error generated."],
        "lib.cpp:14:9: error: no member named 'sizee' in 'std::vector<int>'",
    ),
    "javac": (
        [
            "Main.java:7: error: cannot find symbol",
            '        System.out.printn("hi");',
            "                  ^",
        ],
        ["1 error"],
        "Main.java:7: error: cannot find symbol",
    ),
    "uv": (
        [
            "  × Failed to build `demo @ file:///src/demo`",
            "  ├─▶ The build backend returned an error",
            "  ╰─▶ Call to `setuptools.build_meta.build_wheel` failed (exit status: 1)",
        ],
        ["Exit code 1"],
        "  × Failed to build `demo @ file:///src/demo`",
    ),
    "python traceback": (
        [
            "Traceback (most recent call last):",
            '  File "/app/run.py", line 3, in <module>',
            "    main()",
            '  File "/app/run.py", line 2, in main',
            "    raise ValueError('bad config: port')",
            "ValueError: bad config: port",
        ],
        ["exit status 1"],
        "ValueError: bad config: port",
    ),
}


@pytest.mark.parametrize("tool", list(SAMPLES))
def test_each_tools_failure_is_detected_and_shown(tool: str) -> None:
    """A failure buried in 600 lines of a listed tool's output makes an errors preview that
    shows it (and its summary), where version 0's head + tail cut it out."""
    block, summary, key = SAMPLES[tool]
    text = buried(block, summary)
    assert detect(text) == "errors"
    shaped = env(text)
    assert "--- preview: errors" in shaped
    assert key in shaped
    assert summary[-1] in shaped
    assert key not in env(text, version=0)
    # The line numbers of what is shown: the failure's block header names its place.
    first = text.split("\n").index(block[0]) + 1
    assert any(h.startswith(f"--- lines {first:,}") for h in shaped.splitlines()) or (
        f"--- line {first:,} ---" in shaped or f"–{first:,} ---" in shaped or key in shaped
    )


def test_one_failure_word_is_not_enough_for_an_errors_preview() -> None:
    """A long log with a single ``warning:`` line (or a lone ``OK``) keeps head + tail."""
    text = "\n".join([*NOISE, "warning: deprecated flag --foo", *NOISE, "OK"])
    assert detect(text) == "head_tail"


def test_a_numbered_file_read_is_head_and_tail_whatever_its_lines_say() -> None:
    """``cat -n`` of a test file holds failure words; it is a file read: head + tail."""
    src = [*NOISE[:50], "E       AssertionError", "FAILED tests/x.py::y", *NOISE[:50]]
    text = "\n".join(f"{i + 1:>6}\t{line}" for i, line in enumerate(src))
    assert detect(text) == "head_tail"


@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("csv", lambda i: f"{i},name-{i},{i * 3.5},ok"),
        ("tsv", lambda i: f"{i}\tname-{i}\t{i * 3.5}\tok"),
        ("aligned", lambda i: f"container-{i:04d}   nginx:1.{i % 9}   Up {i} minutes   80/tcp"),
    ],
)
def test_tables_keep_their_header_first_and_last_rows(
    name: str, make: Callable[[int], str]
) -> None:
    """CSV, TSV and aligned columns (``docker ps``): the header, the first and the last rows,
    and the row count on the marker line."""
    header = {
        "csv": "id,name,score,status",
        "tsv": "id\tname\tscore\tstatus",
        "aligned": "NAMES            IMAGE       STATUS           PORTS",
    }[name]
    rows = [make(i) for i in range(400)]
    text = "\n".join([header, *rows])
    assert detect(text) == "table"
    shaped = env(text, 1_000)
    assert "--- preview: table (400 rows under a 1-line header)" in shaped
    body = shaped.splitlines()
    assert header in body and rows[0] in body and rows[-1] in body
    assert rows[200] not in body


def test_a_markdown_table_keeps_its_separator_line() -> None:
    """A markdown table's header is two lines (names and ``|---|``): both are kept."""
    rows = [f"| {i} | item {i} | {i * 2} |" for i in range(300)]
    text = "\n".join(["| id | name | n |", "|---|---|---|", *rows])
    assert detect(text) == "table"
    shaped = env(text, 800)
    assert "| id | name | n |\n|---|---|---|\n| 0 | item 0 | 0 |" in shaped
    assert "under a 2-line header" in shaped and rows[-1] in shaped


def test_a_diff_lists_every_file_and_hunk_with_line_numbers() -> None:
    """A git diff of 20 files: its index names every file and hunk header with its line number,
    then hunks from both ends."""
    parts: list[str] = []
    for f in range(20):
        parts += [
            f"diff --git a/src/f{f}.py b/src/f{f}.py",
            f"index 111{f}..222{f} 100644",
            f"--- a/src/f{f}.py",
            f"+++ b/src/f{f}.py",
            f"@@ -{f * 10 + 1},6 +{f * 10 + 1},7 @@ def f{f}():",
            *[f"     line {k} of f{f} unchanged" for k in range(6)],
            f"+    added_in_f{f}()",
        ]
    text = "\n".join(parts) + "\n"
    assert detect(text) == "diff"
    shaped = env(text)
    assert "--- preview: diff (20 files, 20 hunks)" in shaped
    assert "--- files and hunks (line: header) ---" in shaped
    assert "1: diff --git a/src/f0.py b/src/f0.py" in shaped
    last = parts.index("diff --git a/src/f19.py b/src/f19.py") + 1
    assert f"{last}: diff --git a/src/f19.py b/src/f19.py" in shaped
    assert "+    added_in_f19()" in shaped  # the tail of the last hunk


def test_a_json_document_becomes_a_skeleton_that_parses() -> None:
    """A 40 KB JSON answer: its preview is valid JSON keeping every top key, the first items,
    the array's length and cut strings; the read hint offers a JSON path."""
    doc = {
        "items": [{"id": i, "name": f"n{i}", "body": "x" * 500} for i in range(80)],
        "next": "cursor-abc",
        "total": 80,
    }
    text = json.dumps(doc)
    assert detect(text) == "json"
    shaped = env(text)
    body = shaped.split("\n--- preview: json", 1)[1].split("\n", 1)[1]
    skeleton = json.loads(body)
    assert set(skeleton) == {"items", "next", "total"}
    assert skeleton["items"][0]["id"] == 0 and skeleton["total"] == 80
    assert any("more items (80 in all)" in str(x) for x in skeleton["items"])
    assert '"path": "$.key[0]"' in shaped
    assert len(body) <= 2_000


def test_ndjson_shows_first_and_last_records_and_their_count() -> None:
    """NDJSON (one record a line) shows its first and last records, and how many there are."""
    rows = [json.dumps({"ts": i, "level": "info", "msg": f"event {i}"}) for i in range(500)]
    text = "\n".join(rows) + "\n"
    assert detect(text) == "ndjson"
    shaped = env(text)
    assert "--- preview: ndjson (500 records, one per line)" in shaped
    assert rows[0] in shaped and rows[-1] in shaped and rows[250] not in shaped


def test_plain_text_keeps_version_0s_head_and_tail_lines() -> None:
    """Text of no other shape shows the very lines version 0 showed, now numbered."""
    text = "\n".join(f"plain line {i:05d}" for i in range(3_000)) + "\n"
    new, old = env(text), env(text, version=0)
    new_lines = [x for x in new.splitlines() if x.startswith("plain")]
    old_lines = [x for x in old.splitlines() if x.startswith("plain")]
    assert new_lines == old_lines
    assert "--- preview: head_tail; left out: lines " in new


def test_version_0_is_todays_envelope_byte_for_byte() -> None:
    """Version 0 (logs written before preview shapes) is the head + tail envelope as it was:
    its bytes, unchanged (the digest main printed before preview shapes existed)."""
    text = "\n".join(f"line {i:04d}" for i in range(1_000)) + "\n"
    got = env(text, 200, version=0)
    assert [x for x in got.splitlines() if x.startswith("---")] == [
        "--- first 10 lines ---",
        "--- 980 lines (9,800 characters) omitted ---",
        "--- last 10 lines (from line 991) ---",
    ]
    digest = hashlib.sha256(got.encode()).hexdigest()
    assert digest == "423e8089fbcc698c21d343935bc96538a13c8dae87e0532807fbe2b145deffbd"


# --- real output from the shared traces ----------------------------------------------------


def _long_results(traces: SharedTraces) -> list[str]:
    out: list[str] = []
    for trace in traces[0]:
        for message in trace.messages:
            content = message.get("content")
            if message.get("role") != "user" or not isinstance(content, list):
                continue
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    body = block.get("content")
                    text = (
                        body
                        if isinstance(body, str)
                        else "\n".join(
                            str(b.get("text", ""))
                            for b in body or ()
                            if isinstance(b, dict) and b.get("type") == "text"
                        )
                    )
                    if len(text) > 2_000:
                        out.append(text)
    return out


def test_real_test_logs_from_the_traces_are_errors_previews_showing_their_failures(
    shared_trace_set: SharedTraces,
) -> None:
    """Every long recorded pytest log with a FAILURES section is detected as error output, and
    its preview shows that section's header and the run's final summary line."""
    logs = [t for t in _long_results(shared_trace_set) if "= FAILURES =" in t]
    assert len(logs) >= 5, "the public traces hold several failing pytest runs"
    for text in logs:
        assert detect(text) == "errors"
        shaped = env(text)
        assert "= FAILURES =" in shaped
        verdicts = [x for x in text.splitlines() if " failed" in x and x.startswith("=")]
        if verdicts:
            assert verdicts[-1].strip() in {x.strip() for x in shaped.splitlines()}


def test_real_tracebacks_from_the_traces_show_their_exception_line(
    shared_trace_set: SharedTraces,
) -> None:
    """A long recorded output holding a Python traceback is error output, and its preview shows
    the first traceback's exception line."""
    found = 0
    for text in _long_results(shared_trace_set):
        lines = text.splitlines()
        if "Traceback (most recent call last):" not in lines or "= FAILURES =" in text:
            continue
        found += 1
        assert detect(text) == "errors"
    assert found >= 3


def test_real_diffs_and_file_reads_from_the_traces(shared_trace_set: SharedTraces) -> None:
    """Recorded ``git diff`` outputs are diffs whose index lists their first file; recorded
    numbered file reads stay head + tail."""
    results = _long_results(shared_trace_set)
    diffs = [t for t in results if t.startswith("diff --git ")]
    assert diffs
    for text in diffs:
        assert detect(text) == "diff"
        assert f"1: {text.splitlines()[0][:120]}" in env(text)
    reads = [t for t in results if "→" in t.split("\n", 1)[0] or "\t" in t.split("\n", 1)[0]]
    numbered = [t for t in reads if t.lstrip()[:1].isdigit()]
    assert numbered
    for text in numbered:
        assert detect(text) == "head_tail"


def test_every_real_long_result_fits_its_budget_and_repeats_its_bytes(
    shared_trace_set: SharedTraces,
) -> None:
    """Each recorded result over 2,000 characters: the preview's body fits 2,000 characters
    (head + tail's content), and computing it twice gives the same bytes."""
    for text in _long_results(shared_trace_set):
        got = shape_preview(text, 2_000, tail_share=0.5)
        if got is not None:
            assert len(got.body) <= 2_000
        assert env(text) == env(text)


def test_a_long_output_is_shaped_from_its_two_ends_with_true_line_numbers() -> None:
    """A 3 MB log is shaped from its first and last 64 KB: the failure near its end is shown
    under its real line number, the middle is left out, and the cost stays flat."""
    lines = [f"compiling unit {i:06d} of the tree" for i in range(100_000)]
    at = 99_950
    lines[at] = "src/unit.c:12:3: error: expected ';' before '}' token"
    lines.append("make: *** [Makefile:9: all] Error 1")
    text = "\n".join(lines) + "\n"
    assert len(text) > 3_000_000
    shaped = env(text)
    assert "--- preview: errors" in shaped
    assert lines[at] in shaped
    rows = shaped.splitlines()
    where = rows.index(lines[at])
    head = next(i for i in range(where, -1, -1) if rows[i].startswith("--- lines "))
    start = int(rows[head].removeprefix("--- lines ").split("–")[0].replace(",", ""))
    assert start + (where - head - 1) == at + 1  # numbered as in the whole output
    assert "compiling unit 050000" not in shaped


def test_the_head_tail_and_head_settings_turn_shapes_off(tmp_path: Path) -> None:
    """``preview_shape="head_tail"`` shows a failing log as head + tail, ``"head"`` as its head
    alone, and a per-tool ``preview`` overrides the session's (both still name their shape)."""
    block, summary, _ = SAMPLES["pytest"]
    text = buried(block, summary)

    def shown(settings: dict[str, Any], tool: str = "bash") -> str:
        msgs = [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "c", "name": tool, "input": {"command": "pytest"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "c", "content": text}]},
        ]  # fmt: skip
        with Budget.open(tmp_path / f"s{len(list(tmp_path.iterdir()))}", settings) as b:
            out: str = b.prepare(msgs, now=0).messages[2]["content"][0]["content"]
        return out

    base = {"result_cap": 5_000, "preview_chars": 1_000}
    assert "--- preview: errors" in shown(base)
    assert "--- preview: head_tail; left out: lines " in shown(
        {**base, "preview_shape": "head_tail"}
    )
    head = shown({**base, "preview_shape": "head"})
    assert "--- preview: head; left out: lines " in head and summary[-1] not in head
    per_tool = {**base, "preview_shape": "head_tail", "tools": {"bash": ToolPolicy(preview="auto")}}
    assert "--- preview: errors" in shown(per_tool)


def test_a_long_table_counts_every_row_and_numbers_its_last_ones() -> None:
    """A 200,000-row CSV (shaped from its two ends) still says how many rows it has, and its
    last row is shown under its real line number."""
    rows = [f"{i},name-{i},{i % 97}" for i in range(200_000)]
    text = "id,name,score\n" + "\n".join(rows) + "\n"
    shaped = env(text)
    assert "--- preview: table (200,000 rows under a 1-line header)" in shaped
    assert rows[-1] in shaped and shaped.splitlines()[-1] == rows[-1]
    assert any(h.endswith("–200,001 ---") for h in shaped.splitlines())


def test_deeply_nested_json_lines_are_previewed_not_crashed_on() -> None:
    """Lines of JSON nested deeper than Python's parser goes (an NDJSON check would recurse)
    are previewed as head + tail (before: RecursionError out of prepare)."""
    deep = "[" * 50_000 + "]" * 50_000
    text = f"{deep}\n{deep}\n"
    assert detect(text) == "head_tail"
    assert "--- preview: head_tail" in env(text)


_REAL_TOOLS = {
    # tool: (a line of its failing runs, the summary line its preview must show)
    "mvn": (
        re.compile(r"^\[INFO\] BUILD FAILURE\s*$", re.M),
        re.compile(r"^\[INFO\] BUILD FAILURE"),
    ),
    "javac": (re.compile(r"^\S+\.java:\d+: error: ", re.M), re.compile(r"^\d+ errors?$")),
    "unittest": (
        re.compile(r"^FAILED \((?:failures|errors)=\d+", re.M),
        re.compile(r"^Ran \d+ tests? in "),
    ),
}


@pytest.mark.parametrize("tool", list(_REAL_TOOLS))
def test_real_maven_javac_and_unittest_failures_from_the_traces(
    shared_trace_set: SharedTraces, tool: str
) -> None:
    """Each long recorded failing Maven build, javac compile and unittest run (the openhands
    and mini-swe-agent traces hold them) is error output whose preview shows the run's
    summary line and its first failure line."""
    failing, summary = _REAL_TOOLS[tool]
    runs = [t for t in _long_results(shared_trace_set) if failing.search(t)]
    assert runs, f"the public traces hold failing {tool} runs"
    for text in runs:
        assert detect(text) == "errors"
        shown = {x.strip() for x in env(text).splitlines()}
        lines = text.split("\n")
        verdicts = [x.strip() for x in lines if summary.match(x.strip())]
        assert verdicts and verdicts[-1] in shown
        first = next(x.strip() for x in lines if is_failure(x[:1_000]))
        assert first in shown or first[:200] in " ".join(shown)
