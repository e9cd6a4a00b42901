"""Running a Python snippet in a child process of this checkout and reading its JSON answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["REPO", "run_json_child"]

REPO = Path(__file__).resolve().parents[2]


def run_json_child(code: str, *args: str, input: str | None = None) -> Any:
    """Run ``code`` with ``args`` under this interpreter (this checkout first on the path), assert
    it exits 0 within two minutes, and return the JSON it printed."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        input=input,
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)
