"""Envelopes, stubs and previews: pure functions whose bytes are pinned by tests.

Everything here is deterministic (no timestamps, no random ids): the same input gives the same
bytes, which is what keeps a request's prefix cacheable from turn to turn and across processes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from budget.previews import PREVIEW_VERSION, Earlier, Shaped, line_delta, shape_preview, span_text
from budget.previews._shapes import WINDOW_CHARS

__all__ = [
    "EMPTY_TEXT",
    "Preview",
    "count_lines",
    "envelope",
    "envelope_ref",
    "make_preview",
    "pointer_target",
    "preview_shape",
    "same_output",
    "stub",
]

EMPTY_TEXT = "(no output)"
"""What an empty result becomes: models tend to end their turn on an empty tool result."""


def count_lines(text: str) -> int:
    """Lines in ``text`` as an editor counts them (a final line without newline counts)."""
    if not text:
        return 0
    n = text.count("\n")
    return n if text.endswith("\n") else n + 1


@dataclass(frozen=True, slots=True)
class Preview:
    """A head and a tail of a text, cut at line boundaries, and what lies between them."""

    head: str
    tail: str
    omitted_lines: int
    omitted_chars: int
    head_lines: int
    tail_start_line: int
    """1-based number of the tail's first line (0 when there is no tail)."""


def _cut_head(text: str, budget: int) -> str:
    if len(text) <= budget:
        return text
    cut = text.rfind("\n", 0, budget)
    # One overlong first line (minified JSON, a progress bar): cut inside it rather than show nothing.
    return text[: cut + 1] if cut >= 0 else text[:budget]


def _cut_tail(text: str, budget: int, floor: int) -> str:
    """The last whole lines of ``text[floor:]`` that fit in ``budget`` characters."""
    if budget <= 0 or len(text) - floor <= 0:
        return ""
    start = max(floor, len(text) - budget)
    if start == floor:
        return text[start:]
    nl = text.find("\n", start - 1)
    # ``start - 1``: when ``start`` already begins a line, keep that line.
    if nl < 0 or nl + 1 >= len(text):
        return text[start:]
    return text[nl + 1 :]


def make_preview(
    text: str, chars: int, *, tail_share: float, newlines: int | None = None
) -> Preview:
    """Head and tail of ``text`` within ``chars`` characters, cut at line boundaries.

    ``newlines`` is ``text.count("\\n")`` when the caller has counted already: counting is the
    only pass over the whole text (everything else looks at the head and the tail), so it is
    done once per spill.
    """
    if len(text) <= chars:
        return Preview(text, "", 0, 0, count_lines(text), 0)
    total_nl = text.count("\n") if newlines is None else newlines
    tail_budget = int(chars * tail_share)
    head = _cut_head(text, chars - tail_budget)
    tail = _cut_tail(text, tail_budget, len(head))
    middle_start, middle_end = len(head), len(text) - len(tail)
    omitted_chars = middle_end - middle_start
    head_nl, tail_nl = head.count("\n"), tail.count("\n")
    # The head and the tail are the ends of the text: the middle holds the other newlines.
    omitted_lines = total_nl - head_nl - tail_nl
    if tail and not head.endswith("\n") and middle_end > middle_start:
        # A head cut mid-line leaves a partial line in the omitted span.
        omitted_lines += 1
    head_lines = head_nl + (0 if head.endswith("\n") or not head else 1)
    # ``text`` is not empty here (it is longer than ``chars``).
    total_lines = total_nl + (0 if text.endswith("\n") else 1)
    tail_start = total_lines - count_lines(tail) + 1 if tail else 0
    return Preview(head, tail, omitted_lines, omitted_chars, head_lines, tail_start)


def _read_hint(ref: str, read_tool: str, *, json_path: bool = False) -> str:
    if json_path:
        return (
            f'Read more with the {read_tool} tool: {{"ref": "{ref}", "path": "$.key[0]"}} (a JSON '
            f'path), {{"ref": "{ref}", "offset": <first line, 0-based>, "limit": <lines>}} or '
            f'{{"ref": "{ref}", "grep": "<pattern>"}}.'
        )
    return (
        f'Read more with the {read_tool} tool: {{"ref": "{ref}", "offset": <first line, 0-based>, '
        f'"limit": <lines>}} or {{"ref": "{ref}", "grep": "<pattern>"}}.'
    )


_LABEL_CHARS = 100
"""A tool name longer than this is cut in envelopes and stubs (it comes from the host's tool
list, or a model's call: it must not make an envelope larger than what it replaces)."""


