"""Hostile review of the settings' bool refusal: which settings it covers, and its words."""

from __future__ import annotations

import pytest

from budget import BudgetConfig
from budget._errors import ConfigError


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ({"preview_shape": True}, "preview_shape: Input should be 'auto', 'head_tail' or 'head'"),
        ({"compaction": True}, "compaction: Input should be 'off', 'auto' or 'manual'"),
        ({"model": True}, "model: Input should be a valid string"),
        ({"tools": True}, "tools: Input should be a valid dictionary"),
        ({"tools": {"grep": {"preview": True}}}, "tools.grep: preview: Input should be"),
    ],
)
def test_a_bool_for_a_setting_that_is_no_number_is_refused_as_what_it_is(
    setting: dict[str, object], expected: str
) -> None:
    """A bool given for a choice, a text or the policies is refused with pydantic's words for
    that type, not as "a number" (it said ``preview_shape: Value error, a number, not True``)."""
    with pytest.raises(ConfigError) as info:
        BudgetConfig(**setting)
    assert expected in str(info.value)
    assert "a number" not in str(info.value)
    assert "Value error" not in str(info.value)


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ({"window": True}, "invalid toolbudget setting: window: a number, not True"),
        (
            {"protect_turns": False},
            "invalid toolbudget setting: protect_turns: a number, not False",
        ),
        ({"pressure": True}, "invalid toolbudget setting: pressure: a number, not True"),
        (
            {"tools": {"grep": {"cap": True}}},
            "invalid toolbudget setting: tools.grep: cap: a number",
        ),
        ({"tools": {"grep": {"cap": 0}}}, "tools.grep: cap: Input should be greater than 0"),
    ],
)
def test_a_bool_for_a_number_is_one_plain_line(setting: dict[str, object], expected: str) -> None:
    """A bool for a number (or a per-tool cap out of range) is one line without pydantic's
    "Value error," and without the nested policy's own "invalid toolbudget setting:"."""
    with pytest.raises(ConfigError) as info:
        BudgetConfig(**setting)
    message = str(info.value)
    assert expected in message
    assert "Value error" not in message
    assert message.count("invalid toolbudget setting") == 1
    assert "\n" not in message


def test_bools_and_text_spellings_still_set_the_settings_that_take_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``fsync``, ``cache_breakpoints`` (``bool | None``) and ``exempt`` take bools given or
    spelled in the environment, and a number setting its number."""
    monkeypatch.setenv("TOOLBUDGET_FSYNC", "false")
    monkeypatch.setenv("TOOLBUDGET_CACHE_BREAKPOINTS", "0")
    config = BudgetConfig(window=1_000, tools={"grep": {"exempt": True}})
    assert (config.fsync, config.cache_breakpoints, config.window) == (False, False, 1_000)
    assert config.tools["grep"].exempt
    assert BudgetConfig(cache_breakpoints=True).cache_breakpoints is True
