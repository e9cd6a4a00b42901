"""The peer strategies on small hand-made traces, with results worked out by hand.

Most tests pass a simple counter so the arithmetic can be checked: ``chars4`` counts the characters
of every ``text`` and ``content`` string in an object (a bare string counts whole) and divides by 4.
"""

from __future__ import annotations

import copy
import importlib
import json
import pkgutil
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import pytest

from benchmarks import strategies
from benchmarks.cache import CacheResult, CacheSim, Segmenter
from benchmarks.strategies import Declaration, claude_code, codex, gemini_cli
from benchmarks.trace import Request, Trace
from budget._errors import ConfigError
from tests.benchmarks._peers import peer_options

Message = dict[str, Any]


def _chars(obj: Any) -> int:
    if isinstance(obj, str):
        return len(obj)
    if isinstance(obj, dict):
        return sum(_chars(v) for k, v in obj.items() if k in ("text", "content"))
    if isinstance(obj, list):
        return sum(_chars(v) for v in obj)
    return 0


def chars4(obj: Any) -> int:
    """Characters of the text and content strings in ``obj``, divided by 4."""
    return _chars(obj) // 4


class Conv:
    """Builds a canonical history and the requests a replay would send (one per user message)."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.requests: list[Request] = []

    def _request(self) -> None:
        self.requests.append(Request(n_messages=len(self.messages), timestamp=len(self.requests)))

    def prompt(self, text: str) -> Conv:
        """A user prompt, and the request answering it."""
        self.messages.append({"role": "user", "content": text})
        self._request()
        return self

    def round(self, *results: tuple[str, str, Any], is_error: bool = False) -> Conv:
        """An assistant message calling (id, tool) for each result, then the results."""
        self.calls(*[(cid, tool) for cid, tool, _ in results])
        return self.results(*[(cid, body) for cid, _, body in results], is_error=is_error)

    def calls(self, *calls: tuple[str, str]) -> Conv:
        """An assistant message with these tool calls (no request)."""
        content = [
            {"type": "tool_use", "id": cid, "name": tool, "input": {"arg": cid}}
            for cid, tool in calls
        ]
        self.messages.append({"role": "assistant", "content": content})
        return self

    def results(self, *pairs: tuple[str, Any], is_error: bool = False) -> Conv:
        """A user message with these results, and the next request."""
        blocks: list[dict[str, Any]] = []
        for cid, body in pairs:
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": cid, "content": body}
            if is_error:
                block["is_error"] = True
            blocks.append(block)
        self.messages.append({"role": "user", "content": blocks})
        self._request()
        return self

    def trace(self, system: str = "") -> Trace:
        """The finished trace."""
        return Trace(
            name="hand/made",
            path="hand-made",
            format="anthropic",
            provider="anthropic",
            messages=tuple(self.messages),
            requests=tuple(self.requests),
            system=system,
        )


def replay(name: str, trace: Trace, workdir: Path, **overrides: Any) -> tuple[list[Any], Any]:
    """Every request copy the strategy prepares for the trace, and its session."""
    session = strategies.get(name, **overrides).open(trace, workdir)
    outs = []
    for i, request in enumerate(trace.requests):
        outs.append(session.prepare(trace.request_messages(i), usage=None, now=request.timestamp))
    return outs, session


def contents(messages: Sequence[Message]) -> dict[str, Any]:
    """Tool result content by call id."""
    found: dict[str, Any] = {}
    for message in messages:
        if isinstance(message["content"], list):
            for block in message["content"]:
                if block.get("type") == "tool_result":
                    found[block["tool_use_id"]] = block["content"]
    return found


# --- invariants shared by every strategy -----------------------------------------------------

PNG = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}

AGGRESSIVE: dict[str, dict[str, Any]] = {
    "none": {},
    "toolbudget": {
        # Paths name each session's own directory; the twin check compares envelope bytes.
        "include_path": False,
        "result_cap": 500,
        "preview_chars": 100,
        "stale_floor": 400,
        "stub_chars": 100,
        "min_reclaim_tokens": 0,
        "protect_rounds": 1,
        "fsync": False,
    },
    **peer_options(chars4),
}


def mixed_trace() -> Trace:
    """Parallel calls, an image, an error, an empty result and several prompts."""
    conv = Conv().prompt("start the task")
    conv.round(("a1", "Bash", "x" * 900), ("a2", "Grep", "y\n" * 400))
    conv.round(("b1", "Read", [{"type": "text", "text": "z" * 700}, PNG]))
    conv.round(("c1", "Bash", ""), ("c2", "run_shell_command", "Output: " + "o\n" * 300))
    conv.prompt("now the second part")
    conv.round(("d1", "Bash", "boom " * 200), is_error=True)
    conv.round(("e1", "Bash", json.dumps({"k": "v" * 800})))
    conv.prompt("third")
    conv.round(("f1", "Bash", "f" * 1200))
    conv.prompt("fourth")
    conv.round(("g1", "Bash", "g" * 50))
    return conv.trace(system="be brief")


def _shape(messages: Sequence[Message]) -> list[tuple[str, list[tuple[str, str]]]]:
    shape = []
    for message in messages:
        ids: list[tuple[str, str]] = []
        if isinstance(message["content"], list):
            for block in message["content"]:
                if block.get("type") == "tool_use":
                    ids.append(("use", block["id"]))
                elif block.get("type") == "tool_result":
                    ids.append(("result", block["tool_use_id"]))
        shape.append((message["role"], ids))
    return shape


@pytest.mark.parametrize("name", list(AGGRESSIVE))
def test_strategy_leaves_input_unchanged_and_keeps_pairing(name: str, tmp_path: Path) -> None:
    """Every strategy leaves its input untouched, keeps tool pairing, and copies only edits."""
    trace = mixed_trace()
    pristine = copy.deepcopy(trace.messages)
    session = strategies.get(name, **AGGRESSIVE[name]).open(trace, tmp_path / "a")
    twin = strategies.get(name, **AGGRESSIVE[name]).open(trace, tmp_path / "b")
    changed_any = False
    for i, request in enumerate(trace.requests):
        history = trace.request_messages(i)
        before = copy.deepcopy(history)
        out = session.prepare(history, usage=None, now=request.timestamp)
        assert history == before
        assert out is not history
        assert _shape(out) == _shape(history)
        for got, orig in zip(out, history, strict=True):
            if got is not orig:
                changed_any = True
                assert got["role"] == orig["role"]
                assert len(got["content"]) == len(orig["content"])
        # Deterministic: a second session makes byte-identical copies.
        assert twin.prepare(history, usage=None, now=request.timestamp) == out
    assert trace.messages == pristine
    assert changed_any == (name not in ("none", "swe-agent"))


def test_each_strategy_is_one_declaration_in_its_module() -> None:
    """The registry is exactly the modules' ``STRATEGY`` declarations, each building its name."""
    declared: dict[str, Declaration[Any]] = {}
    for info in pkgutil.iter_modules(strategies.__path__):
        module = importlib.import_module(f"{strategies.__name__}.{info.name}")
        for attr, value in vars(module).items():
            if attr.startswith("STRATEGY") and isinstance(value, Declaration):
                assert value.name not in declared, f"{value.name} declared twice"
                declared[value.name] = value
    assert sorted(declared) == sorted([*strategies.names(), *strategies.compacting_names()])
    for name in strategies.names():
        assert strategies.STRATEGIES[name] is declared[name]
        assert strategies.get(name).name == name


