"""The README's integration snippets run as written, each inside its real framework."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

from tests._ci import require_module

ROOT = Path(__file__).resolve().parents[2]
FRAMEWORKS = {
    "LangChain v1": "langchain.agents",
    "pydantic-ai": "pydantic_ai",
    "OpenAI Agents SDK": "agents",
}
EXTRAS = {
    "LangChain v1": "langchain",
    "pydantic-ai": "pydantic-ai",
    "OpenAI Agents SDK": "openai-agents",
}


def _snippet(title: str) -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.partition("\n## Integrations\n")[2]
    assert section, "README.md has no Integrations section"
    for part in section.split("\n### ")[1:]:
        if part.startswith(title):
            block = re.search(r"```python\n(.*?)```", part, flags=re.S)
            assert block, f"the {title} section has no python block"
            return block.group(1)
    raise AssertionError(f"README.md has no {title} section under Integrations")


@pytest.mark.parametrize(("title", "module"), FRAMEWORKS.items())
def test_integration_snippet_runs(
    title: str,
    module: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The snippet runs as a script, spills the big tool output and keeps the history in full."""
    require_module(module, extra=EXTRAS[title])
    script = tmp_path / "snippet.py"
    script.write_text(_snippet(title), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    # In this interpreter: the frameworks are imported once for the whole test run.
    runpy.run_path(str(script), run_name="__main__")
    out = capsys.readouterr().out
    assert re.search(r"^1 spilled: \d+ -> \d+ chars$", out, flags=re.M), out
