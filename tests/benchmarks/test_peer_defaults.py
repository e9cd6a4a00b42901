"""Each peer strategy's shipped defaults, pinned one below / at / above each threshold.

Every test builds the strategy with its defaults as shipped (only a token counter is injected where
the arithmetic needs one, never a threshold), so changing a default (e.g. claude-code's cap 50k ->
40k, opencode's protect 40k -> 30k, gemini-cli's protect 50k -> 40k, codex 10k -> 8k, the
observation-masking window 10 -> 9) fails a test here. Figures are worked out in the comments.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks import strategies
from benchmarks._count import count_tokens, counter_for
from tests.benchmarks.test_strategies import Conv, contents, replay

PERSISTED = "<persisted-output>"


def chars(obj: Any) -> int:
    """Tokens = characters of every ``text`` and ``content`` string in ``obj`` (a string whole)."""
    if isinstance(obj, str):
        return len(obj)
    if isinstance(obj, dict):
        return sum(chars(v) for k, v in obj.items() if k in ("text", "content"))
    if isinstance(obj, list):
        return sum(chars(v) for v in obj)
    return 0


# --- claude-code: Bash 30k, Grep 20k, other tools 50k, preview 2k, group 200k -------------------


def test_claude_code_default_caps_per_tool(tmp_path: Path) -> None:
    """Bash keeps 30,000 and persists 30,001; Grep 20,000 / 20,001; WebFetch 50,000 / 50,001."""
    conv = Conv().prompt("go")
    conv.round(("b0", "Bash", "b" * 30_000), ("b1", "Bash", "b" * 30_001))
    conv.round(("g0", "Grep", "g" * 20_000), ("g1", "Grep", "g" * 20_001))
    conv.round(("w0", "WebFetch", "w" * 50_000))
    conv.round(("w1", "WebFetch", "w" * 50_001))
    conv.round(("r1", "Read", "r" * 60_000))  # Read is exempt (Infinity)
    outs, session = replay("claude-code", conv.trace(), tmp_path)
    got = contents(outs[-1])
    assert got["b0"] == "b" * 30_000
    assert got["g0"] == "g" * 20_000
    assert got["w0"] == "w" * 50_000
    assert got["r1"] == "r" * 60_000
    # 30,001 / 1024 = 29.3 KB, 20,001 / 1024 = 19.5 KB, 50,001 / 1024 = 48.8 KB.
    for call_id, size, n in (
        ("b1", "29.3KB", 30_001),
        ("g1", "19.5KB", 20_001),
        ("w1", "48.8KB", 50_001),
    ):
        assert got[call_id].startswith(f"{PERSISTED}\nOutput too large ({size}).")
        assert session.recover(call_id) == call_id[0] * n


def test_claude_code_default_preview_is_2000_chars(tmp_path: Path) -> None:
    """A persisted result without newlines shows exactly its first 2,000 characters."""
    text = "".join(chr(ord("a") + i % 26) for i in range(60_000))
    conv = Conv().prompt("go").round(("w", "WebFetch", text))
    outs, _ = replay("claude-code", conv.trace(), tmp_path)
    shown = contents(outs[-1])["w"]
    assert "Preview (first 2KB):\n" + text[:2000] + "\n...\n</persisted-output>" in shown
    assert text[:2001] not in shown


def test_claude_code_default_group_budget_is_200000(tmp_path: Path) -> None:
    """Four 50,000-char results (200,000) stay; a fifth of 1 char (200,001) persists the largest."""
    at = Conv().prompt("go").round(*[(f"a{i}", "WebFetch", str(i) * 50_000) for i in range(4)])
    outs, _ = replay("claude-code", at.trace(), tmp_path / "at")
    assert all(not str(v).startswith(PERSISTED) for v in contents(outs[-1]).values())

    over = Conv().prompt("go")
    over.round(*[(f"a{i}", "WebFetch", str(i) * 50_000) for i in range(4)], ("s", "Edit", "s"))
    outs, _ = replay("claude-code", over.trace(), tmp_path / "over")
    got = contents(outs[-1])
    # Largest first, stable on ties: a0 goes; 150,001 then fits.
    assert got["a0"].startswith(PERSISTED)
    assert [got[f"a{i}"] for i in (1, 2, 3)] == [str(i) * 50_000 for i in (1, 2, 3)]
    assert got["s"] == "s"


# --- opencode: Truncate.output 2,000 lines / 51,200 bytes; prune protect 40k, minimum 20k -------


def test_opencode_default_truncation_at_2000_lines_and_50kb(tmp_path: Path) -> None:
    """2,000 lines and 51,200 bytes pass; 2,001 lines or 51,201 bytes are cut, the file keeps all."""
    lines_at = "\n".join(["l"] * 2000)
    lines_over = "\n".join(["l"] * 2001)
    bytes_at = "x" * 51_200
    bytes_over = "x" * 51_201
    conv = Conv().prompt("go").round(("la", "bash", lines_at), ("lo", "bash", lines_over))
    conv.round(("ba", "bash", bytes_at), ("bo", "bash", bytes_over))
    outs, session = replay("opencode", conv.trace(), tmp_path)
    got = contents(outs[-1])
    assert got["la"] == lines_at
    assert got["ba"] == bytes_at
    # 2,001 lines: the first 2,000 kept (3,999 bytes), 1 line removed.
    assert got["lo"].startswith(lines_at + "\n\n...1 lines truncated...\n\nThe tool call succeeded")
    assert (
        "Full output saved to: /home/user/.local/share/opencode/tool-output/tool_lo\n" in got["lo"]
    )
    # One 51,201-byte line does not fit at all: nothing kept, 51,201 bytes removed.
    assert got["bo"].startswith("\n\n...51201 bytes truncated...\n\n")
    assert session.recover("lo") == lines_over
    assert session.recover("bo") == bytes_over
    assert session.recover("la") is None


def _prune_conv(newest: int, older: int) -> Conv:
    """Turn 1 has two outputs (older, then newest), then two more turns and a fourth prompt."""
    conv = Conv().prompt("P1")
    conv.round(("old", "bash", "o" * older)).round(("new", "bash", "n" * newest))
    conv.prompt("P2").round(("p2", "bash", "x")).prompt("P3").round(("p3", "bash", "y"))
    return conv.prompt("P4")


def test_opencode_default_protect_is_40000_tokens(tmp_path: Path) -> None:
    """Newest 40,000 tokens kept, the older 25,000 pruned; at 40,001 the newest goes too."""
    # Tokens = characters. At P4 the turn of P1 is pruned: newest 40,000 (total 40,000, not
    # over 40,000: kept), older 25,000 (total 65,000: prunable); 25,000 > 20,000: cleared.
    outs, _ = replay("opencode", _prune_conv(40_000, 25_000).trace(), tmp_path / "at", count=chars)
    got = contents(outs[-1])
    assert got["old"] == "[Old tool result content cleared]"
    assert got["new"] == "n" * 40_000
    outs, _ = replay("opencode", _prune_conv(40_001, 25_000).trace(), tmp_path / "up", count=chars)
    got = contents(outs[-1])
    assert got["new"] == got["old"] == "[Old tool result content cleared]"


def test_opencode_default_minimum_is_20000_tokens(tmp_path: Path) -> None:
    """Prunable outputs of 20,000 tokens are left alone (not over the minimum); 20,001 are cleared."""
    outs, _ = replay("opencode", _prune_conv(40_000, 20_000).trace(), tmp_path / "at", count=chars)
    assert contents(outs[-1])["old"] == "o" * 20_000
    outs, _ = replay("opencode", _prune_conv(40_000, 20_001).trace(), tmp_path / "up", count=chars)
    assert contents(outs[-1])["old"] == "[Old tool result content cleared]"


# --- gemini-cli: shell truncation 40,000 chars; masking protect 50k, minimum 30k ----------------


def test_gemini_cli_default_shell_truncation_at_40000_chars(tmp_path: Path) -> None:
    """A 40,000-char shell output passes; 40,001 keeps the first 8,000 and last 32,000 chars."""
    text = "".join(chr(ord("a") + i % 26) for i in range(40_001))
    conv = Conv().prompt("go").round(("at", "run_shell_command", text[:40_000]))
    conv.round(("up", "run_shell_command", text)).round(("rf", "read_file", text))
    outs, session = replay("gemini-cli", conv.trace(), tmp_path)
    got = contents(outs[-1])
    assert got["at"] == text[:40_000]
    assert got["rf"] == text  # only the shell tool (and MCP tools) are truncated
    assert got["up"] == (
        "Output too large. Showing first 8,000 and last 32,000 characters. For full output see: "
        "/home/user/.gemini/tmp/project/tool-outputs/run_shell_command_up.txt\n"
        + text[:8000]
        + "\n\n... [1 characters omitted] ...\n\n"
        + text[-32_000:]
    )
    assert session.recover("up") == text


def _mask_conv(newer: int, older: int) -> Conv:
    """Two read_file outputs (older, newer) then a small latest turn, which is never masked."""
    conv = Conv().prompt("go")
    conv.round(("old", "read_file", "o" * older)).round(("new", "read_file", "n" * newer))
    return conv.round(("last", "read_file", "z"))


def _is_masked(value: Any) -> bool:
    return str(value).startswith("<tool_output_masked>")


def test_gemini_cli_default_protection_is_50000_tokens(tmp_path: Path) -> None:
    """Newest 50,000 tokens are protected and the older 30,000 masked; at 50,001 both are masked."""
    # Tokens = content chars. Scan skips the latest turn; "new" makes 50,000 (not over 50,000),
    # "old" takes it to 80,000: prunable 30,000 >= 30,000, masked.
    outs, _ = replay("gemini-cli", _mask_conv(50_000, 30_000).trace(), tmp_path / "at", count=chars)
    got = contents(outs[-1])
    assert _is_masked(got["old"]) and got["new"] == "n" * 50_000 and got["last"] == "z"
    outs, _ = replay("gemini-cli", _mask_conv(50_001, 30_000).trace(), tmp_path / "up", count=chars)
    got = contents(outs[-1])
    assert _is_masked(got["old"]) and _is_masked(got["new"])


def test_gemini_cli_default_minimum_is_30000_tokens(tmp_path: Path) -> None:
    """29,999 prunable tokens are left alone; 30,000 (at the minimum) are masked."""
    outs, _ = replay("gemini-cli", _mask_conv(50_000, 29_999).trace(), tmp_path / "lo", count=chars)
    assert contents(outs[-1])["old"] == "o" * 29_999
    outs, _ = replay("gemini-cli", _mask_conv(50_000, 30_000).trace(), tmp_path / "at", count=chars)
    assert _is_masked(contents(outs[-1])["old"])


# --- codex: Bytes(10_000) for other models, Tokens(10_000) for Codex models, x1.2 -----------------


def _codex_at_and_over(limit: int, model: str, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """(a text of ``limit`` + 1 letters, what codex under ``model`` shows of a result of exactly
    ``limit`` ("at") and of the whole text ("up"))."""
    text = "".join(chr(ord("a") + i % 26) for i in range(limit + 1))
    conv = Conv().prompt("go").round(("at", "exec_command", text[:limit]))
    conv.round(("up", "exec_command", text))
    outs, _ = replay("codex", replace(conv.trace(), model=model), tmp_path)
    return text, contents(outs[-1])


def test_codex_default_bytes_policy_for_non_codex_models(tmp_path: Path) -> None:
    """gpt-5.5: 12,000 bytes pass; 12,001 keep 6,000 + 6,000 bytes and name 1 char removed."""
    text, got = _codex_at_and_over(12_000, "gpt-5.5", tmp_path)
    assert got["at"] == text[:12_000]
    assert got["up"] == text[:6000] + "…1 chars truncated…" + text[-6000:]


def test_codex_default_tokens_policy_for_codex_models(tmp_path: Path) -> None:
    """gpt-5-codex: 48,000 bytes (12,000 tokens) pass; 48,001 keep 24,000 + 24,000 bytes."""
    text, got = _codex_at_and_over(48_000, "openai/gpt-5-codex", tmp_path)
    assert got["at"] == text[:48_000]
    # 1 byte removed: ceil(1 / 4) = 1 token.
    assert got["up"] == text[:24_000] + "…1 tokens truncated…" + text[-24_000:]


# --- observation masking: a 10-turn window; swe-agent 0.7: 5 observations -------------------------


def test_observation_masking_default_window_is_10_turns(tmp_path: Path) -> None:
    """After 10 turns nothing is masked; after 11 the first turn's output is, the second's is not."""
    conv = Conv().prompt("task")
    for r in range(1, 12):
        conv.round((f"c{r}", "bash", f"out {r}\n"))
    outs, _ = replay("observation-masking", conv.trace(), tmp_path)
    assert contents(outs[10]) == {f"c{r}": f"out {r}\n" for r in range(1, 11)}
    last = contents(outs[11])
    assert last["c1"] == "Old environment output: (1 lines omitted)"
    assert last["c2"] == "out 2\n"


def test_swe_agent_07_default_keeps_5_observations(tmp_path: Path) -> None:
    """With 5 results nothing is elided, with 6 the first is, with 7 the first two."""
    conv = Conv().prompt("task")
    for r in range(1, 8):
        conv.round((f"c{r}", "bash", "line\n"))
    outs, _ = replay("swe-agent-0.7", conv.trace(), tmp_path)
    omitted = [
        sorted(k for k, v in contents(outs[i]).items() if str(v).startswith("Old output"))
        for i in (5, 6, 7)
    ]
    assert omitted == [[], ["c1"], ["c1", "c2"]]


# --- anthropic-context-editing: trigger 100,000 with the trace model's profile, keep 3 -----------


def _ace_conv(sizes: list[int]) -> Conv:
    conv = Conv().prompt("")
    for r, size in enumerate(sizes):
        conv.round((f"c{r}", "bash", "a" * size))
    return conv


def _cleared(outs: list[Any]) -> list[str]:
    return sorted(k for k, v in contents(outs[-1]).items() if v == "[Tool result cleared]")


def test_anthropic_context_editing_default_trigger_and_keep(tmp_path: Path) -> None:
    """At 100,000 input tokens nothing is cleared; at 100,001 all but the last 3 results are."""
    # Tokens = characters; the prompt and the tool_use messages count 0.
    at = _ace_conv([40_000, 30_000, 10_000, 10_000, 10_000])
    outs, _ = replay("anthropic-context-editing", at.trace(), tmp_path, count=chars)
    assert _cleared(outs) == []
    up = _ace_conv([40_000, 30_001, 10_000, 10_000, 10_000])
    outs, _ = replay("anthropic-context-editing", up.trace(), tmp_path, count=chars)
    assert _cleared(outs) == ["c0", "c1"]


def test_anthropic_context_editing_counts_with_the_trace_models_profile(tmp_path: Path) -> None:
    """A GPT trace under 100,000 tokens by its own profile is not cleared, though the costliest
    profile counts it over; a Claude trace of the same messages is."""
    conv = _ace_conv([20_000] * 20)
    trace = conv.trace()
    gpt, claude = replace(trace, model="gpt-5.5"), replace(trace, model="claude-sonnet-4-5")
    history = trace.request_messages(len(trace.requests) - 1)
    by_gpt = sum(counter_for("gpt-5.5")(m) for m in history)
    by_costliest = sum(count_tokens(m) for m in history)
    assert by_gpt <= 100_000 < by_costliest  # the boundary this test is about
    ace = strategies.get("anthropic-context-editing")
    session = ace.open(gpt, tmp_path)
    assert session.prepare(history, usage=None, now=None) == history
    session = ace.open(claude, tmp_path)
    cleared = contents(session.prepare(history, usage=None, now=None))
    assert sum(v == "[Tool result cleared]" for v in cleared.values()) == 17


# --- cc-reducer-proxy: stale after 10 turns at 500 chars, cap after 5 at 4,000, dedup, Bash 200 --


def _cc_turns(*results: tuple[str, str, dict[str, Any], str], padding: int = 0) -> list[Any]:
    """One round per (id, tool, input, output), then ``padding`` rounds of a 1-char output."""
    messages: list[Any] = [{"role": "user", "content": "go"}]
    rounds = [*results, *((f"p{i}", "Bash", {"command": f"true {i}"}, "k") for i in range(padding))]
    for cid, tool, args, out in rounds:
        call = {"type": "tool_use", "id": cid, "name": tool, "input": args}
        messages.append({"role": "assistant", "content": [call]})
        result = {"type": "tool_result", "tool_use_id": cid, "content": out}
        messages.append({"role": "user", "content": [result]})
    return messages


def _cc(messages: list[Any], tmp_path: Path) -> dict[str, Any]:
    session = strategies.get("cc-reducer-proxy").open(Conv().prompt("go").trace(), tmp_path)
    return contents(session.prepare(messages, usage=None, now=None))


def test_cc_reducer_stale_results_keep_500_chars_after_10_turns(tmp_path: Path) -> None:
    """A 501-character result 11 turns old keeps 500 and the note; 500 characters stay whole; at
    10 turns old nothing is cut (the other tool keeps its text: only ANSI and blank runs go)."""
    old: list[tuple[str, str, dict[str, Any], str]] = [
        ("a", "Other", {}, "a" * 501),
        ("b", "Other", {}, "b" * 500),
    ]
    got = _cc(_cc_turns(*old, padding=10), tmp_path)  # a: 11 turns ago, b: 10 turns ago
    assert got["a"] == "a" * 500 + "\n[truncated — result from 11 turns ago]"
    assert got["b"] == "b" * 500
    got = _cc(_cc_turns(("c", "Other", {}, "c" * 501), padding=10), tmp_path)  # 10 turns ago
    assert got["c"] == "c" * 501


def test_cc_reducer_caps_results_over_4000_chars_after_5_turns(tmp_path: Path) -> None:
    """6 turns old: 4,001 characters keep 4,000 and the note, 4,000 stay; 5 turns old: whole."""
    text = "line\n" * 800 + "x"  # 4,001 characters, one 801-line result of another tool
    got = _cc(
        _cc_turns(("a", "Other", {}, text), ("b", "Other", {}, "y" * 4_000), padding=5), tmp_path
    )
    assert (
        got["a"] == text[:4_000] + "\n[capped — result from 6 turns ago exceeded 4000 char limit]"
    )
    assert got["b"] == "y" * 4_000
    got = _cc(_cc_turns(("c", "Other", {}, text), padding=5), tmp_path)
    assert got["c"] == text


def test_cc_reducer_dedups_repeated_reads_and_cuts_bash_at_200_lines(tmp_path: Path) -> None:
    """An earlier Read of the same file is superseded, a Read of another range is not; Bash output
    of 201 lines keeps 200 and says so, 200 lines stay whole."""
    lines_201 = "\n".join(f"l{i}" for i in range(201))
    lines_200 = "\n".join(f"m{i}" for i in range(200))
    got = _cc(
        _cc_turns(
            ("r1", "Read", {"file_path": "/a.py"}, "one"),
            ("r2", "Read", {"file_path": "/a.py", "offset": 5}, "two"),
            ("r3", "Read", {"file_path": "/a.py"}, "three"),
            ("b1", "Bash", {"command": "ls -R"}, lines_201),
            ("b2", "Bash", {"command": "ls"}, lines_200),
        ),
        tmp_path,
    )
    assert got["r1"] == "[deduplicated — superseded by later Read of /a.py]"
    assert (got["r2"], got["r3"]) == ("two", "three")
    assert got["b1"] == "\n".join(f"l{i}" for i in range(200)) + "\n[truncated, 1 more lines]"
    assert got["b2"] == lines_200


def test_cc_reducer_replaces_a_license_header_of_a_read_file(tmp_path: Path) -> None:
    """A Read result opening with a shebang and a ``#`` comment naming a license keeps the
    shebang and shows the comment as one marker line; a comment naming none is kept."""
    licensed = "#!/usr/bin/env python\n# Copyright 2024 A\n# MIT License\n\nimport os\n"
    plain = "# just a comment\nimport os\n"
    got = _cc(
        _cc_turns(
            ("r1", "Read", {"file_path": "/a.py"}, licensed),
            ("r2", "Read", {"file_path": "/b.py"}, plain),
        ),
        tmp_path,
    )
    assert got["r1"] == "#!/usr/bin/env python\n[license header - 3 lines]\nimport os\n"
    assert got["r2"] == plain