def test_registry_names_and_errors() -> None:
    """The registry lists every peer, builds with overrides and rejects unknown names."""
    assert strategies.names() == list(AGGRESSIVE)
    assert strategies.get("swe-agent-0.7", n=7).config.n == 7  # type: ignore[attr-defined]
    assert strategies.get("codex").name == "codex"
    with pytest.raises(ConfigError, match="unknown strategy 'nope'"):
        strategies.get("nope")
    with pytest.raises(ConfigError, match="swe-agent"):
        strategies.get("swe-agent", window=3)
    with pytest.raises(ConfigError, match="positive"):
        strategies.get("swe-agent-0.7", n=0)


def test_none_shares_every_message(tmp_path: Path) -> None:
    """The baseline returns a new list holding the very same message objects."""
    trace = mixed_trace()
    outs, session = replay("none", trace, tmp_path)
    last = trace.request_messages(len(trace.requests) - 1)
    assert all(a is b for a, b in zip(outs[-1], last, strict=True))
    assert session.recover("a1") is None


# --- claude-code -----------------------------------------------------------------------------

DIR = claude_code.ClaudeCodeConfig().shown_dir


def test_claude_code_cap_preview_and_recovery(tmp_path: Path) -> None:
    """A result over the cap is spilled with Claude Code's exact message; it is recoverable."""
    text = "x" * 15 + "\n" + "y" * 134  # 150 chars; the newline at 15 lies past half of 20
    conv = Conv().prompt("go").round(("c1", "Bash", text), ("c2", "Bash", "a" * 100))
    outs, session = replay("claude-code", conv.trace(), tmp_path, cap_chars=100, preview_chars=20)
    got = contents(outs[-1])
    assert got["c1"] == (
        "<persisted-output>\n"
        f"Output too large (150 bytes). Full output saved to: {DIR}/c1.txt\n\n"
        "Preview (first 20 bytes):\n" + "x" * 15 + "\n...\n</persisted-output>"
    )
    assert got["c2"] == "a" * 100  # not strictly longer than the cap
    assert session.recover("c1") == text
    assert (tmp_path / "tool-results" / "c1.txt").read_text() == text
    assert session.recover("c2") is None


