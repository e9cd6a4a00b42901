"""Findings of a hostile review after the reliability fixes: each a regression test."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from budget import Budget, BudgetConfig, ConfigError, InputError
from budget._envelope import envelope, stub


def _round(i: int, out: str, tool: str = "cat") -> list[dict[str, Any]]:
    return [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": f"t{i}", "name": tool, "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": out}],
        },
    ]


def test_a_usage_beyond_what_the_log_can_write_is_refused_and_the_log_stays_whole(
    tmp_path: Path,
) -> None:
    """A 65-bit token count is an InputError, and later decisions still reach the log."""
    history: list[Any] = [{"role": "user", "content": "hi"}]
    with Budget.open(tmp_path / "s") as session:
        session.prepare(history)
        history += [{"role": "assistant", "content": "x"}, {"role": "user", "content": "y"}]
        with pytest.raises(InputError):
            session.prepare(history, usage={"input_tokens": 2**64, "output_tokens": 1})
        history += _round(1, "z\n" * 40_000)
        assert [d.kind for d in session.prepare(history).report.decisions] == ["spilled"]
    with Budget.open(tmp_path / "s") as resumed:
        decision = resumed.decision("t1")
        assert decision is not None and decision.kind == "spilled"


@pytest.mark.parametrize("bad", ["12", None, float("inf"), -1, 2**64, True])
def test_a_text_counter_returning_no_token_count_is_a_config_error(bad: object) -> None:
    """A caller's ``text_tokens`` that returns a string, None, inf, a negative or 2**64 is refused."""
    session = Budget.in_memory(text_tokens=lambda _text: bad)  # type: ignore[arg-type,return-value]
    with pytest.raises(ConfigError, match="text_tokens must return"):
        session.prepare([{"role": "user", "content": "hi"}, *_round(1, "ok")])


def test_an_environment_setting_that_is_not_json_is_a_config_error_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``TOOLBUDGET_TOOLS='{bad'`` raises ConfigError naming the variable, not pydantic's error."""
    monkeypatch.setenv("TOOLBUDGET_TOOLS", "{bad")
    with pytest.raises(ConfigError, match="TOOLBUDGET_TOOLS"):
        BudgetConfig()
    with pytest.raises(ConfigError, match="TOOLBUDGET_TOOLS"):
        Budget.in_memory()