def _label(tool: str) -> str:
    """``tool`` as an envelope names it: one line, at most :data:`_LABEL_CHARS` characters."""
    if len(tool) <= _LABEL_CHARS and tool.isprintable():
        return tool
    flat = "".join(c if c.isprintable() else " " for c in tool)
    flat = " ".join(flat.split())
    return flat if len(flat) <= _LABEL_CHARS else flat[: _LABEL_CHARS - 1] + "…"


def _n(k: int, word: str) -> str:
    return f"{k:,} {word}" if k == 1 else f"{k:,} {word}s"


def envelope(
    text: str,
    *,
    ref: str,
    tool: str,
    preview_chars: int,
    tail_share: float,
    read_tool: str,
    path: str | None = None,
    version: int = 0,
    shaped: bool = True,
    earlier: Earlier | None = None,
) -> str:
    """The text that replaces a spilled result: size, reference, how to read on, and a preview.

    ``version`` 0 is the head + tail envelope of logs written before preview shapes (its bytes
    never change); from 1 the preview's shape is chosen from the content when ``shaped`` (else
    head + tail), or is the diff against ``earlier`` when that is a re-run of the same call.
    """
    split = None
    if version >= 1 and shaped and earlier is None and len(text) <= 2 * WINDOW_CHARS:
        # The shape's detectors read the text's lines: split once, and count its newlines
        # from the split rather than by another pass over the text (2.5 us an 8 kB output).
        split = text.split("\n")
        newlines = len(split) - 1
    else:
        newlines = text.count("\n")
    lines = newlines + (0 if text.endswith("\n") else 1) if text else 0
    what = f"Output of {_label(tool)}" if tool else "Output"
    first = (
        f"[toolbudget] {what} was too large for the context ({_n(len(text), 'character')}, "
        f"{_n(lines, 'line')}); it is stored in full as ref {ref}."
    )
    if version >= 1:
        shape = preview_shape(
            text,
            preview_chars,
            tail_share=tail_share,
            shaped=shaped,
            earlier=earlier,
            newlines=newlines,
            split=split,
            version=version,
        )
        hint = _read_hint(ref, read_tool, json_path=shape.shape == "json")
        if path is not None and version >= 3:
            hint = "Read more from the file below with your own tools; it holds the output exactly."
        out = [first, hint] if path is None else [first, hint, f"File: {path}"]
        return "\n".join([*out, _marker(shape, version=version), shape.body])
    out = [first, _read_hint(ref, read_tool)]
    if path is not None:
        out.append(f"File: {path}")
    return _v0_preview(out, text, preview_chars, tail_share, newlines)


def _v0_preview(
    out: list[str], text: str, preview_chars: int, tail_share: float, newlines: int
) -> str:
    """Version 0's envelope: ``out`` (its header lines) and the head + tail with their markers,
    byte for byte as before preview shapes."""
    p = make_preview(text, preview_chars, tail_share=tail_share, newlines=newlines)
    whole_head = p.head.endswith("\n")
    out.append(
        f"--- first {_n(p.head_lines, 'line')} ---"
        if whole_head
        else f"--- first {_n(len(p.head), 'character')} ---"
    )
    out.append(p.head.removesuffix("\n"))
    if not p.tail:
        rest_chars = len(text) - len(p.head)
        if rest_chars:
            # The rest ends where the text does; its newlines are those the head lacks.
            rest_nl = newlines - p.head.count("\n")
            rest = rest_nl + (0 if text.endswith("\n") else 1) if whole_head else 0
            what_rest = f"{_n(rest, 'more line')} ({_n(rest_chars, 'character')})"
            if not whole_head:
                what_rest = _n(rest_chars, "more character")
            out.append(f"--- {what_rest} not shown ---")
        return "\n".join(out)
    whole_tail = len(p.tail) == len(text) or text[-len(p.tail) - 1] == "\n"
    if whole_head and whole_tail:
        out.append(
            f"--- {_n(p.omitted_lines, 'line')} ({_n(p.omitted_chars, 'character')}) omitted ---"
        )
        out.append(
            f"--- last {_n(count_lines(p.tail), 'line')} (from line {p.tail_start_line:,}) ---"
        )
    else:
        out.append(f"--- {_n(p.omitted_chars, 'character')} omitted ---")
        out.append(f"--- last {_n(len(p.tail), 'character')} ---")
    out.append(p.tail.removesuffix("\n"))
    return "\n".join(out)


_DELTA_SHARE = 2
"""A re-run's diff is shown when it takes at most half the preview: the other half always
shows the output itself (the earlier output was itself only previewed)."""
_AND_THEN_CHARS = 120
"""Room kept for the second marker line of a delta followed by the output's own preview."""
_MIN_ROOM = 200
"""Below this many characters left by a delta, the output's own preview is not added."""


