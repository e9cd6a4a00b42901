"""Settings from the environment: TOOLBUDGET_<FIELD> variables, explicit arguments winning."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from pydantic_settings import SettingsConfigDict

from budget import Budget, BudgetConfig
from budget._errors import ConfigError


def test_environment_sets_what_is_not_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TOOLBUDGET_RESULT_CAP and TOOLBUDGET_MODEL set a session's config when not passed."""
    monkeypatch.setenv("TOOLBUDGET_RESULT_CAP", "80000")
    monkeypatch.setenv("TOOLBUDGET_MODEL", "claude-sonnet-4-5")
    monkeypatch.setenv("toolbudget_protect_rounds", "7")  # case-insensitive, as pydantic-settings
    with Budget.open(tmp_path / "s") as session:
        assert session.config.result_cap == 80_000
        assert session.config.model == "claude-sonnet-4-5"
        assert session.config.protect_rounds == 7
    assert BudgetConfig().result_cap == 80_000


def test_explicit_arguments_win_over_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A setting passed as an argument or in a config dict beats its environment variable."""
    monkeypatch.setenv("TOOLBUDGET_RESULT_CAP", "80000")
    monkeypatch.setenv("TOOLBUDGET_STUB_CHARS", "500")
    assert BudgetConfig(result_cap=9_000).result_cap == 9_000
    with Budget.open(tmp_path / "s", config={"result_cap": 12_000}) as session:
        assert session.config.result_cap == 12_000
        assert session.config.stub_chars == 500


def test_a_bad_environment_value_is_a_config_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An invalid TOOLBUDGET_ value is a ConfigError that names the variable it came from."""
    monkeypatch.setenv("TOOLBUDGET_RESULT_CAP", "lots")
    with pytest.raises(ConfigError, match="TOOLBUDGET_RESULT_CAP"):
        BudgetConfig()
    monkeypatch.setenv("TOOLBUDGET_TOOLS", '{"bash": {"cap": 1000}}')
    assert BudgetConfig(result_cap=5_000).tools["bash"].cap == 1000


def test_no_env_file_is_read_unless_a_subclass_names_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``.env`` in the working directory sets nothing; a subclass naming an env file (and a
    secrets directory) reads it, and the environment still wins over the file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("TOOLBUDGET_RESULT_CAP=70000\n", encoding="utf-8")
    assert BudgetConfig().result_cap == BudgetConfig.model_fields["result_cap"].default
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "toolbudget_stub_chars").write_text("300", encoding="utf-8")

    class FromFiles(BudgetConfig):
        model_config = SettingsConfigDict(env_file=".env", secrets_dir=secrets)

    assert FromFiles().result_cap == 70_000
    assert FromFiles().stub_chars == 300
    monkeypatch.setenv("TOOLBUDGET_RESULT_CAP", "90000")
    assert FromFiles().result_cap == 90_000


def test_none_in_a_variable_is_none_for_a_setting_that_may_be_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """TOOLBUDGET_PROTECT_TURNS=none is the rounds alone, as ``--set protect_turns=none``; a
    setting that may not be None refuses it, naming the variable."""
    monkeypatch.setenv("TOOLBUDGET_PROTECT_TURNS", "none")
    assert BudgetConfig().protect_turns is None
    monkeypatch.setenv("TOOLBUDGET_RESULT_CAP", "none")
    with pytest.raises(ConfigError, match="TOOLBUDGET_RESULT_CAP"):
        BudgetConfig()