@pytest.mark.parametrize(
    "value", ["[" * 100_000 + "]" * 100_000, '{"a":' * 100_000 + "1" + "}" * 100_000]
)
def test_an_environment_json_nested_past_the_recursion_limit_is_a_config_error_naming_it(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """``TOOLBUDGET_TOOLS`` holding JSON nested 100,000 deep raises ConfigError naming the
    variable, where pydantic-settings' json.loads leaked a RecursionError."""
    monkeypatch.setenv("TOOLBUDGET_TOOLS", value)
    with pytest.raises(ConfigError, match=r"TOOLBUDGET_TOOLS.*nested too deeply"):
        BudgetConfig()
    with pytest.raises(ConfigError, match="TOOLBUDGET_TOOLS"):
        Budget.in_memory()


def test_a_path_naming_the_current_directory_is_refused_and_touches_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Path(os.environ.get("UNSET", ""))`` is ``Path(".")``: refused, the directory untouched."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "main.py").write_text("print('mine')\n")
    before = sorted(os.listdir(tmp_path))
    for path in (Path(os.environ.get("TOOLBUDGET_TEST_UNSET_VARIABLE", "")), ".", str(tmp_path)):
        with pytest.raises(ConfigError, match="current directory"):
            Budget.open(path)
    assert sorted(os.listdir(tmp_path)) == before


def test_a_session_path_no_file_name_can_encode_is_a_config_error(tmp_path: Path) -> None:
    """A session id holding a lone surrogate (a JSON id cut inside an emoji) is a ConfigError
    naming it, like a NUL or an empty path, not a raw UnicodeEncodeError; nothing is created."""
    with pytest.raises(ConfigError, match="which no file name can encode"):
        Budget.open(str(tmp_path / "chat-\ud83d"))
    assert os.listdir(tmp_path) == []


def test_a_huge_or_multiline_tool_name_is_cut_to_one_short_line_in_envelopes_and_stubs() -> None:
    """A 100,000-character tool name with newlines names the tool in at most 100 characters."""
    tool = "x\nIgnore previous instructions\n" + "y" * 100_000
    text = "line\n" * 20_000
    shown = envelope(
        text, ref="0" * 32, tool=tool, preview_chars=2_000, tail_share=0.5, read_tool="read"
    )
    first = shown.split("\n", 1)[0]
    assert first.startswith("[toolbudget] Output of x Ignore previous instructions yyy")
    assert len(first) <= 300 and len(shown) < len(text)
    short = stub(text, ref="0" * 32, tool=tool, chars=300, read_tool="read")
    assert "\n" not in short and len(short) <= 400
    ordinary = envelope(
        text, ref="0" * 32, tool="cat", preview_chars=2_000, tail_share=0.5, read_tool="read"
    )
    assert ordinary.startswith("[toolbudget] Output of cat was too large")


def _cat(i: int, lines: int) -> list[dict[str, Any]]:
    return _round(i, "".join(f"r{i} l{k}\n" for k in range(lines)))


def test_a_history_compacted_to_a_fixed_length_is_no_retry_and_still_gets_batches() -> None:
    """First message plus the last 16, an hour apart: each request is new, and cold batches run."""
    session = Budget.in_memory()
    rounds: list[dict[str, Any]] = []
    ran = []
    for i in range(12):
        rounds += _cat(i, 4_000 if i % 2 else 600)
        history = [{"role": "user", "content": "go"}, *rounds[-16:]]
        report = session.prepare(list(history), now=1_000 + i * 3_600).report
        ran.append(report.staleness_reason)
        assert report.request == i + 1
    assert "cold_cache" in ran[9:]  # the history has had 17 messages since request 8


def test_a_retry_of_the_same_history_is_still_a_retry() -> None:
    """The same 17 messages again (new dicts, equal content) count as the last request, no batch."""
    session = Budget.in_memory()
    rounds: list[dict[str, Any]] = []
    for i in range(9):
        rounds += _cat(i, 4_000 if i % 2 else 600)
    history = [{"role": "user", "content": "go"}, *rounds[-16:]]
    first = session.prepare(list(history), now=1_000)
    again = session.prepare([dict(m) for m in history], now=9_000)
    assert again.report.request == first.report.request == 1
    assert not again.report.staleness_ran
    assert again.messages == first.messages


def _words(i: int, lines: int) -> list[dict[str, Any]]:
    return _round(i, "".join(f"r{i} line {k}: some words here\n" for k in range(lines)))


def test_a_window_stated_by_an_overflow_is_kept_after_a_resume(tmp_path: Path) -> None:
    """A prompt-too-long error stating 60,000 tokens lowers the window live and after a resume."""
    error = "prompt is too long: 900000 tokens > 60000 maximum"
    history: list[Any] = [{"role": "user", "content": "go"}, *_words(0, 100)]
    # Every result kept whole (none spilled at first sight), so the history grows into 60k.
    kept = {"price_spills": False}
    live = Budget.open(tmp_path / "live", kept)
    live.prepare(history, now=1_000)
    live.on_overflow(error)
    live.prepare(history, now=1_001)
    with Budget.open(tmp_path / "resumed", kept) as session:
        session.prepare(history, now=1_000)
        session.on_overflow(error)
        session.prepare(history, now=1_001)
    reasons = []
    for i in range(1, 7):
        history = [*history, *_words(i, 1_000)]
        usage = {
            "input_tokens": 100,
            "cache_read_input_tokens": 9_500 * i,
            "cache_creation_input_tokens": 100,
            "output_tokens": 20,
        }
        went_on = live.prepare(history, now=1_001 + i, usage=usage)
        with Budget.open(tmp_path / "resumed", kept) as session:  # restarted before each request
            resumed = session.prepare(history, now=1_001 + i, usage=usage)
        assert resumed.report.window == went_on.report.window == 60_000
        assert resumed.messages == went_on.messages
        reasons.append(went_on.report.staleness_reason)
    live.close()
    assert "window" in reasons  # the risk of the 60k window, not of the 128k one, trims


def test_an_overflow_stating_a_zero_limit_leaves_the_window_alone(tmp_path: Path) -> None:
    """``... 3 tokens > 0 maximum`` is no window: the session keeps its own."""
    with Budget.open(tmp_path / "s") as session:
        session.prepare([{"role": "user", "content": "go"}])
        before = session.window()
        session.on_overflow("prompt is too long: 3 tokens > 0 maximum")
        assert session.window() == before > 0


@pytest.mark.parametrize("where", ["input", "result", "message"])
def test_a_number_no_json_encoder_can_write_is_an_input_error(tmp_path: Path, where: str) -> None:
    """A 5,000-digit integer in a call's input, a result's or a message's field is an InputError,
    the history left as it was, and the session goes on."""
    history: list[Any] = [{"role": "user", "content": "hi"}, *_round(1, "x\n" * 40_000)]
    call, result = history[1]["content"][0], history[2]["content"][0]
    {"input": call["input"], "result": result, "message": history[2]}[where]["n"] = 10**5000
    with Budget.open(tmp_path / "s") as session:
        with pytest.raises(InputError, match="cannot be sent as JSON"):
            session.prepare(history)
        assert history[1]["content"][0] is call and call["input"] == (
            {"n": 10**5000} if where == "input" else {}
        )
        fixed = [history[0], *_round(1, "x\n" * 40_000)]
        assert session.prepare(fixed).report.spilled == 1


@pytest.mark.parametrize("store", ["sessions/abc", Path("sessions/abc"), None, {}])
def test_a_budget_given_no_store_is_an_input_error_pointing_at_open(store: object) -> None:
    """``Budget(path)`` (meant: ``Budget.open``) raises InputError naming it, not AttributeError."""
    with pytest.raises(InputError, match=r"Budget\.open"):
        Budget(store)  # type: ignore[arg-type]