def _marker(shape: Shaped, *, then: bool = False, version: int = PREVIEW_VERSION) -> str:
    """The line naming a preview's shape and what it leaves out (``then``: the second marker
    of a delta preview, introducing the output's own preview); from ``version`` 2 with the
    count of the lines left out, and of their characters where the shape counts them."""
    what = shape.shape if not shape.note else f"{shape.shape} ({shape.note})"
    if then:
        what = f"then this output's own preview, {what}"
    if shape.shape == "json":
        return f"--- preview: {what} ---"
    if shape.shape == "delta":
        return f"--- preview: {what} ---"
    ranges = shape.left_out
    if not ranges:
        return f"--- preview: {what} ---"
    left = span_text(ranges[:_MARKER_RANGES])
    if len(ranges) > _MARKER_RANGES:
        more = len(ranges) - _MARKER_RANGES
        left += f" and {_n(more, 'more range')} (every block below is numbered)"
    if version >= 2:
        counts = [_n(sum(b - a + 1 for a, b in ranges), "line")]
        if shape.left_chars is not None:
            counts.append(_n(shape.left_chars, "character"))
        left += f" ({', '.join(counts)})"
    return f"--- preview: {what}; left out: lines {left} ---"


_MARKER_RANGES = 8
"""Left-out ranges the marker line lists at most: it stays one short line (the block headers
number every line shown anyway)."""


