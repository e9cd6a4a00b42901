"""An answer quoting a line of a kept result that holds a lone surrogate (a hostile review)."""

from __future__ import annotations

from pathlib import Path

from budget import Budget

# `ls` output decoded with errors="surrogateescape" (os.fsdecode of a Latin-1 file name).
LINES = [f"{i:05d} file name listed by ls: caf\udce9_{i}.txt and more" for i in range(200)]
HISTORY = [
    {"role": "user", "content": "List the files."},
    {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "c1", "name": "bash", "input": {"command": "ls"}}],
    },
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "\n".join(LINES)}],
    },
]
ANSWERED = [
    *HISTORY,
    {"role": "assistant", "content": [{"type": "text", "text": "The odd one is:\n" + LINES[100]}]},
    {"role": "user", "content": "Thanks."},
]


def test_an_answer_quoting_a_result_line_with_a_lone_surrogate_is_budgeted(
    tmp_path: Path,
) -> None:
    """A kept result holding a lone surrogate, quoted line for line by a later answer, is budgeted
    (the quote's hash encodes it as every other hash site does), not a raw UnicodeEncodeError."""
    with Budget.open(tmp_path / "s", {"fsync": False}) as session:
        first = session.prepare(HISTORY, now=1.0)
        assert first.report.decisions[0].kind == "kept"  # the surrogate is accepted
        assert session.prepare(ANSWERED, now=2.0).messages[:3] == HISTORY
