"""The documentation site holds: every python block runs, and its tables match the code.

Pages are the Markdown files under docs/. A fenced block is ``python`` (run by these tests, as
README's are), or marked as not run: ``console`` for shell commands, ``text`` for output and
layouts. A ``text`` block titled "Output" right after a python block is what that block prints:
it is compared with what the block really prints, ``...`` standing for any text, and refs and
numbers of three digits or more for any ref and number (they depend on the Python version's
sources and on the machine), so that the page shows real figures and stays true.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic import BaseModel

import budget
import spill

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
NOT_RUN = {"console": "shell commands", "text": "output or a layout"}
FRAMEWORKS = {
    "langchain": "langchain",
    "pydantic_ai": "pydantic_ai",
    "agents": "agents",
    "s3fs": "s3fs",
    "moto": "moto",
}
"""Top-level modules of the optional frameworks, by the name a block imports."""

_FENCE = re.compile(
    r"^(?P<indent> *)```(?P<lang>[\w-]*)(?P<attrs>[^\n]*)\n(?P<body>.*?)^(?P=indent)``` *$",
    flags=re.M | re.S,
)


@dataclass(frozen=True, slots=True)
class Block:
    """One fenced block of a page."""

    page: str
    line: int
    lang: str
    attrs: str
    body: str
    end: int
    start: int

    @property
    def is_output(self) -> bool:
        return self.lang == "text" and 'title="Output"' in self.attrs


def _blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    out = []
    for m in _FENCE.finditer(text):
        body = "\n".join(line.removeprefix(m["indent"]) for line in m["body"].splitlines())
        out.append(
            Block(
                page=page.relative_to(DOCS).as_posix(),
                line=text.count("\n", 0, m.start()) + 1,
                lang=m["lang"],
                attrs=m["attrs"],
                body=body + "\n",
                start=m.start(),
                end=m.end(),
            )
        )
    return out


def _python_blocks() -> list[tuple[Block, Block | None]]:
    """Each python block of the site, with the Output block that follows it, if any."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        blocks = _blocks(page)
        for i, block in enumerate(blocks):
            if block.lang != "python":
                continue
            after = blocks[i + 1] if i + 1 < len(blocks) else None
            shown = (
                after is not None and after.is_output and not text[block.end : after.start].strip()
            )
            found.append((block, after if shown else None))
    return found


PYTHON_BLOCKS = _python_blocks()


def _output_pattern(expected: str) -> re.Pattern[str]:
    """A regex for an Output block: ``...`` is any text; refs (whole, or cut short after
    ``"ref": "`` by a print's slice) and numbers of 3+ digits vary."""
    parts = []
    # A cut ref varies too: getting-started's example spills the interpreter's own subprocess.py,
    # whose text (so its ref) differs between Python versions.
    tokens = (
        r"(?P<any>\.\.\.)|(?P<ref>[0-9a-f]{32}|(?<=\"ref\": \")[0-9a-f]{1,31})"
        r"|(?P<num>\d{1,3}(?:,\d{3})+|\d{3,})|(?P<space>\s+)|."
    )
    for token in re.finditer(tokens, expected):
        if token["any"]:
            parts.append(r".*?")
        elif token["ref"]:
            parts.append(rf"[0-9a-f]{{{len(token['ref'])}}}")
        elif token["num"]:
            parts.append(r"\d[\d,]*")
        elif token["space"]:
            parts.append(r"\s+")
        else:
            parts.append(re.escape(token.group()))
    return re.compile("".join(parts), flags=re.S)


def _frameworks_missing(code: str) -> list[str]:
    imported = set(re.findall(r"^(?:from|import) (\w+)", code, flags=re.M))
    return [m for name, m in FRAMEWORKS.items() if name in imported and not _importable(m)]


def _run_script(script: Path, code: str, timeout: int) -> subprocess.CompletedProcess[str]:
    """Write ``code`` to ``script`` and run it with this interpreter, in the script's folder."""
    script.write_text(code, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout, not an installed copy
    return subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        cwd=script.parent,
        timeout=timeout,
        env=env,
    )


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def test_the_site_has_pages_and_runnable_blocks() -> None:
    """The docs folder is found and holds python blocks, so the tests below test something."""
    assert (DOCS / "index.md").is_file()
    assert len(PYTHON_BLOCKS) >= 10


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(DOCS).as_posix())
def test_every_block_is_python_or_marked_as_not_run(page: Path) -> None:
    """A fenced block either runs (python) or says it is shell or output; none is left unmarked."""
    for block in _blocks(page):
        assert block.lang == "python" or block.lang in NOT_RUN, (
            f"{block.page}:{block.line}: a ```{block.lang} block: mark it python (it runs) "
            f"or one of {sorted(NOT_RUN)}"
        )
    text = page.read_text(encoding="utf-8")
    assert text.count("```") == 2 * len(_blocks(page)), f"{page.name}: an unmatched fence"