def test_claude_code_group_budget_largest_first_then_frozen(tmp_path: Path) -> None:
    """The group budget spills the largest fresh result first and never revisits decisions."""
    conv = Conv().prompt("go")
    # 90 + 80 + 90 = 260 > 250: spill the largest (90; c2 before c4 on the tie): 170 left.
    conv.round(("c2", "Bash", "b" * 90), ("c3", "Bash", "c" * 80), ("c4", "Bash", "d" * 90))
    # One assistant message, its results arriving as two user messages (one group).
    conv.calls(("c5", "Bash"), ("c6", "Bash"), ("c7", "Bash"))
    conv.results(("c5", "e" * 100), ("c6", "f" * 100))  # 200 <= 250: both kept, frozen
    conv.results(("c7", "g" * 90))  # frozen 200 + fresh 90 = 290 > 250: c7 spilled
    outs, session = replay(
        "claude-code",
        conv.trace(),
        tmp_path,
        cap_chars=100,
        preview_chars=20,
        group_budget_chars=250,
    )
    after_round = contents(outs[1])
    assert after_round["c2"].startswith("<persisted-output>\nOutput too large (90 bytes).")
    assert after_round["c3"] == "c" * 80
    assert after_round["c4"] == "d" * 90
    assert contents(outs[2])["c5"] == "e" * 100
    last = contents(outs[3])
    assert last["c5"] == "e" * 100
    assert last["c6"] == "f" * 100
    assert last["c7"].startswith("<persisted-output>\nOutput too large (90 bytes).")
    # The replacement is byte-identical on every later request.
    assert last["c2"] == after_round["c2"]
    assert session.recover("c7") == "g" * 90


def test_claude_code_empty_exempt_image_and_json(tmp_path: Path) -> None:
    """Empty results get a marker; Read, images and JSON follow Claude Code's rules."""
    conv = Conv().prompt("go")
    conv.round(("e1", "Bash", ""), ("r1", "Read", "r" * 500))
    conv.round(("i1", "Bash", [{"type": "text", "text": "p" * 500}, PNG]))
    conv.round(("j1", "Bash", json.dumps({"k": "v" * 200})))
    outs, _ = replay("claude-code", conv.trace(), tmp_path, cap_chars=100)
    got = contents(outs[-1])
    assert got["e1"] == "(Bash completed with no output)"
    assert got["r1"] == "r" * 500
    assert got["i1"][1] == PNG
    assert got["i1"][0]["text"] == "p" * 500
    assert f"{DIR}/j1.json" in got["j1"]


def test_claude_code_per_tool_caps(tmp_path: Path) -> None:
    """A per-tool cap replaces the global one for that tool only."""
    conv = Conv().prompt("go").round(("g1", "Grep", "g" * 150), ("b1", "Bash", "b" * 150))
    outs, _ = replay(
        "claude-code", conv.trace(), tmp_path, cap_chars=200, tool_caps=(("Grep", 100),)
    )
    got = contents(outs[-1])
    assert got["g1"].startswith("<persisted-output>\nOutput too large (150 bytes).")
    assert got["b1"] == "b" * 150