def test_none_spelled_any_way_is_none_only_where_a_setting_may_be_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``None`` and ``null`` are None in a variable as in ``bench --set``; a setting that may not
    be None keeps the text (a read-back tool may be named ``none``)."""
    for spelled in ("None", "null", " NONE "):
        monkeypatch.setenv("TOOLBUDGET_PROTECT_TURNS", spelled)
        assert BudgetConfig().protect_turns is None, spelled
    monkeypatch.setenv("TOOLBUDGET_READ_TOOL_NAME", "none")
    assert BudgetConfig().read_tool_name == "none"


@pytest.mark.parametrize(
    "given", [{"window": True}, {"stale_floor": False}, {"tools": {"x": {"cap": True}}}]
)
def test_a_bool_is_refused_for_a_setting_that_is_a_number(given: dict[str, object]) -> None:
    """``window=True`` is a ConfigError naming the setting, not a window of one token."""
    with pytest.raises(ConfigError, match="a number, not"):
        BudgetConfig(**given)
    assert BudgetConfig(fsync=False).fsync is False


def test_bad_settings_are_said_in_toolbudget_words_not_pydantic_internals(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A TOOLBUDGET_TOOLS that is not JSON is named with what is wrong (not pydantic-settings'
    "EnvSettingsSource"), and no message carries pydantic's "Value error, " prefix."""
    monkeypatch.setenv("TOOLBUDGET_TOOLS", "{bad")
    with pytest.raises(ConfigError) as bad_json:
        BudgetConfig()
    assert str(bad_json.value) == (
        "invalid toolbudget setting: tools (from the environment variable TOOLBUDGET_TOOLS): "
        "not JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"
    )
    monkeypatch.delenv("TOOLBUDGET_TOOLS")
    with pytest.raises(ConfigError) as crossed:
        BudgetConfig(preview_chars=60_000)
    assert str(crossed.value).startswith(
        "invalid toolbudget setting: config: preview_chars (60000) must be smaller than"
    )
    with pytest.raises(ConfigError) as nested:
        BudgetConfig(tools={"x": {"cap": -1}})
    assert str(nested.value) == (
        "invalid toolbudget setting: tools.x: cap: Input should be greater than 0"
    )


def test_contradicting_settings_name_the_variables_that_gave_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Settings that contradict each other name the variable of each one the environment gave
    (TOOLBUDGET_PREVIEW_CHARS over the cap), and none the caller passed."""
    monkeypatch.setenv("TOOLBUDGET_PREVIEW_CHARS", "60000")
    with pytest.raises(ConfigError) as from_env:
        BudgetConfig()
    assert str(from_env.value).startswith(
        "invalid toolbudget setting: config (from the environment: TOOLBUDGET_PREVIEW_CHARS): "
        "preview_chars (60000) must be smaller than result_cap (50000)"
    )
    with pytest.raises(ConfigError) as passed:
        BudgetConfig(preview_chars=70_000)
    assert "from the environment" not in str(passed.value)


def test_a_numpy_bool_is_refused_for_a_setting_that_is_a_number() -> None:
    """``window=numpy.True_`` (no bool subclass) is refused as ``True`` is; a numpy integer is a
    number."""
    import numpy as np

    with pytest.raises(ConfigError, match="window: a number, not True"):
        BudgetConfig(window=np.True_)
    assert BudgetConfig(window=np.int64(200_000)).window == 200_000


def test_a_variable_naming_no_setting_is_warned_of_with_the_closest_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``TOOLBUDGET_RESULTCAP`` (a typo) changes nothing: a UserWarning names it and the setting
    it is closest to, where it was ignored without a word."""
    monkeypatch.setenv("TOOLBUDGET_RESULTCAP", "10000")
    with pytest.warns(UserWarning, match=r"TOOLBUDGET_RESULTCAP .* TOOLBUDGET_RESULT_CAP\?"):
        config = BudgetConfig()
    assert config.result_cap == BudgetConfig.model_fields["result_cap"].default


def test_a_zero_dimensional_numpy_bool_array_is_refused_for_a_number() -> None:
    """``window=numpy.array(True)`` (a 0-d array, as numpy's reductions over arrays can give) is a
    bool too: it was taken for a one-token window."""
    import numpy as np

    with pytest.raises(ConfigError, match="window: a number, not True"):
        BudgetConfig(window=np.array(True))
    assert BudgetConfig(window=np.array(200_000)).window == 200_000


def test_a_variable_close_to_no_setting_is_warned_of_without_a_guess(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The closest setting is looked for without the prefix every variable shares: with it,
    ``TOOLBUDGET_FUZZ_EXAMPLES`` was "did you mean TOOLBUDGET_STALENESS?"."""
    monkeypatch.setenv("TOOLBUDGET_FUZZ_EXAMPLES", "5000")
    monkeypatch.setenv("toolbudget_windows", "100000")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        BudgetConfig()
    assert sorted(str(w.message) for w in caught) == [
        "TOOLBUDGET_FUZZ_EXAMPLES names no toolbudget setting",
        "toolbudget_windows names no toolbudget setting (did you mean TOOLBUDGET_WINDOW?)",
    ]


def test_a_subclass_field_read_from_its_variable_is_not_warned_of(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A subclass's own setting is read from ``TOOLBUDGET_<FIELD>`` as the others are: that
    variable names a setting (it was warned of as naming none while it set the field)."""

    class WithTeam(BudgetConfig):
        team: str = "default"

    monkeypatch.setenv("TOOLBUDGET_TEAM", "search")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert WithTeam().team == "search"
