"""The README's quick start runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

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
