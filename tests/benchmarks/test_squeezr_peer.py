"""The squeezr peer at its shipped settings (sergioramosv/squeezr v1.46.3, commit 2870ef1).

Each expected output is worked out from ``src/deterministic.ts`` and ``src/compressor.ts`` at that
commit (and was checked against that source run under Node): the constants are pinned one below
and at each threshold, so changing one fails a test here.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from benchmarks import strategies
from benchmarks.strategies._squeezr_rules import preprocess_for_tool
from tests.benchmarks.test_strategies import Conv, contents


def _lines(n: int, prefix: str = "l") -> str:
    return "\n".join(f"{prefix}{i}" for i in range(n))


def _turns(*results: tuple[str, str, dict[str, Any], str]) -> list[Any]:
    """A prompt, then one round per (id, tool, input, output)."""
    messages: list[Any] = [{"role": "user", "content": "go"}]
    for cid, tool, args, out in results:
        call = {"type": "tool_use", "id": cid, "name": tool, "input": args}
        messages.append({"role": "assistant", "content": [call]})
        result = {"type": "tool_result", "tool_use_id": cid, "content": out}
        messages.append({"role": "user", "content": [result]})
    return messages


def _squeezr(messages: list[Any], tmp_path: Path) -> dict[str, Any]:
    session = strategies.get("squeezr").open(Conv().prompt("go").trace(), tmp_path)
    return contents(session.prepare(messages, usage=None, now=None))


def test_squeezr_bash_keeps_the_last_50_of_more_than_80_lines() -> None:
    """81 lines of unrecognised Bash output keep the last 50 after a marker and 80 stay whole;
    at pressure 0.9 the limits are 50 and 30."""
    assert preprocess_for_tool(_lines(81), "Bash") == (
        "... [31 earlier lines omitted]\n" + "\n".join(f"l{i}" for i in range(31, 81))
    )
    assert preprocess_for_tool(_lines(80), "Bash") == _lines(80)
    assert preprocess_for_tool(_lines(51), "Bash", 0.9) == (
        "... [21 earlier lines omitted]\n" + "\n".join(f"l{i}" for i in range(21, 51))
    )
    assert preprocess_for_tool(_lines(50), "Bash", 0.9) == _lines(50)


def test_squeezr_read_keeps_100_head_and_80_tail_lines_of_more_than_200() -> None:
    """A 201-line read keeps lines 0-99 and 121-200 around an omission marker; 200 stay whole;
    a lockfile over 200 lines becomes one line of counts."""
    head = "\n".join(f"l{i}" for i in range(100))
    tail = "\n".join(f"l{i}" for i in range(121, 201))
    assert (
        preprocess_for_tool(_lines(201), "Read")
        == f"{head}\n\n... [21 lines omitted] ...\n\n{tail}"
    )
    assert preprocess_for_tool(_lines(200), "Read") == _lines(200)
    lock = "# yarn lockfile v1\n" + "\n".join(
        f'"pkg{i}@^1":\n  version "1.{i}"' for i in range(101)
    )
    assert preprocess_for_tool(lock, "Read") == (
        "[lockfile — 203 lines, ~101 packages — omitted to save tokens]"
    )


def test_squeezr_grep_groups_from_20_lines_and_a_listing_keeps_8() -> None:
    """20 ``file:line:text`` matches are grouped by file (19 stay as they are); 20 file names
    with no match text keep their first 8."""
    matches = [f"src/f{i % 3}.py:{i}:hit {i}" for i in range(20)]
    grouped = "\n\n".join(
        f"src/f{f}.py ({n} matches):\n" + "\n".join(f"  hit {i}" for i in range(f, 20, 3))
        for f, n in ((0, 7), (1, 7), (2, 6))
    )
    assert preprocess_for_tool("\n".join(matches), "Grep") == grouped
    assert preprocess_for_tool("\n".join(matches[:19]), "Grep") == "\n".join(matches[:19])
    listing = [f"src/f{i}.py" for i in range(20)]
    assert preprocess_for_tool("\n".join(listing), "Grep") == "\n".join(listing[:8])


def test_squeezr_glob_over_30_paths_counts_files_per_directory() -> None:
    """31 paths become a count per directory, the fullest first; 30 stay as they are."""
    paths = [f"dir{i % 2}/sub/f{i}.ts" for i in range(31)]
    assert preprocess_for_tool("\n".join(paths), "Glob") == (
        "31 files total:\ndir0/sub/ (16 files)\ndir1/sub/ (15 files)"
    )
    assert preprocess_for_tool("\n".join(paths[:30]), "Glob") == "\n".join(paths[:30])


def test_squeezr_base_cleanup_of_any_tool() -> None:
    """ANSI codes, blank lines and timestamps go; a line seen 3 times is kept once with a
    count, one seen twice stays twice."""
    text = (
        "\x1b[31mred\x1b[0m\n\n\nsame\nsame\nsame\ntwice\ntwice\n"
        "2024-01-02T10:11:12Z boot\n[12:00:01] tick"
    )
    assert preprocess_for_tool(text, "WebFetch") == (
        "red\nsame\n  ... [repeated 2 more times]\ntwice\ntwice\n boot\n tick"
    )


def test_squeezr_git_log_and_status_become_one_line_each() -> None:
    """A full git log is one line per commit (short hash, subject, author, date); git status
    lists its branch, tracking note and files by section."""
    log = (
        "commit abcdef1234567\nAuthor: Ann Lee <ann@x.org>\nDate:   Mon Jan 1\n\n    Fix the"
        " parser\n\ncommit 1234567890abc\nAuthor: Bo <bo@x.org>\nDate:   Tue Jan 2\n\n    Add tests\n"
    )
    assert preprocess_for_tool(log, "Bash") == (
        "abcdef1 Fix the parser (Ann Lee, Mon Jan 1)\n1234567 Add tests (Bo, Tue Jan 2)"
    )
    status = (
        "On branch main\nYour branch is ahead of 'origin/main' by 1 commit.\n\nChanges not staged"
        ' for commit:\n  (use "git add <file>...")\n\tmodified:   a.py\n\nUntracked files:\n'
        "\tnew.txt\n"
    )
    assert preprocess_for_tool(status, "Bash") == (
        "* main [Your branch is ahead of 'origin/main' by 1 commit.]\n"
        "~ Modified: 1 file\n   a.py\n? Untracked: 1 file\n   new.txt"
    )


def test_squeezr_dedups_an_earlier_identical_result_of_200_chars(tmp_path: Path) -> None:
    """An earlier Read whose 200-character text comes again becomes the expand placeholder (the
    latest copy stays); 199 characters, or a Glob, are not deduplicated."""
    text, short = "x" * 200, "y" * 199
    got = _squeezr(
        _turns(
            ("r1", "Read", {"file_path": "/a"}, text),
            ("g1", "Glob", {"pattern": "*"}, text),
            ("s1", "Read", {"file_path": "/s"}, short),
            ("r2", "Read", {"file_path": "/a"}, text),
            ("g2", "Glob", {"pattern": "*"}, text),
            ("s2", "Read", {"file_path": "/s"}, short),
        ),
        tmp_path,
    )
    ref = hashlib.md5(text.encode()).hexdigest()[:6]  # expand.ts's storeOriginal id
    assert got["r1"] == (
        f"[same file content as a later read in conversation — squeezr_expand({ref}) to retrieve]"
    )
    assert (got["r2"], got["g1"], got["g2"], got["s1"], got["s2"]) == (
        text,
        text,
        text,
        short,
        short,
    )


def test_squeezr_pressure_from_the_conversations_size_tightens_bash(tmp_path: Path) -> None:
    """With 720,000 characters of history (pressure 0.9) a 51-line Bash output keeps its last
    30 lines; in a small conversation it stays whole; ``squeezr:skip`` leaves it alone."""
    bash = _lines(51)
    padding: tuple[str, str, dict[str, Any], str] = ("p", "WebFetch", {}, "z" * 720_000)
    got = _squeezr(_turns(padding, ("b", "Bash", {"command": "ls"}, bash)), tmp_path)
    assert got["b"] == "... [21 earlier lines omitted]\n" + "\n".join(
        f"l{i}" for i in range(21, 51)
    )
    assert _squeezr(_turns(("b", "Bash", {"command": "ls"}, bash)), tmp_path)["b"] == bash
    skipped = ("b", "Bash", {"command": "ls  # squeezr:skip"}, bash)
    assert _squeezr(_turns(padding, skipped), tmp_path)["b"] == bash


def test_squeezr_cleans_old_prose_and_inputs_but_not_the_last_3_assistant_turns(
    tmp_path: Path,
) -> None:
    """An assistant text of 300+ characters 3 turns back loses its narration and emphasis, one
    of 299 characters or in the last 3 turns is kept; an old Bash command of 200+ characters is
    cleaned, a recent one is not; the last user text stays whole."""
    prose = "Let me check. I'll **fix** it in order to pass. " + "x" * 252  # 300 characters
    short = prose[:-1]  # 299
    long_command = "echo a\n\n\n" + "b" * 200
    messages: list[Any] = [{"role": "user", "content": prose}]
    for k in range(5):
        text = prose if k in (0, 4) else short
        call = {
            "type": "tool_use",
            "id": f"c{k}",
            "name": "Bash",
            "input": {"command": long_command},
        }
        messages.append({"role": "assistant", "content": [{"type": "text", "text": text}, call]})
        result = {"type": "tool_result", "tool_use_id": f"c{k}", "content": "ok"}
        messages.append({"role": "user", "content": [result]})
    messages.append({"role": "user", "content": prose})
    session = strategies.get("squeezr").open(Conv().prompt("go").trace(), tmp_path)
    out = session.prepare(messages, usage=None, now=None)
    cleaned = "check. fix it to pass. " + "x" * 252  # worked out with the source under Node
    assert out[0]["content"] == cleaned  # an earlier user message
    assert out[-1]["content"] == prose  # the live ask
    assert out[1]["content"][0]["text"] == cleaned  # 5 assistant turns back
    assert out[3]["content"][0]["text"] == short  # under 300 characters
    assert out[9]["content"][0]["text"] == prose  # among the last 3
    assert out[1]["content"][1]["input"] == {"command": "echo a\n" + "b" * 200}
    assert out[9]["content"][1]["input"] == {"command": long_command}
