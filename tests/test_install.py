"""README's install lines work today: the wheel its one command builds installs into a fresh
virtualenv, and there ``import toolbudget`` and the ``toolbudget`` command work from anywhere
(issue 34, item 1)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

WHEEL_COMMAND = "pip wheel --no-deps -w dist ."
"""README's one command that builds the wheel (run in the clone, writing into dist/)."""


def _install_section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]


def test_readme_gives_the_commands_that_install_today() -> None:
    """README's Install section installs from a clone, from a git URL and from a built wheel,
    and offers no bare ``pip install toolbudget`` (no index holds the distribution yet)."""
    section = _install_section()
    assert "pip install ." in section
    assert "pip install 'git+" in section
    assert WHEEL_COMMAND in section
    assert "pip install dist/toolbudget-" in section
    assert not re.search(r"pip install toolbudget\s", section)


@pytest.mark.slow
def test_the_wheel_installs_into_a_fresh_venv_and_works_outside_the_clone(
    tmp_path: Path,
) -> None:
    """README's wheel command builds one wheel; installed into a fresh venv it brings
    ``toolbudget``, ``budget``, ``spill`` and ``benchmarks`` from the venv (not the clone), and
    the command and the quick start's import work from another directory."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    dist = tmp_path / "dist"
    pip, *args = WHEEL_COMMAND.replace("dist", str(dist)).split()
    build = subprocess.run(
        [sys.executable, "-m", pip, *args[:-1], str(ROOT)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    wheels = sorted(dist.glob("toolbudget-*.whl"))
    assert len(wheels) == 1, wheels
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    bin_dir = venv / "bin"
    install = subprocess.run(
        [str(bin_dir / "pip"), "install", "-q", str(wheels[0])],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = (
        "import toolbudget, budget, spill, benchmarks.report\n"
        "from toolbudget import Budget\n"
        "for m in (toolbudget, budget, spill, benchmarks.report):\n"
        "    print(m.__file__)\n"
        "from benchmarks.fetch import load_manifest\n"
        "assert len(load_manifest()) == 29  # the trace set's list ships in the wheel\n"
        "with Budget.open('s', format='anthropic') as s:\n"
        "    print(s.read_tool()['name'])\n"
    )
    probe = subprocess.run(
        [str(bin_dir / "python"), "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=elsewhere,
    )
    assert probe.returncode == 0, probe.stderr
    *files, tool = probe.stdout.splitlines()
    site = str(venv.resolve())
    assert all(Path(f).resolve().as_posix().startswith(site) for f in files), files
    assert tool == "toolbudget_read"
    version = subprocess.run(
        [str(bin_dir / "toolbudget"), "--version"],
        capture_output=True,
        text=True,
        env=env,
        cwd=elsewhere,
    )
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("toolbudget ")


@pytest.mark.slow
def test_a_git_url_installs_the_command_and_the_import_name(tmp_path: Path) -> None:
    """README's ``pip install 'git+URL'``, with this checkout's own git URL (``git+file://``, at
    its committed HEAD), gives a fresh venv the ``toolbudget`` command and ``import toolbudget``."""
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if head.returncode != 0:
        pytest.skip(f"{ROOT} is not a git checkout: {head.stderr.strip()}")
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    url = f"git+{ROOT.as_uri()}@{head.stdout.strip()}"
    install = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", url],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    probe = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import toolbudget; print(toolbudget.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert probe.returncode == 0, probe.stderr
    assert Path(probe.stdout.strip()).resolve().is_relative_to(venv.resolve())
    version = subprocess.run(
        [str(venv / "bin" / "toolbudget"), "--version"], capture_output=True, text=True, env=env
    )
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("toolbudget ")
