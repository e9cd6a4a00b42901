"""Findings of a hostile review of the public API against SPEC.md and the docs: each a test."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from budget import Budget, BudgetError, ConfigError, InputError, SessionReader, ToolPolicy
from budget.cli import app
from tests._ci import require_module


def _history(out: str, tool: str = "bash") -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": tool, "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": out}]},
    ]


def test_spill_output_under_the_clamped_tool_cap_returns_the_text_as_the_cap_pass_keeps_it(
    tmp_path: Path,
) -> None:
    """A tool cap under preview_chars never makes spill_output return an envelope larger than
    the output, and spill_output agrees with what prepare shows for the same output."""
    out = "\n".join(f"l{i}" for i in range(40))  # 149 characters: over the cap of 100
    config = {"tools": {"bash": ToolPolicy(cap=100)}, "fsync": False}
    with Budget.open(tmp_path / "s", config) as session:
        shown = session.prepare(_history(out), now=1.0).messages[2]["content"][0]["content"]
        wrapped = session.spill_output(out, tool="bash")
    assert len(wrapped) <= len(out)
    assert wrapped == shown


def test_a_discover_window_that_is_not_callable_is_refused_at_open(tmp_path: Path) -> None:
    """Budget.open refuses a discover_window that is not callable with an InputError, as it
    does a text_tokens or summarizer, instead of silently falling back to the default window."""
    with pytest.raises(InputError, match="discover_window"):
        Budget.open(tmp_path / "s", discover_window=200_000)  # type: ignore[arg-type]
    with Budget.open(tmp_path / "s") as session:  # the refused open left the session usable
        assert session.window() == 128_000


def test_session_reader_of_a_non_path_names_what_it_was_given() -> None:
    """SessionReader(5) raises a BudgetError naming the int it was given, not 'got None'."""
    with pytest.raises(BudgetError) as info:
        SessionReader(5)  # type: ignore[arg-type]
    assert "None" not in str(info.value)
    assert "int" in str(info.value) or "5" in str(info.value)


def test_proxy_with_a_root_that_is_a_file_is_one_error_line(tmp_path: Path) -> None:
    """`toolbudget proxy --root FILE` exits 2 with one `error:` line, not an OSError traceback."""
    require_module("starlette", "proxy")
    root = tmp_path / "root"
    root.write_text("not a directory")
    result = CliRunner().invoke(app, ["proxy", "--root", str(root), "--port", "0"])
    assert result.exit_code == 2, result.output
    assert not isinstance(result.exception, OSError) or isinstance(result.exception, SystemExit)
    assert "error:" in result.output
    assert str(root) in result.output


def test_a_head_tail_envelope_says_how_many_characters_it_leaves_out(tmp_path: Path) -> None:
    """SPEC 4: the preview gives the count of omitted lines and characters between head and tail."""
    out = "\n".join(f"line {i} " + "abc" * 10 for i in range(3000))
    with Budget.open(tmp_path / "s", {"fsync": False}) as session:
        env = session.spill_output(out, tool="bash")
    assert "preview: head_tail" in env
    assert re.search(r"[\d,]+ characters?\)? (?:omitted|left out)|left out: [^\n]*characters", env)


def test_a_head_only_preview_is_named_head(tmp_path: Path) -> None:
    """SPEC 4 (the shape is named): preview="head" shows the head only and must not call itself
    head_tail."""
    out = "\n".join(f"line {i} " + "abc" * 10 for i in range(3000))
    with Budget.open(tmp_path / "s", {"preview_shape": "head", "fsync": False}) as session:
        env = session.spill_output(out, tool="bash")
    assert "line 2999 " not in env  # the head only
    assert "preview: head_tail" not in env


def test_langchain_middleware_without_a_session_or_root_says_neither_was_given() -> None:
    """ToolBudgetMiddleware() with neither a session nor root= says so, not 'not both'."""
    require_module("langchain", "langchain")
    from budget.integrations.langchain import ToolBudgetMiddleware

    with pytest.raises(ConfigError) as info:
        ToolBudgetMiddleware()
    assert "not both" not in str(info.value)
    assert "neither" in str(info.value)