def test_claude_code_file_size_format() -> None:
    """``formatFileSize`` output for bytes, KB and MB."""
    assert claude_code.format_file_size(1023) == "1023 bytes"
    assert claude_code.format_file_size(1024) == "1KB"
    assert claude_code.format_file_size(1536) == "1.5KB"
    assert claude_code.format_file_size(2000) == "2KB"  # 1.953 KB, one decimal: 2.0 -> 2
    assert claude_code.format_file_size(3 * 1024 * 1024) == "3MB"


# --- anthropic-context-editing ---------------------------------------------------------------


def _rounds(n: int, size: int = 400, tool: str = "Bash") -> Conv:
    conv = Conv().prompt("go")  # "go" counts 2 // 4 = 0 tokens
    for r in range(1, n + 1):
        conv.round((f"c{r}", tool, "x" * size))
    return conv


def test_anthropic_context_editing_trigger_and_keep(tmp_path: Path) -> None:
    """Past the trigger, all results but the last ``keep`` tool uses are cleared, from scratch."""
    # Each result is 400 chars = 100 tokens; after round r the prompt holds 100*r tokens.
    outs, _ = replay(
        "anthropic-context-editing",
        _rounds(4).trace(),
        tmp_path,
        trigger=250,
        keep=2,
        placeholder="[cleared]",
        count=chars4,
    )
    assert contents(outs[2]) == {"c1": "x" * 400, "c2": "x" * 400}  # 200 <= 250
    assert contents(outs[3])["c1"] == "[cleared]"  # 300 > 250: keep c2, c3
    assert contents(outs[3])["c2"] == "x" * 400
    last = contents(outs[4])  # 400 > 250: keep c3, c4
    assert [last[f"c{r}"] == "[cleared]" for r in range(1, 5)] == [True, True, False, False]


def test_anthropic_context_editing_clear_at_least(tmp_path: Path) -> None:
    """Nothing is cleared when the clearable results reclaim less than ``clear_at_least``."""
    # Clearing one result reclaims 100 - 2 ("[cleared]" is 9 chars = 2 tokens) = 98 < 150;
    # two reclaim 196 >= 150.
    outs, _ = replay(
        "anthropic-context-editing",
        _rounds(4).trace(),
        tmp_path,
        trigger=250,
        keep=2,
        clear_at_least=150,
        placeholder="[cleared]",
        count=chars4,
    )
    assert outs[3] == _rounds(4).trace().request_messages(3)
    assert contents(outs[4])["c1"] == "[cleared]"
    assert contents(outs[4])["c2"] == "[cleared]"


def test_anthropic_context_editing_exclude_and_clear_inputs(tmp_path: Path) -> None:
    """Excluded tools keep their results; ``clear_tool_inputs`` empties the cleared calls' input."""
    conv = Conv().prompt("go").round(("c1", "Memory", "m" * 400))
    conv.round(("c2", "Bash", "x" * 400)).round(("c3", "Bash", "x" * 400))
    outs, _ = replay(
        "anthropic-context-editing",
        conv.trace(),
        tmp_path,
        trigger=250,
        keep=1,
        exclude_tools=frozenset({"Memory"}),
        clear_tool_inputs=True,
        count=chars4,
    )
    last = outs[-1]
    assert contents(last)["c1"] == "m" * 400
    assert contents(last)["c2"] == "[Tool result cleared]"
    calls = {b["id"]: b["input"] for m in last if m["role"] == "assistant" for b in m["content"]}
    assert calls == {"c1": {"arg": "c1"}, "c2": {}, "c3": {"arg": "c3"}}


# --- langchain (the real package) ------------------------------------------------------------


def _lc_counter(messages: Sequence[Any]) -> int:
    total = 0
    for m in messages:
        content = m.content
        total += len(content) if isinstance(content, str) else _chars(content)
    return total // 4


def test_langchain_middleware_keep_and_clear_at_least(tmp_path: Path) -> None:
    """The real middleware clears all but 3 results, or one at a time with ``clear_at_least``."""
    trace = _rounds(6).trace()
    # After round r the counter sees (2 + 400*r) // 4 = 100*r tokens.
    outs, _ = replay("langchain", trace, tmp_path, trigger=250, token_counter=_lc_counter)
    assert "[cleared]" not in contents(outs[3]).values()  # 3 results, keep 3
    assert contents(outs[4])["c1"] == "[cleared]"
    assert [v == "[cleared]" for v in contents(outs[6]).values()] == [True] * 3 + [False] * 3
    # clear_at_least=150 at round 6 (600 tokens): clearing c1 -> (2+2000+9)//4 = 502, 98
    # reclaimed; c2 -> (2+1600+18)//4 = 405, 195 >= 150: stop, c3 stays.
    outs, _ = replay(
        "langchain", trace, tmp_path, trigger=250, clear_at_least=150, token_counter=_lc_counter
    )
    assert [v == "[cleared]" for v in contents(outs[6]).values()] == [True] * 2 + [False] * 4


