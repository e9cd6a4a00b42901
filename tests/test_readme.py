"""README.md is what it says it is: install, a quick start that runs, the headline figure, links.

The long sections live on the documentation site (docs/), whose blocks and tables tests/test_docs.py
checks; these tests keep README short, true to the site, and free of references to files outside
the repository.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

SECTIONS = ["Install", "Quick start", "The headline figure", "Two commands", "Project layout"]
"""README's sections, in order: everything else is a page of the site."""

PENDING_PAGES = {"docs/architecture.md"}
"""Pages README links to that another change adds (the architecture page is written apart)."""

_OUTSIDE = re.compile(
    r"\.\./shared|\bSPEC\b|beside this repository|(?<![\w.])/(?:home|work|tmp|Users|opt|root)/"
)


def _text() -> str:
    return README.read_text(encoding="utf-8")


def _section(text: str, heading: str) -> str:
    """The body of README's ``## heading`` section, up to the next ``## ``."""
    assert f"\n## {heading}\n" in text, f"README.md has no {heading!r} section"
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def _quick_start() -> str:
    block = re.search(r"```python\n(.*?)```", _section(_text(), "Quick start"), flags=re.S)
    assert block, "README's Quick start has no python block"
    return block.group(1)


def _table(text: str, first_header: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the first Markdown table of ``text`` starting with ``first_header``."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first_header:
            rows = []
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                rows.append([c.strip().strip("*") for c in row.strip().strip("|").split("|")])
            return cells, rows
    raise AssertionError(f"no table starting with {first_header!r}")


def test_quick_start_runs_as_written(tmp_path: Path) -> None:
    """README's quick start runs in a fresh interpreter, spills, shows the envelope, reads back."""
    script = tmp_path / "quickstart.py"
    script.write_text(_quick_start(), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "1 spilled:" in done.stdout
    assert "[toolbudget] Output of cat was too large" in done.stdout
    assert "def communicate" in done.stdout


def _first_python_block(page: Path) -> str:
    block = re.search(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)
    assert block, f"{page.name} has no python block"
    return block.group(1)


def test_quick_starts_type_check_under_mypy_strict(tmp_path: Path) -> None:
    """README's quick start and the site's two copies of it pass ``mypy --strict`` on Python 3.11
    as pasted into a typed project (a ``str | None`` ref handed to ``read`` did not)."""
    sources = {
        "readme.py": _quick_start(),
        "home.py": _first_python_block(DOCS / "index.md"),
        "getting_started.py": _first_python_block(DOCS / "getting-started.md"),
    }
    for name, code in sources.items():
        (tmp_path / name).write_text(code, encoding="utf-8")
    args = ["--strict", "--python-version", "3.11", "--no-incremental", *sources]
    done = subprocess.run(
        [sys.executable, "-m", "mypy", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_quick_start_is_twenty_lines_at_most() -> None:
    """The quick start is a 20-line block that fits a page 88 columns wide."""
    lines = _quick_start().splitlines()
    assert len(lines) <= 20, f"the quick start has {len(lines)} lines"
    assert max(len(line) for line in lines) <= 88


def test_readme_is_only_its_short_sections() -> None:
    """README's sections are exactly install, quick start, headline, two commands and layout."""
    headings = re.findall(r"^## (.+)$", _text(), flags=re.M)
    assert headings == SECTIONS
    assert not re.search(r"^### ", _text(), flags=re.M), "a subsection belongs on the site"


def test_readme_names_exactly_the_two_commands() -> None:
    """The fresh-machine commands are `make bench` and `make test`, nothing more."""
    commands = re.findall(r"^\s+(make [\w-]+)", _section(_text(), "Two commands"), flags=re.M)
    assert commands == ["make bench", "make test"]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for command in commands:
        assert re.search(rf"^{command.split()[1]}:", makefile, flags=re.M), command


def test_install_section_names_every_extra() -> None:
    """Every optional-dependency group of pyproject.toml has a row in README's Install table."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    _, rows = _table(_section(_text(), "Install"), "extra")
    assert sorted(row[0].strip("`") for row in rows) == sorted(extras)


def test_readme_refers_to_nothing_outside_the_repository() -> None:
    """README names no spec, traces or absolute path outside the repo, and its links resolve."""
    text = _text()
    assert not _OUTSIDE.search(text), _OUTSIDE.search(text)
    targets = re.findall(r"\]\(([^)#\s]+)", text)
    assert "docs/index.md" in targets
    for target in targets:
        assert not re.match(r"https?://", target), f"README links off the repository: {target}"
        resolved = (ROOT / target).resolve()
        assert resolved.is_relative_to(ROOT), f"README links outside the repository: {target}"
        assert resolved.exists() or target in PENDING_PAGES, f"README links to nothing: {target}"


def test_headline_figures_match_the_benchmark_page() -> None:
    """README's headline rows and the site's home page quote docs/benchmark.md's table exactly."""
    header, rows = _table((DOCS / "benchmark.md").read_text(encoding="utf-8"), "strategy")
    full = {row[0]: dict(zip(header, row, strict=True)) for row in rows}
    shown_header, shown_rows = _table(_section(_text(), "The headline figure"), "strategy")
    assert "toolbudget" in [row[0] for row in shown_rows]
    for row in shown_rows:
        assert row[0] in full, f"README's headline names {row[0]!r}, not in docs/benchmark.md"
        for column, cell in zip(shown_header, row, strict=True):
            assert cell == full[row[0]][column].strip("*"), f"{row[0]}, {column}"

    billed = {name: float(cells["billed × none"].strip("*")) for name, cells in full.items()}
    others = [v for name, v in billed.items() if name not in ("toolbudget", "none")]
    home = (DOCS / "index.md").read_text(encoding="utf-8")
    ours = re.search(r"toolbudget bills \*\*([\d.]+)×\*\*", home)
    between = re.search(r"bill between ([\d.]+)× and ([\d.]+)×", home)
    assert ours and between, "docs/index.md no longer states the headline figure"
    assert float(ours.group(1)) == billed["toolbudget"]
    assert (float(between.group(1)), float(between.group(2))) == (min(others), max(others))


def test_pip_install_commands_name_what_can_be_installed() -> None:
    """No pip command in README or the docs installs ``toolbudget[...]`` by name: no index has it."""
    by_name = re.compile(r"pip install '?toolbudget\[[^\]]*\]'?(?!\s*@)")
    found = [
        f"{page.relative_to(ROOT)}: {line.strip()}"
        for page in [README, *sorted(DOCS.rglob("*.md"))]
        for line in page.read_text(encoding="utf-8").splitlines()
        if by_name.search(line) and "error:" not in line  # a quoted error message names the extra
    ]
    assert found == []
