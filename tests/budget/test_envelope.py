"""Envelopes, stubs and previews: exact bytes, determinism and line-boundary cuts."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from budget._envelope import count_lines, envelope, make_preview, stub

REF = "0123456789abcdef0123456789abcdef"
LOG = "".join(f"line {i}\n" for i in range(1000))


def test_envelope_head_and_tail_bytes_are_pinned() -> None:
    """The default envelope shows head and tail at line boundaries with the omitted counts between."""
    got = envelope(
        LOG, ref=REF, tool="bash", preview_chars=120, tail_share=0.5, read_tool="toolbudget_read"
    )
    assert got == (
        "[toolbudget] Output of bash was too large for the context (8,890 characters, 1,000 lines);"
        " it is stored in full as ref 0123456789abcdef0123456789abcdef.\n"
        'Read more with the toolbudget_read tool: {"ref": "0123456789abcdef0123456789abcdef", '
        '"offset": <first line, 0-based>, "limit": <lines>} or '
        '{"ref": "0123456789abcdef0123456789abcdef", "grep": "<pattern>"}.\n'
        "--- first 8 lines ---\n"
        "line 0\nline 1\nline 2\nline 3\nline 4\nline 5\nline 6\nline 7\n"
        "--- 986 lines (8,780 characters) omitted ---\n"  # 8,890 - 56 - 54
        "--- last 6 lines (from line 995) ---\n"
        "line 994\nline 995\nline 996\nline 997\nline 998\nline 999"
    )


def test_head_only_envelope_names_what_is_not_shown() -> None:
    """The head-only shape (Claude Code's) says how many lines and characters follow unseen."""
    got = envelope(
        LOG, ref=REF, tool="", preview_chars=30, tail_share=0.0, read_tool="read_back", path="/s/b"
    )
    assert got.splitlines()[2:] == [
        "File: /s/b",
        "--- first 4 lines ---",
        "line 0",
        "line 1",
        "line 2",
        "line 3",
        "--- 996 more lines (8,862 characters) not shown ---",
    ]
    assert got.startswith("[toolbudget] Output was too large")


def test_one_long_line_is_cut_by_characters() -> None:
    """A single overlong line is cut inside the line, and the envelope counts characters."""
    got = envelope("x" * 5000, ref=REF, tool="t", preview_chars=100, tail_share=0.5, read_tool="r")
    assert "--- first 50 characters ---\n" + "x" * 50 + "\n--- 4,900 characters omitted ---" in got
    assert got.endswith("--- last 50 characters ---\n" + "x" * 50)
    assert "(5,000 characters, 1 line)" in got


def test_error_results_keep_more_tail() -> None:
    """With a larger tail share the preview's tail grows and its head shrinks."""
    even = make_preview(LOG, 400, tail_share=0.5)
    errorish = make_preview(LOG, 400, tail_share=0.75)
    assert len(errorish.tail) > len(even.tail)
    assert len(errorish.head) < len(even.head)


@given(st.text(st.sampled_from("ab\n中😀"), max_size=3000), st.integers(10, 800), st.floats(0, 1))
def test_preview_pieces_add_up_to_the_text(text: str, chars: int, share: float) -> None:
    """Head, omitted span and tail always partition the text, and fit the preview budget."""
    p = make_preview(text, chars, tail_share=share)
    assert text.startswith(p.head)
    assert text.endswith(p.tail)
    assert len(p.head) + p.omitted_chars + len(p.tail) == len(text)
    assert len(p.head) + len(p.tail) <= max(chars, len(text) if len(text) <= chars else chars)
    if len(text) > chars:
        assert p.omitted_chars > 0 or not p.tail


def test_stub_is_short_deterministic_and_names_the_ref() -> None:
    """A stub is about the configured size, names the ref and begins with the output's start."""
    a = stub(LOG, ref=REF, tool="bash", chars=300, read_tool="toolbudget_read")
    b = stub(LOG, ref=REF, tool="bash", chars=300, read_tool="toolbudget_read")
    assert a == b
    assert REF in a
    assert "It began: line 0 line 1" in a
    assert len(a) <= 300 + 2
    assert a.startswith("[toolbudget] Old output of bash trimmed (8,890 characters, 1,000 lines)")


def test_count_lines_counts_a_last_line_without_newline() -> None:
    """Lines are counted as an editor does."""
    assert [count_lines(t) for t in ["", "a", "a\n", "a\nb", "\n\n"]] == [0, 1, 1, 2, 2]