def test_langchain_package_defaults(tmp_path: Path) -> None:
    """With the package defaults (100k tokens, approximate counter) large histories get cleared."""
    trace = _rounds(5, size=100_000).trace()
    outs, _ = replay("langchain", trace, tmp_path)
    # 5 x 100k chars is about 125k approximate tokens > 100k: the oldest 2 of 5 are cleared.
    assert [v == "[cleared]" for v in contents(outs[5]).values()] == [
        True,
        True,
        False,
        False,
        False,
    ]
    assert "[cleared]" not in contents(outs[3]).values()  # about 75k tokens


# --- swe-agent and observation masking -------------------------------------------------------


def _line_rounds(n: int) -> Conv:
    conv = Conv().prompt("task")
    for r in range(1, n + 1):
        conv.round((f"c{r}", "bash", "line\n" * r))  # result r has r lines
    return conv


def test_swe_agent_07_keeps_last_five_observations(tmp_path: Path) -> None:
    """SWE-agent 0.7: results older than the last 5 read ``Old output omitted (N lines)``."""
    outs, _ = replay("swe-agent-0.7", _line_rounds(8).trace(), tmp_path)
    assert contents(outs[5]) == {f"c{r}": "line\n" * r for r in range(1, 6)}
    assert contents(outs[6])["c1"] == "Old output omitted (1 lines)"
    last = contents(outs[8])
    assert [last[f"c{r}"] for r in (1, 2, 3)] == [
        "Old output omitted (1 lines)",
        "Old output omitted (2 lines)",
        "Old output omitted (3 lines)",
    ]
    assert last["c4"] == "line\n" * 4


def test_swe_agent_07_polling(tmp_path: Path) -> None:
    """With polling 2 the elided set moves every second observation."""
    # Observations = task + r results. last_removed = ((1+r)//2)*2 - 5; omitted = that - 1.
    # r=6: 6-5=1 -> 0 omitted; r=7: 8-5=3 -> 2; r=8: 8-5=3 -> 2.
    outs, _ = replay("swe-agent-0.7", _line_rounds(8).trace(), tmp_path, polling=2)

    def omitted(i: int) -> int:
        return sum(str(v).startswith("Old output omitted") for v in contents(outs[i]).values())

    assert [omitted(6), omitted(7), omitted(8)] == [0, 2, 2]


def test_swe_agent_1x_default_elides_nothing(tmp_path: Path) -> None:
    """SWE-agent 1.x as shipped (cache_control only) sends all 8 results whole on every request."""
    outs, _ = replay("swe-agent", _line_rounds(8).trace(), tmp_path)
    assert contents(outs[8]) == {f"c{r}": "line\n" * r for r in range(1, 9)}


def test_observation_masking_window_counts_turns(tmp_path: Path) -> None:
    """All results of turns older than the window are masked, however many per turn."""
    conv = Conv().prompt("task")
    conv.round(("a", "bash", "1\n2\n"), ("b", "bash", "1\n"))
    conv.round(("c", "bash", "1\n2\n3\n")).round(("d", "bash", "x")).round(("e", "bash", "y"))
    outs, _ = replay("observation-masking", conv.trace(), tmp_path, window=2)
    last = contents(outs[-1])  # 4 turns, window 2: turns 1 and 2 masked
    assert last == {
        "a": "Old environment output: (2 lines omitted)",
        "b": "Old environment output: (1 lines omitted)",
        "c": "Old environment output: (3 lines omitted)",
        "d": "x",
        "e": "y",
    }
    assert contents(outs[2]) == {"a": "1\n2\n", "b": "1\n", "c": "1\n2\n3\n"}


# --- opencode --------------------------------------------------------------------------------

CLEARED = "[Old tool result content cleared]"


def _turns() -> Conv:
    conv = Conv().prompt("P1")
    for r in range(1, 5):
        conv.round((f"c{r}", "bash", "x" * 200))  # 50 tokens each
    conv.prompt("P2").round(("c5", "bash", "x" * 200))
    conv.prompt("P3").round(("c6", "bash", "x" * 200))
    conv.prompt("P4").round(("c7", "bash", "x" * 200))
    conv.prompt("P5")
    return conv