@pytest.mark.slow  # a fresh interpreter per block: 0.6 s of CPU each, 2-4 s with a framework
@pytest.mark.parametrize(
    ("block", "output"), PYTHON_BLOCKS, ids=[f"{b.page}:{b.line}" for b, _ in PYTHON_BLOCKS]
)
def test_python_block_runs_as_written(block: Block, output: Block | None, tmp_path: Path) -> None:
    """The block runs in a fresh interpreter on this checkout, and prints its Output block."""
    missing = _frameworks_missing(block.body)
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"{block.page}:{block.line} needs {missing}, which CI installs (dev extra)")
        pytest.skip(f"{block.page}:{block.line} needs {missing} (its extra is not installed)")
    done = _run_script(tmp_path / "block.py", block.body, timeout=300)
    assert done.returncode == 0, f"{block.page}:{block.line} failed:\n{done.stderr}"
    if output is not None:
        shown = output.body.strip()
        if not _output_pattern(shown).fullmatch(done.stdout.strip()):
            pytest.fail(
                f"{block.page}:{block.line} prints\n{done.stdout}\nbut its page shows\n{shown}"
            )


@pytest.mark.parametrize(
    ("page", "heading", "expected"),
    [
        (
            "formats/openai-chat.md",
            "# OpenAI Chat",
            ["openai_chat 1 spilled", "6001\terror: undef"],
        ),
        ("formats/openai-responses.md", "# OpenAI Responses", ["function toolbudget_read"]),
        (
            "formats/index.md",
            "## Spilling at execution",
            ["read_file was too large", "kept wrapped"],
        ),
    ],
)
def test_format_example_spills_and_reads_back(
    page: str, heading: str, expected: list[str], tmp_path: Path
) -> None:
    """The first example under ``heading`` (moved there from README) prints the spill it shows."""
    text = (DOCS / page).read_text(encoding="utf-8")
    assert heading in text, f"{page} has no {heading!r} section"
    block = re.search(r"```python\n(.*?)```", text[text.index(heading) :], flags=re.S)
    assert block is not None, f"{page} has no python block under {heading!r}"
    done = _run_script(tmp_path / "snippet.py", block.group(1), timeout=120)
    assert done.returncode == 0, done.stderr
    for needle in expected:
        assert needle in done.stdout


MAX_COLUMNS = 88
"""Widest line of a python block: wider ones scroll sideways beside the sidebars."""


@pytest.mark.parametrize(
    "block", [b for b, _ in PYTHON_BLOCKS], ids=[f"{b.page}:{b.line}" for b, _ in PYTHON_BLOCKS]
)
def test_python_block_fits_the_page(block: Block) -> None:
    """No line of a python block is wider than the page shows without scrolling."""
    for n, line in enumerate(block.body.splitlines(), block.line + 1):
        assert len(line) <= MAX_COLUMNS, f"{block.page}:{n} is {len(line)} columns wide"


def test_output_pattern_tells_a_different_output_apart() -> None:
    """The Output comparison lets sizes and refs vary but not words or small counts."""
    shown = "1 spilled: 88448 -> 2,392 chars, ref 017413e9529a68531ee1620b66c021c6 ..."
    pattern = _output_pattern(shown)
    assert pattern.fullmatch("1 spilled: 90001 -> 2,401 chars, ref " + "a" * 32 + " and more")
    assert not pattern.fullmatch("2 spilled: 88448 -> 2,392 chars, ref " + "a" * 32)
    assert not pattern.fullmatch("1 kept: 88448 -> 2,392 chars, ref " + "a" * 32)


def _table(page: str, first_header: str) -> dict[str, list[str]]:
    """Rows of the page's table whose first header is ``first_header``, by their first cell."""
    rows: dict[str, list[str]] = {}
    inside = False
    for line in (DOCS / page).read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first_header:
            inside = True
            continue
        if inside and not line.startswith("|"):
            break
        if inside and not set(cells[0]) <= set("-: "):
            rows[cells[0].strip("`")] = cells[1:]
    return rows


def _literal(cell: str) -> object:
    code = re.match(r"`([^`]+)`", cell)
    assert code, f"the default {cell!r} is not a code span"
    return ast.literal_eval(code.group(1))


@pytest.mark.parametrize(
    ("model", "first_header"),
    [(budget.BudgetConfig, "setting"), (budget.ToolPolicy, "field")],
    ids=["BudgetConfig", "ToolPolicy"],
)
def test_settings_page_lists_every_field_with_its_default(
    model: type[BaseModel], first_header: str
) -> None:
    """docs/settings.md has one row per field, whose default is the model's, and no other row."""
    rows = _table("settings.md", first_header)
    fields = model.model_fields
    assert sorted(rows) == sorted(fields)
    defaults = model()
    for name in fields:
        assert _literal(rows[name][0]) == getattr(defaults, name), f"the default of {name}"


