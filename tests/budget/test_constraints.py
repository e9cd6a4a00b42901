"""The user's constraints after a compaction (issue 28, item 5): verbatim, cut at a boundary
with a note saying how much was left out and where to read it, never dropped silently.

On 8473673 a first line longer than ``compact_constraint_chars`` made the recovery carry no
constraint at all (the loop stopped at the first line that did not fit, the goal).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from budget import Budget
from budget.compaction._compaction import attachments, extract_constraints
from budget.formats import ANTHROPIC
from tests._lanes import examples
from tests.compaction import Counting, compaction_config, history
from tests.strategies import assistant, results

NOTE = re.compile(
    r"^\[([\d,]+) more characters of the user's constraints are not shown here; read them in "
    r'full with the toolbudget_read tool: \{"ref": "([^"]+)"\}\]$'
)


def _constraints_section(message: dict[str, Any]) -> list[str]:
    """The lines of a summary message's ``<user-constraints>`` section (none when absent)."""
    found = re.search(
        r"<user-constraints[^>]*>\n(.*?)\n</user-constraints>", message["content"], re.S
    )
    return found.group(1).split("\n") if found else []


def _compacted_with_task(tmp_path: Path, task: str, limit: int) -> tuple[Budget, list[Any]]:
    """A session whose history starts with ``task``, compacted by hand under ``limit``."""
    cfg = compaction_config("manual").model_copy(update={"compact_constraint_chars": limit})
    msgs = history(14)
    msgs[0] = {"role": "user", "content": task}
    session = Budget.open(tmp_path, cfg, summarizer=Counting())
    session.prepare(msgs)
    assert session.compact(msgs)
    return session, session.prepare(msgs).messages


def test_a_goal_longer_than_the_limit_comes_back_cut_with_a_note_that_reads_back(
    tmp_path: Path,
) -> None:
    """A first line over ``compact_constraint_chars`` comes back as its first words, cut at a
    word boundary, then a note with the exact count left out and a ref that reads back every
    constraint line; the rule on the next line is in what reads back."""
    goal = "Port the parser " + " ".join(f"module_{i}" for i in range(60))
    task = f"{goal}\nNever edit tests/."
    session, copy = _compacted_with_task(tmp_path, task, limit=100)
    with session:
        lines = _constraints_section(copy[0])
        assert len(lines) == 2, lines
        shown, note = lines
        assert goal.startswith(shown) and goal[len(shown)] == " " and len(shown) <= 100
        match = NOTE.match(note)
        assert match, note
        full = f"{goal}\nNever edit tests/."
        assert int(match.group(1).replace(",", "")) == len(full) - 1 - len(shown)
        assert session.read(match.group(2)) == full


def test_constraints_that_fit_carry_no_note(tmp_path: Path) -> None:
    """Constraints within the limit come back whole, and no note is added."""
    session, copy = _compacted_with_task(tmp_path, "Fix the parser.\nNever edit tests/.", 1_000)
    with session:
        assert _constraints_section(copy[0]) == ["Fix the parser.", "Never edit tests/."]


def test_a_setting_of_zero_carries_no_constraints_section(tmp_path: Path) -> None:
    """``compact_constraint_chars=0`` turns the section off: no lines, no note."""
    session, copy = _compacted_with_task(tmp_path, "Fix it.\nNever edit tests/.", 0)
    with session:
        assert _constraints_section(copy[0]) == []


def test_the_note_and_its_ref_survive_a_resume(tmp_path: Path) -> None:
    """A resumed session sends the same cut constraints and note (the checkpoint holds them),
    and the ref still reads back."""
    task = "Do " + "x " * 300 + "\nAlways run `make check`."
    session, copy = _compacted_with_task(tmp_path, task, limit=50)
    msgs = history(14)
    msgs[0] = {"role": "user", "content": task}
    session.close()
    with Budget.open(tmp_path, session.config, summarizer=Counting()) as again:
        resumed = again.prepare(msgs).messages
        assert resumed == copy
        match = NOTE.match(_constraints_section(resumed[0])[-1])
        assert match and "Always run `make check`." in again.read(match.group(2))


_word = st.text(
    st.characters(codec="utf-8", exclude_categories=("Zs", "Cc", "Zl", "Zp")),
    min_size=1,
    max_size=30,
)
_words = st.lists(_word, min_size=1, max_size=40)
_line = st.one_of(
    _words.map(" ".join),
    _words.map(lambda w: "Never " + " ".join(w)),
    _words.map(lambda w: "run `" + " ".join(w) + "`"),
    st.text(min_size=1, max_size=300),
)


@settings(max_examples=examples(150), deadline=None)
@given(
    messages=st.lists(st.lists(_line, min_size=1, max_size=5), min_size=1, max_size=4),
    limit=st.integers(0, 1_200),
)
def test_constraints_of_any_length_are_a_verbatim_prefix_and_the_rest_is_counted(
    messages: list[list[str]], limit: int
) -> None:
    """Over lines of every length, first and later, in one to four user messages: what is
    carried is the constraint lines in order, whole but the last (a word-boundary prefix when
    a boundary is in reach), within the limit; the note counts exactly what is left out and its
    stored text holds every constraint line."""
    msgs: list[dict[str, Any]] = []
    for i, lines in enumerate(messages):
        msgs += [
            {"role": "user", "content": "\n".join(lines)},
            assistant((f"t{i}", "bash")),
            results((f"t{i}", "never mind, only a tool result")),
        ]
    found = extract_constraints(msgs, limit_chars=limit)
    picked = found.full.split("\n") if found.full else []
    shown = found.shown
    assert len(shown) <= len(picked)
    assert sum(len(s) for s in shown) <= limit
    assert shown[:-1] == tuple(picked[: max(len(shown) - 1, 0)])
    if shown and shown[-1] != picked[len(shown) - 1]:
        last, whole = shown[-1], picked[len(shown) - 1]
        room = limit - sum(len(s) for s in shown[:-1])
        if any(c in whole[1 : room + 1] for c in " \t"):
            assert whole.startswith(last) and whole[len(last)] in " \t"  # after a whole word
        else:
            assert last == whole[:room].rstrip()  # no boundary in reach: cut where the limit is
    assert found.left_out == sum(len(p) for p in picked) - sum(len(s) for s in shown)
    assert "never mind, only a tool result" not in found.full
    written = [ln.strip() for lines in messages[:3] for t in lines for ln in t.splitlines()]
    if any(written):
        assert picked[0] == next(ln for ln in written if ln)  # the goal leads
    stored: list[str] = []

    def keep(text: str) -> str:
        stored.append(text)
        return "0" * 32

    extra = attachments(
        msgs, ANTHROPIC, len(msgs), constraint_chars=limit, files=0, file_chars=0, keep=keep
    )
    if found.left_out:
        match = NOTE.match(extra.constraints[-1])
        assert match and int(match.group(1).replace(",", "")) == found.left_out
        assert stored == [found.full]
        assert extra.constraints[:-1] == shown
    else:
        assert extra.constraints == shown and not stored


def test_a_note_says_when_the_rest_could_not_be_stored() -> None:
    """When the store refuses the text, the note still says how much was left out (and that it
    could not be stored), never a silent drop."""
    msgs = [{"role": "user", "content": "word " * 100}]
    extra = attachments(
        msgs, ANTHROPIC, 1, constraint_chars=20, files=0, file_chars=0, keep=lambda t: None
    )
    assert extra.constraints[0] == "word word word word"
    assert extra.constraints[1].startswith("[480 more characters of the user's constraints")
    assert "could not be stored" in extra.constraints[1]
