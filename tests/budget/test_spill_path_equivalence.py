"""The spill path rewritten for speed gives the bytes the code it replaced gave: each replaced
function is kept here, as it was, and compared with the new one on arbitrary inputs, and a
session's envelopes (live and after a resume) are the ones the replaced code makes of its bodies.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from budget import Budget, BudgetConfig
from budget._envelope import _label, _marker, _n, _read_hint, _v0_preview, envelope, preview_shape
from budget.previews import PREVIEW_VERSION, Earlier
from budget.previews._detect import (
    _ANYWHERE,
    _COMPILER,
    _FIRST_CANDIDATE,
    _HUNK_LINE,
    _NEXT_CANDIDATE,
    _candidates,
    _has_hunk_line,
)
from budget.previews._shapes import WINDOW_CHARS
from tests._lanes import examples
from tests.budget.test_preview_equivalence import _TEXTS
from tests.strategies import assistant, results

# -- the scans before their one-character gates ----------------------------------------------------


def _old_candidates(text: str) -> list[int]:
    starts = {m.start() + 1 for m in _NEXT_CANDIDATE.finditer(text)}
    if _FIRST_CANDIDATE.match(text):
        starts.add(0)
    for word in _ANYWHERE:
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


def _old_has_hunk_line(text: str) -> bool:
    return text.startswith("@@ -") or _HUNK_LINE.search(text) is not None


_GATED = st.one_of(
    _TEXTS,
    st.lists(
        st.sampled_from(["error TS", "error T", "S", "@", "@@ -", "\n@@ -1 +1 @@", "\n", "x", " "]),
        max_size=30,
    ).map("".join),
)


@settings(max_examples=examples(1_000), deadline=None)
@given(_GATED)
@example("a.ts(1,2): error TS2304: y\n")
@example("x\n@@ -1,2 +1,2 @@\n")
def test_the_gated_scans_find_what_the_ungated_ones_found(text: str) -> None:
    """The candidate scan and the hunk check, each skipping its multi-character search when a
    character that search needs is absent, give what they gave searching every text."""
    assert _candidates(text) == _old_candidates(text)
    assert _has_hunk_line(text) == _old_has_hunk_line(text)


# -- the envelope before it split the text once ----------------------------------------------------


def _old_envelope(
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
            version=version,
        )
        hint = _read_hint(ref, read_tool, json_path=shape.shape == "json")
        out = [first, hint] if path is None else [first, hint, f"File: {path}"]
        return "\n".join([*out, _marker(shape, version=version), shape.body])
    out = [first, _read_hint(ref, read_tool)]
    if path is not None:
        out.append(f"File: {path}")
    return _v0_preview(out, text, preview_chars, tail_share, newlines)


_REF = "0123456789abcdef0123456789abcdef"


@settings(max_examples=examples(500), deadline=None)
@given(
    _TEXTS,
    st.integers(50, 2_000),
    st.sampled_from([0.0, 0.5, 0.75]),
    st.sampled_from([0, 1, 2]),
    st.booleans(),
    st.sampled_from([None, "x\n", "line\n" * 40]),
)
@example("[1, 2]", 100, 0.5, 1, True, None)
@example("a\n" * (WINDOW_CHARS + 10), 500, 0.5, 1, True, None)
def test_the_envelope_split_once_is_the_counted_one(
    text: str, chars: int, share: float, version: int, shaped: bool, earlier: str | None
) -> None:
    """The envelope that counts its newlines from the split its detectors read gives the bytes
    of the one that counted them by another pass, for every version, shape and earlier run."""
    kw = {
        "ref": _REF,
        "tool": "bash",
        "preview_chars": chars,
        "tail_share": share,
        "read_tool": "toolbudget_read",
        "version": version,
        "shaped": shaped,
        "earlier": None if earlier is None else Earlier(_REF, earlier),
    }
    assert envelope(text, **kw) == _old_envelope(text, **kw)  # type: ignore[arg-type]


# -- a session's envelopes, live and resumed -------------------------------------------------------

_SHAPED = [
    "".join(f"{i:5d} passed failed warning: error src/app.py line {i}\n" for i in range(120)),
    '{"items": [' + ", ".join(f'{{"id": {i}, "tags": ["a"]}}' for i in range(150)) + "]}",
    "FAILED tests/test_x.py::test_a - AssertionError\nE   assert 1 == 2\n" * 40
    + "==== 3 failed, 2 passed in 0.5s ====\n",
    "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n" + "-old\n+new\n" * 200,
    "a.ts(1,2): error TS2304: cannot find name\n" * 80,
    "\n".join(f"{i:6d}\tline {i} of the file" for i in range(200)),
]


def test_a_session_shows_the_envelopes_the_replaced_code_made(tmp_path: Path) -> None:
    """Every envelope a session shows, as it goes on and after a resume, is the one the code
    before these changes makes of the body it stored."""
    cfg = BudgetConfig(result_cap=1_000, preview_chars=300, fsync=False)
    history: list[dict[str, object]] = [{"role": "user", "content": "Fix the build."}]
    for r, text in enumerate(_SHAPED):  # a tool each: no result is a re-run of another
        history += [assistant((f"c{r}", f"tool{r}")), results((f"c{r}", text))]
    with Budget.open(tmp_path / "s", config=cfg) as session:
        for end in range(3, len(history) + 1, 2):
            live = session.prepare(history[:end], now=float(end)).messages
    with Budget.open(tmp_path / "s", config=cfg) as resumed:
        again = resumed.prepare(history, now=float(len(history)))
        decided = [resumed.decision(f"c{r}") for r in range(len(_SHAPED))]
        bodies = {
            d.ref: resumed.read(d.ref) for d in decided if d and d.kind == "spilled" and d.ref
        }
    assert again.messages == live
    assert len(bodies) == len(_SHAPED)
    shown = [b["content"] for m in live[2::2] for b in m["content"]]
    for d in decided:
        assert d is not None and d.ref is not None
        old = _old_envelope(
            bodies[d.ref],
            ref=d.ref,
            tool=d.tool,
            preview_chars=cfg.preview_chars,
            tail_share=cfg.tail_share,
            read_tool=cfg.read_tool_name,
            version=PREVIEW_VERSION,
        )
        assert old in shown