def test_opencode_prunes_at_turn_end_beyond_protect(tmp_path: Path) -> None:
    """Prune protects the last two turns and 100 tokens, clears the rest if over the minimum."""
    trace = _turns().trace()
    outs, _ = replay("opencode", trace, tmp_path, protect=100, minimum=50, count=chars4)
    # Requests: P1, c1..c4, P2, c5, P3, c6, P4 (index 9), c7, P5.
    p4 = 9
    assert trace.messages[trace.requests[p4].n_messages - 1]["content"] == "P4"
    # Up to P4 nothing is pruned (turn 1 is still among the last two turns when P3 arrives).
    assert CLEARED not in contents(outs[p4 - 1]).values()
    # At P4 (end of turn 3): turn 1 newest first: c4 50, c3 100 (<= 100 kept), c2 150 and c1 200
    # prunable: 100 > 50 -> cleared.
    got = contents(outs[p4])
    assert [got[f"c{r}"] == CLEARED for r in range(1, 7)] == [True, True] + [False] * 4
    # At P5 (end of turn 4): c5 50, c4 100, c3 150 prunable (50), then c2 is compacted: stop.
    # 50 > 50 fails: nothing new, but c1 and c2 stay cleared.
    last = contents(outs[-1])
    assert [last[f"c{r}"] == CLEARED for r in range(1, 8)] == [True, True] + [False] * 5


def test_opencode_minimum_is_strict_and_errors_are_skipped(tmp_path: Path) -> None:
    """Pruning needs strictly more than the minimum; errored outputs are never pruned."""
    # At P4 (request 9) the prunable outputs are c2 and c1: 100 tokens.
    outs, _ = replay("opencode", _turns().trace(), tmp_path, protect=100, minimum=100, count=chars4)
    assert CLEARED not in contents(outs[9]).values()  # 100 > 100 is false
    outs, _ = replay("opencode", _turns().trace(), tmp_path, protect=100, minimum=99, count=chars4)
    assert CLEARED in contents(outs[9]).values()
    conv = Conv().prompt("P1").round(("e1", "bash", "x" * 400), is_error=True)
    conv.round(("c1", "bash", "x" * 400)).prompt("P2").prompt("P3").prompt("P4")
    outs, _ = replay("opencode", conv.trace(), tmp_path, protect=10, minimum=10, count=chars4)
    assert contents(outs[-1]) == {"e1": "x" * 400, "c1": CLEARED}


def test_opencode_single_prompt_session_is_never_pruned(tmp_path: Path) -> None:
    """A one-task session (one prompt, many tool calls) keeps everything, as in opencode."""
    outs, _ = replay("opencode", _rounds(30).trace(), tmp_path, protect=10, minimum=10)
    assert all(v == "x" * 400 for v in contents(outs[-1]).values())


# --- gemini-cli ------------------------------------------------------------------------------


def _masked(call_id: str, text: str, tool: str = "bash") -> str:
    content = json.dumps({"output": text}, indent=2)
    return (
        "<tool_output_masked>\n"
        + content[:250]
        + "\n... [TRUNCATED] ...\n"
        + content[-250:]
        + "\n\nOutput too large. Full output available at: "
        + f"{gemini_cli.GeminiCliConfig().shown_dir}/{tool}_{call_id}.txt\n</tool_output_masked>"
    )


def test_gemini_cli_masks_in_batches_beyond_protection(tmp_path: Path) -> None:
    """Outputs past the newest 400 tokens are masked once 240 tokens are prunable; persistent."""
    conv = Conv().prompt("go")
    texts = {f"c{r}": chr(ord("a") + r) * 800 for r in range(1, 8)}  # 200 tokens each
    for cid, text in texts.items():
        conv.round((cid, "bash", text))
    outs, session = replay(
        "gemini-cli", conv.trace(), tmp_path, protect=400, minimum=240, count=chars4
    )
    # After c4 (latest turn skipped): c3 200, c2 400, c1 600 > 400 -> prunable 200 < 240.
    assert all(not str(v).startswith("<tool_output_masked>") for v in contents(outs[4]).values())
    # After c5: c4 200, c3 400, c2 600 -> c2 and c1 prunable: 400 >= 240 -> masked.
    got = contents(outs[5])
    assert got["c1"] == _masked("c1", texts["c1"])
    assert got["c2"] == _masked("c2", texts["c2"])
    assert got["c3"] == texts["c3"]
    # After c6: c5, c4 = 400, c3 crosses: 200 < 240, masked ones skipped -> nothing new.
    assert contents(outs[6])["c3"] == texts["c3"]
    # After c7: c6, c5 = 400, c4 crosses (200) + c3 (200) = 400 >= 240 -> both masked.
    last = contents(outs[7])
    assert [str(last[c]).startswith("<tool_output_masked>") for c in texts] == [True] * 4 + [
        False
    ] * 3
    assert session.recover("c1") == texts["c1"]
    assert session.recover("c6") is None