def preview_shape(
    text: str,
    chars: int,
    *,
    tail_share: float,
    shaped: bool = True,
    earlier: Earlier | None = None,
    newlines: int | None = None,
    split: list[str] | None = None,
    version: int = PREVIEW_VERSION,
) -> Shaped:
    """The preview of ``text`` (version 1 and later): a body of at most ``chars`` characters (its
    block headers included; the marker line, like version 0's marker lines, is not).
    ``newlines``: ``text.count("\\n")`` when the caller has counted (the one pass over a whole
    output); ``split``: ``text.split("\\n")`` when it has split (handed on to the shape's
    detectors). From ``version`` 2 a preview without a tail is named ``head``."""
    nl = text.count("\n") if newlines is None else newlines
    delta = _delta(text, chars // _DELTA_SHARE, earlier) if earlier is not None else None
    room = chars if delta is None else chars - len(delta.body) - _AND_THEN_CHARS
    if delta is not None and room < _MIN_ROOM:
        return delta
    got = (
        shape_preview(text, room, tail_share=tail_share, newlines=nl, split=split)
        if shaped
        else None
    )
    if got is None:
        got = _head_tail(text, room, tail_share, nl, version)
    if delta is None:
        return got
    # The change first, then what the output itself shows in the room the diff leaves: the
    # earlier output was itself only previewed, so the diff alone may not say enough.
    then = _marker(got, then=True, version=version)
    return Shaped("delta", f"{delta.body}\n{then}\n{got.body}", (), delta.note)


def _delta(text: str, chars: int, earlier: Earlier) -> Shaped | None:
    """The diff against ``earlier`` when it fits the preview, marker included; else None."""
    if earlier.text == text:
        body = "(no line changed)"
    else:
        got = line_delta(earlier.text, text, limit=chars)
        if got is None:
            return None
        body = got
    removed = sum(1 for row in body.split("\n") if row.startswith("-"))
    added = sum(1 for row in body.split("\n") if row.startswith("+"))
    note = (
        f"diff against ref {earlier.ref}, the earlier output of this same call: "
        f"{_n(removed, 'line')} removed, {_n(added, 'line')} added, the rest unchanged"
    )
    return Shaped("delta", body, (), note) if len(body) <= chars else None


def _head_tail(
    text: str, budget: int, tail_share: float, newlines: int, version: int = PREVIEW_VERSION
) -> Shaped:
    """Today's head and tail (:func:`make_preview`), in numbered blocks; from ``version`` 2 named
    ``head`` when there is no tail to show (``tail_share`` 0: Claude Code's shape)."""
    p = make_preview(text, budget, tail_share=tail_share, newlines=newlines)
    total = newlines + (0 if text.endswith("\n") or not text else 1)
    name = "head" if version >= 2 and tail_share <= 0 else "head_tail"
    if not text:  # no line to number ("lines 1–0" before; an empty output is never spilled)
        return Shaped(name, "", ())
    if not p.tail and len(p.head) == len(text):
        return Shaped(name, _block(1, total, p.head), ())
    head_whole = p.head.endswith("\n")
    tail_whole = not p.tail or text[-len(p.tail) - 1] == "\n"
    parts: list[str] = []
    if head_whole and tail_whole:
        parts.append(_block(1, p.head_lines, p.head))
        left_end = p.tail_start_line - 1 if p.tail else total
        if p.tail:
            parts.append(_block(p.tail_start_line, total, p.tail))
        left_chars = len(text) - len(p.head) - len(p.tail)
        return Shaped(name, "\n".join(parts), ((p.head_lines + 1, left_end),), "", left_chars)
    # Cut inside a line (one overlong line): character positions say what is shown.
    parts.append(f"--- characters 1–{len(p.head):,} ---")
    parts.append(p.head)
    if p.tail:
        start = len(text) - len(p.tail) + 1
        parts.append(f"--- characters {start:,}–{len(text):,} ---")
        parts.append(p.tail.removesuffix("\n"))
    left = f"characters {len(p.head) + 1:,}–{len(text) - len(p.tail):,} left out"
    return Shaped(name, "\n".join(parts), (), left)


def _block(a: int, b: int, body: str) -> str:
    head = f"--- line {a:,} ---" if a == b else f"--- lines {a:,}–{b:,} ---"
    return f"{head}\n{body.removesuffix(chr(10))}"


def stub(
    text: str, *, ref: str, tool: str, chars: int, read_tool: str, path: str | None = None
) -> str:
    """The short text that replaces an old result: what it was, its size, a glimpse, the ref;
    with ``path`` (``include_path``), the file the agent's own tools read it back from, as an
    envelope names it (an agent behind the proxy has no read-back tool)."""
    what = f"output of {_label(tool)}" if tool else "output"
    where = f'{read_tool} {{"ref": "{ref}"}}' if path is None else f"the file {path}"
    head = (
        f"[toolbudget] Old {what} trimmed ({len(text):,} characters, {count_lines(text):,} lines); "
        f"read it back with {where}."
    )
    room = max(chars - len(head) - len(" It began: …"), 0)
    glimpse = " ".join(text[: room * 2].split())[:room]
    if not glimpse:
        return head
    return f"{head} It began: {glimpse}…"


def same_output(
    text: str,
    *,
    ref: str,
    tool: str,
    same_as: str,
    read_tool: str,
    path: str | None = None,
    delta: str | None = None,
) -> str:
    """The short text that replaces a fresh result whose output is that of an earlier call still
    shown whole (``delta`` None: byte for byte) or that output changed by the line diff
    ``delta`` (a re-run): which call, the size, the ref (the text is stored too, so the model
    reads it back should the earlier output be trimmed or compacted away later)."""
    what = f"Output of {_label(tool)}" if tool else "Output"
    where = f'{read_tool} {{"ref": "{ref}"}}' if path is None else f"the file {path}"
    size = f"({_n(len(text), 'character')}, {_n(count_lines(text), 'line')})"
    stored = f"it is stored in full as ref {ref}"
    if delta is None:
        return (
            f"[toolbudget] {what} is the same as the output of call {_label(same_as)} earlier in "
            f"this conversation {size}; {stored}. Read that output, or read this one back with "
            f"{where}."
        )
    rows = delta.split("\n")
    removed = sum(1 for row in rows if row.startswith("-"))
    added = sum(1 for row in rows if row.startswith("+"))
    return (
        f"[toolbudget] {what} is the output of call {_label(same_as)} earlier in this "
        f"conversation with {_n(removed, 'line')} removed and {_n(added, 'line')} added {size}; "
        f"{stored}. Read that output with this diff applied, or read this one back with {where}."
        f"\n--- diff against the output of call {_label(same_as)} ---\n{delta}"
    )


_POINTER_HEAD = re.compile(
    r"\[toolbudget\] Output(?: of [^\n]*?)? is (?:the same as )?the output of call "
    r"(?P<call>[^\n]*?) earlier in this conversation (?:with [^\n]*? )?"
    r"\([\d,]+ characters?, [\d,]+ lines?\); "
)


def pointer_target(text: str) -> str | None:
    """The call id a pointer (:func:`same_output`) names, else None."""
    m = _POINTER_HEAD.match(text)
    return m.group("call") if m else None


_ENVELOPE_HEAD = re.compile(
    r"\[toolbudget\] Output(?: of (?P<tool>[^\n]*))? was too large for the context "
    r"\([\d,]+ characters?, [\d,]+ lines?\); it is stored in full as ref (?P<ref>[0-9a-f]{32})\.\n"
)


def envelope_ref(text: str) -> tuple[str, str] | None:
    """(ref, tool) named by ``text`` when it starts like an envelope, else None.

    Only the first line is looked at: a caller that must be sure rebuilds the envelope from the
    stored body and compares (see ``Budget``).
    """
    if not text.startswith("[toolbudget] Output"):
        return None
    m = _ENVELOPE_HEAD.match(text)
    return (m.group("ref"), m.group("tool") or "") if m else None
