"""A hostile run against the previews' promises: faithful views (line blocks past the shaping
window, JSON skeletons), no crash, and bounded work for re-runs decided by their line counts."""

from __future__ import annotations

import json
import re
import time

from budget import Budget
from budget.previews import line_delta, shape_preview, skeleton_text
from budget.previews._json import LADDER
from budget.previews._shapes import WINDOW_CHARS

_CUT = re.compile(r"(.*)… \[([\d,]+) more characters\]", re.S)


def _spill(text: str) -> tuple[Budget, str, str]:
    """A session that spilled ``text`` as a bash result: (session, envelope, ref)."""
    session = Budget.in_memory({"result_cap": 1_000, "preview_chars": 600})
    call = {"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "git diff"}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": text}
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [result]},
    ]
    prepared = session.prepare(messages)
    ref = prepared.report.decisions[0].ref
    assert ref is not None
    return session, prepared.messages[2]["content"][0]["content"], ref


def _shown(envelope: str, number: int) -> str:
    """The row a line-shaped preview shows under line ``number``."""
    rows = envelope.split("\n")
    for k, row in enumerate(rows):
        m = re.fullmatch(r"--- lines? ([\d,]+)(?:–([\d,]+))? ---", row)
        if m is None:
            continue
        a = int(m.group(1).replace(",", ""))
        b = int((m.group(2) or m.group(1)).replace(",", ""))
        if a <= number <= b:
            return rows[k + 1 + number - a]
    raise AssertionError(f"line {number} is not shown")


def _assert_faithful(session: Budget, ref: str, envelope: str, number: int) -> None:
    """Line ``number`` as the preview shows it is the start of the line read back under that
    number (the tool's page shows it too), and the characters it says are left out are the rest."""
    line = session.read(ref, offset=number - 1, limit=1).removesuffix("\n")
    page = session.handle_read_tool({"ref": ref, "offset": number - 1, "limit": 1})
    cut = _CUT.fullmatch(_shown(envelope, number))
    assert cut is not None
    assert line.startswith(cut.group(1))
    assert page.split("\n")[1].split("\t", 1)[1].startswith(cut.group(1)[:40])
    assert len(cut.group(1)) + int(cut.group(2).replace(",", "")) == len(line)


def test_a_diff_ending_in_a_line_longer_than_the_window_shows_that_lines_start() -> None:
    """A diff whose last added line (a minified bundle) is longer than the shaping window shows
    that line from its start with the true count of characters cut, not a piece of its middle."""
    bundle = "+" + "var a=1;" * (WINDOW_CHARS // 2)
    text = "diff --git a/x.js b/x.js\n--- a/x.js\n+++ b/x.js\n@@ -1 +1 @@\n-old\n" + bundle
    session, envelope, ref = _spill(text)
    assert "--- preview: diff" in envelope
    _assert_faithful(session, ref, envelope, 6)


def test_a_log_starting_with_a_line_longer_than_the_window_counts_its_cut_truly() -> None:
    """An error log whose first line is longer than the shaping window says how many characters
    of that line it leaves out in the whole line, not in the window's piece of it."""
    text = "x" * (3 * WINDOW_CHARS) + "\n"
    text += "".join(f"E   assert {i}\nFAILED t{i}\n" for i in range(3))
    session, envelope, ref = _spill(text)
    assert "--- preview: errors" in envelope
    _assert_faithful(session, ref, envelope, 1)


def test_a_rerun_of_millions_of_lines_is_refused_before_any_per_line_work() -> None:
    """A re-run of millions of short lines, whose diff the work bound refuses by the line count
    alone, is refused at C speed (before: 2.4 s splitting and indexing 5 million lines)."""
    old = "a\nb\n" * 2_500_000
    new = "b\na\n" * 2_500_000
    started = time.perf_counter()
    assert line_delta(old, new, limit=250) is None
    assert time.perf_counter() - started < 0.3


def test_a_json_shape_asked_of_deeply_nested_text_falls_back_to_head_and_tail() -> None:
    """``shape_preview`` asked for the JSON shape of brackets nested deeper than Python parses
    gives no shape (head + tail then), as detection does, rather than raising RecursionError."""
    assert shape_preview("[" * 100_000 + "]" * 100_000, 500, tail_share=0.5, shape="json") is None


def test_a_skeletons_note_of_keys_left_out_keeps_a_key_named_like_it() -> None:
    """An object whose own first key is ``…`` keeps that key's value in its skeleton: the note
    of the keys left out takes a key none of those kept holds, rather than overwriting it."""
    doc = {"…": "the document's own", **{f"k{i}": i for i in range(60)}}
    got = json.loads(skeleton_text(doc, LADDER[0]))
    assert got["…"] == "the document's own"
    assert "21 more keys (61 in all)" in got.values()


def test_a_json_preview_that_cuts_nothing_does_not_say_it_cuts() -> None:
    """A JSON output spilled for its indentation alone, whose skeleton is the whole document,
    is not marked as having items and characters cut (the model would read back for nothing)."""
    doc = json.dumps({"a": [1, 2, 3], "b": "short", "c": float("nan")}, indent=400)
    envelope = _spill(doc)[1]
    assert "--- preview: json (the whole document (valid JSON), re-indented) ---" in envelope
    assert "cut" not in envelope