def test_gemini_cli_shell_preview() -> None:
    """Shell output keeps its first and last 10 lines of the Output section, other sections whole."""
    body = "Command: ls\nOutput: " + "\n".join(f"l{i}" for i in range(30)) + "\nExit Code: 1"
    snippet = gemini_cli.masked_snippet("run_shell_command", {"output": body}, "/p/x.txt")
    head = "\n".join(f"l{i}" for i in range(10))
    tail = "\n".join(f"l{i}" for i in range(20, 30))
    assert snippet == (
        "<tool_output_masked>\nCommand: ls\nOutput: "
        + head
        + "\n\n... [10 lines omitted] ...\n\n"
        + tail
        + "\nExit Code: 1\n\nOutput too large. Full output available at: /p/x.txt\n"
        + "</tool_output_masked>"
    )


# --- codex -----------------------------------------------------------------------------------


def test_codex_truncates_head_and_tail_at_record_time(tmp_path: Path) -> None:
    """Outputs over (10 x 1.2) tokens = 48 bytes keep 24 bytes each side and a marker."""
    digits = "0123456789" * 10  # 100 bytes: 52 removed = 13 tokens
    conv = Conv().prompt("go").round(("c1", "bash", digits)).round(("c2", "bash", "short"))
    outs, session = replay("codex", conv.trace(), tmp_path, mode="tokens", limit=10)
    expected = "012345678901234567890123…13 tokens truncated…678901234567890123456789"
    assert contents(outs[1])["c1"] == expected
    assert contents(outs[2]) == {"c1": expected, "c2": "short"}
    assert session.recover("c1") is None


def test_codex_utf8_boundaries_and_content_lists() -> None:
    """Cuts fall on character boundaries; text items share the budget, images are kept."""
    # 61 bytes, 24-byte budget: head 12 bytes -> "a" + 5 "é" (11), tail 12 bytes -> 6 "é";
    # removed ceil((61 - 24) / 4) = 10.
    assert codex.truncate_text("a" + "é" * 30, 6) == "aééééé…10 tokens truncated…éééééé"
    items = [
        {"type": "text", "text": "a" * 20},  # 5 tokens: kept, 7 left
        PNG,
        {"type": "text", "text": "b" * 40},  # 10 > 7: cut to 28 bytes, 12 removed = 3 tokens
        {"type": "text", "text": "c" * 8},  # budget spent: omitted
    ]
    assert codex.truncate_content(items, 12) == [
        {"type": "text", "text": "a" * 20},
        PNG,
        {"type": "text", "text": "b" * 14 + "…3 tokens truncated…" + "b" * 14},
        {"type": "text", "text": "[omitted 1 text items ...]"},
    ]


# --- openai-agents (the real package) --------------------------------------------------------


def test_openai_agents_trims_outputs_before_the_last_two_user_turns(tmp_path: Path) -> None:
    """Outputs older than the second-to-last prompt and over 500 chars keep a 200-char preview."""
    text = "".join(chr(ord("a") + i % 26) for i in range(600))
    conv = Conv().prompt("P1").round(("c1", "bash", text)).round(("s1", "bash", "s" * 300))
    conv.prompt("P2").round(("c2", "bash", text)).prompt("P3").round(("c3", "bash", text))
    outs, _ = replay("openai-agents", conv.trace(), tmp_path)
    # After P2 the second-to-last prompt is P1, the very first item: nothing is older.
    assert contents(outs[3]) == {"c1": text, "s1": "s" * 300}
    last = contents(outs[-1])
    assert last["c1"] == f"[Trimmed: bash output — 600 chars → 200 char preview]\n{text[:200]}..."
    assert last["s1"] == "s" * 300  # not over 500 chars
    # At or after the second-to-last prompt: kept.
    assert last["c2"] == text
    assert last["c3"] == text


