"""The read-back's grep: RE2 (``google-re2``), time linear in the text whatever the pattern,
no dependence on the private parser of Python's ``re``, bounded in program size and in time."""

from __future__ import annotations

import re
import time
from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate
from typing import Any, Final

import re2

from budget._errors import InputError

__all__ = ["_grep", "_matcher"]

_GREP_SECONDS: Final = 2.0
"""A grep that has not finished by then stops with an error the model can act on."""
_MAX_PROGRAM: Final = 1_000
"""Most RE2 instructions a grep pattern may compile to. RE2 runs in time linear in the text, but
the factor is the program's size when its DFA gives up (e.g. ``(?s)(.{0,1000}).{1000}x`` took
9 s on 16 KB): bounding the program bounds what one search call can cost."""
_SEARCH_STEPS: Final = 1 << 22
"""Bytes times program instructions one search call may cover; the clock is read between calls."""
_MIN_SPAN: Final = 4_096
_MAX_SPAN: Final = 1 << 16
_NOT_PER_LINE: Final = re.compile(r"\\[Az]|\(\?[imsU]*-")
"""Constructs whose truth differs between a line searched alone and inside a run of lines
(text anchors, a multi-line flag turned off): such patterns are searched line by line only."""
_LITERAL: Final = re.compile(r"[^.^$*+?()\[\]{}|\\\n]+")
"""A pattern without any regex syntax (nor a newline, which no line's text holds)."""


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _matcher(grep: str) -> Any:
    """``grep`` compiled by RE2 (linear time, no backtracking); InputError with RE2's own
    message for a pattern it refuses (invalid, or a backreference or lookaround)."""
    options = re2.Options()
    options.log_errors = False
    options.never_capture = True
    encoded = grep.encode("utf-8", "surrogatepass")  # the texts are encoded the same way
    if _has_surrogate(grep):
        # A lone surrogate is no UTF-8: such a pattern is matched byte by byte (``.`` is then
        # one byte), which still finds the surrogates a tool's output kept.
        options.encoding = re2.Options.Encoding.LATIN1
    try:
        # (?m): ^ and $ match at each line's ends, so a run of lines can be searched at once.
        pattern = re2.compile(b"(?m)" + encoded, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise InputError(
            f"grep is not a valid regular expression: {_re2_reason(str(reason))}"
        ) from None
    if pattern.programsize > _MAX_PROGRAM:
        raise InputError(
            f"grep pattern is too complex ({pattern.programsize} instructions once compiled, "
            f"at most {_MAX_PROGRAM}); use a simpler pattern (e.g. smaller {{n}} repeats)"
        )
    return pattern


def _re2_reason(reason: str) -> str:
    """RE2's reason for refusing a pattern, quoting the user's pattern only: RE2 quotes the
    fragment it stopped at, which may begin with the ``(?m)`` prefix added here."""
    code, sep, fragment = reason.partition(": ")
    return f"{code}: {fragment.removeprefix('(?m)')}" if sep else reason


def _grep(pattern: Any, grep: str, lines: Sequence[str]) -> list[tuple[int, str]]:
    """The (1-based number, line) pairs whose line, without its newline, ``pattern`` matches.

    Every search call covers a bounded number of bytes (fewer for a bigger program), and the
    clock is read between calls: InputError once :data:`_GREP_SECONDS` have passed. Short lines
    are searched in runs: with ``(?m)`` a line matches alone exactly where it matches inside
    the run, so a match within one line's text is that line's, and the search goes on at the
    next line; only a match crossing a newline needs its first line searched alone. A line
    longer than a call's span is searched in windows overlapping by half: a match longer than
    half a window may be missed, and ``^`` and ``$`` also match at a window's ends.
    """
    deadline = time.monotonic() + _GREP_SECONDS
    if _LITERAL.fullmatch(grep):
        # A plain word (most greps): a substring test per line, the same lines RE2 would give.
        hits = []
        for n, line in enumerate(lines, 1):
            if grep in line:
                hits.append((n, line))
            if not n % 4_096:
                _check(deadline, n)
        return hits
    span = max(_MIN_SPAN, min(_MAX_SPAN, _SEARCH_STEPS // max(pattern.programsize, 1)))
    most = span // 4 if _NOT_PER_LINE.search(grep) is None else 0  # UTF-8: <= 4 bytes a char
    run_chars = most
    out: list[tuple[int, str]] = []
    i, n = 0, len(lines)
    while i < n:
        j, size = i + 1, len(lines[i])
        while j < n and size + len(lines[j]) <= run_chars:
            size += len(lines[j])
            j += 1
        found = len(out)
        if j - i == 1:
            if _line_matches(pattern, lines[i], span, deadline, i + 1):
                out.append((i + 1, lines[i]))
        else:
            _run_matches(pattern, lines, i, j, span, deadline, out)
        # Each search call has a fixed cost and, in a run, copies the run: where matches are
        # dense, shorter runs (down to single lines) cost less; where sparse, longer ones.
        run_chars = run_chars // 4 if len(out) > found else min(max(run_chars * 2, 256), most)
        i = j
    return out


def _run_matches(
    pattern: Any,
    lines: Sequence[str],
    first: int,
    end: int,
    span: int,
    deadline: float,
    out: list[tuple[int, str]],
) -> None:
    """Append the matching lines among ``lines[first:end]``, searched as one text."""
    # A CRLF line is searched as its text and a plain newline (see :func:`_text`).
    encoded = [
        (line[:-2] + "\n" if line.endswith("\r\n") else line).encode("utf-8", "surrogatepass")
        for line in lines[first:end]
    ]
    run = b"".join(encoded)
    starts = list(accumulate((len(e) for e in encoded), initial=0))
    pos = 0
    while pos < len(run):
        found = pattern.search(run, pos)
        _check(deadline, first + 1)
        if found is None:
            return
        k = bisect_right(starts, found.start()) - 1
        if k == len(encoded):  # an empty match at the very end of the run
            if encoded[-1].endswith(b"\n"):
                return  # after the last newline: no line's
            k -= 1  # at the end of a last line without a newline: that line's
        text_end = starts[k + 1] - encoded[k].endswith(b"\n")
        n = first + k
        if found.end() <= text_end or _line_matches(pattern, lines[n], span, deadline, n + 1):
            out.append((n + 1, lines[n]))
        pos = starts[k + 1]


def _text(line: str) -> str:
    """A line's text: without its ``\\n``, or its ``\\r\\n`` (``$`` matches only before ``\\n``,
    so on a CRLF output ``error$`` found nothing: the model sees no ``\\r`` to allow for)."""
    if line.endswith("\r\n"):
        return line[:-2]
    return line.removesuffix("\n")


def _line_matches(pattern: Any, line: str, span: int, deadline: float, n: int) -> bool:
    data = _text(line).encode("utf-8", "surrogatepass")
    if len(data) <= span:
        found = pattern.search(data) is not None
        _check(deadline, n)
        return found
    step = span // 2
    for start in range(0, len(data) - step, step):
        # A slice, not pos/endpos: google-re2 1.1's binding (re2/__init__.py, _match) hands
        # the whole text to C++ on every call, which made windows cost the line's length.
        if pattern.search(data[start : start + span]) is not None:
            return True
        _check(deadline, n)
    return False


def _check(deadline: float, n: int) -> None:
    if time.monotonic() > deadline:
        raise InputError(
            f"grep stopped after {_GREP_SECONDS:g} s at line {n}: the pattern is too slow on "
            "this output; use a simpler pattern, or page with offset and limit"
        )