_EVENT_CALL = re.compile(r"\.(debug|info|warning|error|exception|critical)\(\s*\"([^\"]*)\"")
_EVENT_NAME = re.compile(r"toolbudget\.(session|spill|log|gc|readback|proxy)\.[a-z_]+")


def _emitted_events() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for source in [*ROOT.joinpath("budget").rglob("*.py"), *ROOT.joinpath("spill").rglob("*.py")]:
        for level, name in _EVENT_CALL.findall(source.read_text(encoding="utf-8")):
            assert _EVENT_NAME.fullmatch(name), (
                f"{source.name}: {name!r} is not toolbudget.<area>.*"
            )
            found.setdefault(name, set()).add(level)
    return found


def test_events_page_names_every_event_at_its_level() -> None:
    """docs/events.md has a row for each event the code emits, naming each level it is emitted at."""
    emitted = _emitted_events()
    assert len(emitted) >= 15, "the event calls were not found: has their form changed?"
    rows = _table("events.md", "event")
    assert sorted(rows) == sorted(emitted)
    for name, levels in emitted.items():
        shown = {level.strip() for level in rows[name][0].split(",")}
        assert shown == levels, f"{name} is emitted at {sorted(levels)}, the page says {shown}"


def test_errors_page_tree_is_the_class_tree() -> None:
    """The tree on docs/errors.md names every public error under its real parent."""
    text = (DOCS / "errors.md").read_text(encoding="utf-8")
    tree = next(b.body for b in _blocks(DOCS / "errors.md") if "BudgetError\n" in b.body)
    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in tree.splitlines():
        m = re.match(r"^([│├└─ ]*)(\w+)", line)
        assert m, line
        depth, name = len(m.group(1)) // 4, m.group(2)
        stack = stack[:depth]
        if stack:
            parents[name] = stack[-1][1]
        stack.append((depth, name))
    errors = {n: getattr(budget, n) for n in budget.__all__}
    errors = {n: e for n, e in errors.items() if isinstance(e, type) and issubclass(e, Exception)}
    assert sorted([*parents, "BudgetError"]) == sorted(errors)
    for name, parent in parents.items():
        assert errors[parent] in errors[name].__bases__, f"{name} is not a {parent}"
    for name in errors:
        assert f"`{name}`" in text, f"errors.md does not describe {name}"


def test_report_table_names_every_field_of_report() -> None:
    """The report table of docs/getting-started.md names each field and property of Report."""
    rows = _table("getting-started.md", "field")
    named = {name for cell in rows for name in re.findall(r"\w+", cell)}
    public = set(budget.Report.model_fields) | {
        name
        for name, member in vars(budget.Report).items()
        if isinstance(member, property) and not name.startswith("_")
    }
    assert {"spilled_now", "trimmed_now"} <= public
    assert named == public


def test_every_extra_is_on_the_getting_started_page() -> None:
    """Each optional-dependency group of pyproject.toml has a row saying what it brings."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    rows = _table("getting-started.md", "extra")
    assert sorted(rows) == sorted(extras)


@pytest.mark.parametrize(("module", "page"), [(budget, "api/budget.md"), (spill, "api/spill.md")])
def test_api_reference_lists_every_public_name(module: object, page: str) -> None:
    """The API reference page renders each name of the package's ``__all__``, once."""
    text = (DOCS / page).read_text(encoding="utf-8")
    prefix = re.escape(module.__name__)  # type: ignore[attr-defined]
    listed = re.findall(rf"^::: {prefix}\.(\w+)$", text, flags=re.M)
    assert sorted(listed) == sorted(module.__all__)  # type: ignore[attr-defined]


_OUTSIDE = re.compile(
    r"\.\./shared|\bSPEC\b|beside this repository|(?<![\w.])/(?:home|work|tmp|Users|opt|root)/"
)


def test_no_docstring_or_message_of_the_code_names_a_file_outside_the_repository() -> None:
    """The library's and the bench's sources (whose docstrings the API pages and ``--help``
    render) cite no contract or article beside the repository: a reader has only the repository
    (the bench's default ``--traces`` is its one path beside it)."""
    root = DOCS.parent
    found = [
        f"{path.relative_to(root).as_posix()}:{n}"
        for package in ("budget", "spill", "benchmarks")
        for path in sorted((root / package).rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\bSPEC\b|\.\./shared/seeds", line)
    ]
    assert not found, found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(DOCS).as_posix())
def test_page_refers_to_nothing_outside_the_repository(page: Path) -> None:
    """No page names a file beside the repository or an absolute path; links stay in docs/."""
    text = page.read_text(encoding="utf-8")
    assert not _OUTSIDE.search(text), _OUTSIDE.search(text)
    for target in re.findall(r"\]\(([^)#\s]+)", text):
        if re.match(r"https?://", target):
            continue
        resolved = (page.parent / target).resolve()
        assert resolved.is_relative_to(DOCS), f"{page.name} links outside docs/: {target}"
        assert resolved.exists(), f"{page.name} links to a missing page: {target}"