def test_openai_agents_single_prompt_session_is_not_trimmed(tmp_path: Path) -> None:
    """Tool outputs are not user items: a one-prompt session has no old turn to trim."""
    outs, _ = replay("openai-agents", _rounds(6, size=2000).trace(), tmp_path)
    assert all(v == "x" * 2000 for v in contents(outs[-1]).values())


# --- a replay through the cache simulator ----------------------------------------------------


def test_replay_priced_by_cache_sim_shows_prefix_break_of_masking(tmp_path: Path) -> None:
    """Under no budgeting the prefix only grows; eliding an old result breaks it once per turn."""
    conv = Conv().prompt("p" * 4096)  # 1024 tokens; the tool_use messages count 0
    conv.round(("c1", "bash", "a" * 400)).round(("c2", "bash", "b" * 400))
    trace = conv.trace()

    def priced(name: str, **overrides: Any) -> list[CacheResult]:
        session = strategies.get(name, **overrides).open(trace, tmp_path / name)
        sim = CacheSim("anthropic")
        segmenter = Segmenter(chars4)
        out = []
        for i, request in enumerate(trace.requests):
            copy_ = session.prepare(trace.request_messages(i), usage=None, now=request.timestamp)
            out.append(sim.feed(segmenter.segments(copy_), request.timestamp))
        return out

    # none: 1024 written (1280); then 1024 read + 100 written (102.4 + 125); then 1124 + 100.
    expected = [
        CacheResult(1024, 0, 1024, 0, 1280.0, False),
        CacheResult(1124, 1024, 100, 0, 227.4, False),
        CacheResult(1224, 1124, 100, 0, 237.4, False),
    ]
    for got, want in zip(priced("none"), expected, strict=True):
        assert replace(got, billed_tokens=0.0) == replace(want, billed_tokens=0.0)
        assert got.billed_tokens == pytest.approx(want.billed_tokens)
    # swe-agent-0.7 n=1 elides c1 on the third request ("Old output omitted (1 lines)": 28
    # chars = 7 tokens): only the [header, prompt] breakpoint still matches: 1024 read, 107
    # written, billed 102.4 + 133.75 = 236.15.
    third = priced("swe-agent-0.7", n=1)[2]
    assert replace(third, billed_tokens=0.0) == CacheResult(1131, 1024, 107, 0, 0.0, True)
    assert third.billed_tokens == pytest.approx(236.15)


@pytest.mark.parametrize(
    ("provider", "model", "settings", "prices", "breakpoints"),
    [
        ("openai", None, {}, (1.0, 0.5), False),
        ("openai", "gpt-3.5-turbo", {}, (1.0, 0.5), False),
        ("anthropic", None, {}, (1.25, 0.1), True),
        ("openai", "gpt-4.1-mini", {}, (None, None), None),
        ("anthropic", None, {"cache_write_price": 0.001}, (0.001, 0.1), True),
        ("openai", None, {"cache_read_price": 0.2}, (1.0, 0.2), False),
        ("openai", None, {"cache_breakpoints": True}, (1.0, 0.5), True),
    ],
)
def test_toolbudget_is_priced_as_its_trace_is_billed(
    provider: Literal["anthropic", "openai"],
    model: str | None,
    settings: dict[str, float],
    prices: tuple[float | None, float | None],
    breakpoints: bool | None,
    tmp_path: Path,
) -> None:
    """A trace whose model the library lists tells the session its model (the library's price
    list prices it); one whose model it does not list (none, or an unlisted one) is billed at
    its provider's prices, which the session is given where its settings leave them open, as
    an adopter sets their provider's (OpenAI's unlisted model: 0.5x reads, no write surcharge,
    automatic caching, as its API's message format would tell the library); a setting given
    for the run stays."""
    trace = replace(mixed_trace(), provider=provider, model=model)
    session = strategies.get("toolbudget", fsync=False, **settings).open(trace, tmp_path)
    config = session.budget.config  # type: ignore[attr-defined]
    assert (config.cache_write_price, config.cache_read_price) == prices
    assert config.cache_breakpoints is breakpoints
    assert config.model == model
