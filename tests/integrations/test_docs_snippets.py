"""The integration pages' first examples run as written, each inside its real framework."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

from tests._ci import require_module

DOCS = Path(__file__).resolve().parents[2] / "docs" / "integrations"
PAGES = {
    "langchain.md": ("langchain.agents", "langchain"),
    "pydantic-ai.md": ("pydantic_ai", "pydantic-ai"),
    "openai-agents.md": ("agents", "openai-agents"),
}
"""Each integration page, with the module its example needs and the extra that brings it."""


def _snippet(page: str) -> str:
    text = (DOCS / page).read_text(encoding="utf-8")
    block = re.search(r"```python\n(.*?)```", text, flags=re.S)
    assert block, f"docs/integrations/{page} has no python block"
    return block.group(1)


@pytest.mark.parametrize(("page", "needs"), PAGES.items())
def test_integration_snippet_runs(
    page: str,
    needs: tuple[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The page's example runs as a script, spills the big tool output and keeps the history."""
    module, extra = needs
    require_module(module, extra=extra)
    script = tmp_path / "snippet.py"
    script.write_text(_snippet(page), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    # In this interpreter: the frameworks are imported once for the whole test run.
    runpy.run_path(str(script), run_name="__main__")
    out = capsys.readouterr().out
    assert re.search(r"^1 spilled: \d+ -> \d+ chars$", out, flags=re.M), out


@pytest.mark.parametrize("module", ["langchain", "openai_agents", "pydantic_ai"])
def test_session_read_tool_refuses_what_is_not_a_session(module: str) -> None:
    """Each integration's ``session_read_tool`` given a string is a ConfigError naming what it
    needs, as its middleware's constructor is, not a raw AttributeError."""
    import importlib

    from budget import ConfigError

    make = importlib.import_module(f"budget.integrations.{module}").session_read_tool
    with pytest.raises(ConfigError, match=r"session_read_tool needs a budget\.Budget session"):
        make("x")
