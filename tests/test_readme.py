"""The README's python blocks run as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_quick_start_runs_as_written(tmp_path: Path) -> None:
    """The first python block of README.md runs in a fresh interpreter and reads its bytes back."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README.md has no python block"
    script = tmp_path / "quickstart.py"
    script.write_text(blocks[0])
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "1 spilled:" in done.stdout
    assert "[toolbudget] Output of cat was too large" in done.stdout
    assert "def communicate" in done.stdout


@pytest.mark.parametrize(
    ("heading", "expected"),
    [
        (
            "### OpenAI Chat Completions",
            ["openai_chat 1 spilled", "6001\terror: undefined reference"],
        ),
        ("### OpenAI Responses", ["openai_responses 1 spilled", "function toolbudget_read"]),
        ("### Spilling at execution time", ["Output of read_file was too large", "kept wrapped"]),
    ],
)
def test_format_sections_run_as_written(tmp_path: Path, heading: str, expected: list[str]) -> None:
    """Each format section's python block runs in a fresh interpreter and prints what it says."""
    text = README.read_text()
    assert heading in text, f"README.md has no {heading!r} section"
    block = re.search(r"```python\n(.*?)```", text[text.index(heading) :], flags=re.S)
    assert block is not None
    script = tmp_path / "snippet.py"
    script.write_text(block.group(1))
    env = {**os.environ, "PYTHONPATH": str(README.parent)}  # this checkout, not an installed copy
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    for needle in expected:
        assert needle in done.stdout
