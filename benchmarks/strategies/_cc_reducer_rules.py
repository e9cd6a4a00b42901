"""cc-reducer-proxy's per-tool re-compression of one tool result's text (its ``recompress`` stage).

Re-implemented from the behaviour of github.com/mickoallen/cc-reducer-proxy at commit
1191bb4f7a44de17149438b002934382503dc166 (2026-03-28), ``rules/tool_results.py``
(``recompress_tool_result`` and the functions it calls); see
``benchmarks/strategies/cc_reducer_proxy.py`` for the whole pipeline and what is left out.

By tool (the name of the ``tool_use`` the result answers):

* ``Read``: trailing whitespace stripped from every line; a leading comment block (``/* */``,
  ``#`` or ``//`` lines, after any shebang) that names a license becomes
  ``[license header - N lines]``; runs of blank lines collapsed (in ``cat -n`` output, a run of
  3 or more keeps its first; otherwise every run keeps one);
* ``Grep``, ``Glob``: ANSI escapes stripped, 3+ newlines collapsed to 2, the text stripped;
* ``Bash``: ANSI escapes stripped; every line holding a percentage, a run of 5 ``#=>-``, 4 dots
  or a braille spinner emptied; 3+ newlines collapsed to 2; for commands outside its known
  categories (package managers, test runners, build tools, git, docker, linters, compilers,
  interpreters), 3+ identical consecutive lines collapsed to one and ``[repeated N times]``;
  then cut to 200 lines (``[truncated, N more lines]``) and stripped;
* any other tool: ANSI escapes stripped, 3+ newlines collapsed to 2;
* then for all: a text that parses as JSON (starts with ``{``/``[``, ends with ``}``/``]``) is
  minified; if 3 of the first 20 lines start with an ISO timestamp, every line's is removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from typing import Final

__all__ = ["recompress"]

_ANSI: Final = re.compile(r"\x1b\[[0-9;]*[a-zA-Z]")
_PROGRESS: Final = re.compile(r"^.*(\d+%|[#=>\-]{5,}|\.{4,}|⠋|⠙|⠹|⠸|⠼|⠴|⠦|⠧|⠇|⠏).*$", re.MULTILINE)
_CAT_N: Final = re.compile(r"^(\s*\d+\t)(.*)$")
_TIMESTAMP: Final = re.compile(r"^(\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?Z?\]?\s*)")
_MAX_LINES: Final = 200
_LICENSE: Final = re.compile(
    r"license|copyright|©|\bMIT\b|Apache|BSD|GPL|LGPL|MPL|SPDX|"
    r"all rights reserved|permission is hereby granted|redistribut",
    re.IGNORECASE,
)

_CATEGORIZED: Final = frozenset(
    {
        # test runners, build tools, linters, compilers, interpreters, git, docker
        *("jest", "vitest", "mocha", "pytest", "rspec", "phpunit"),
        *("webpack", "vite", "esbuild", "tsc", "make", "cmake", "ninja", "gradle", "mvn"),
        *("bazel", "turbo", "nx", "lerna", "just", "task"),
        *("eslint", "prettier", "ruff", "black", "rubocop", "clippy", "phpcs", "clang-format"),
        *("shfmt", "yamllint", "hadolint", "shellcheck", "gofmt", "rustfmt", "mypy", "pyright"),
        *("javac", "java", "kotlin", "kotlinc", "scala", "scalac", "sbt", "rustc", "gcc", "g++"),
        *("clang", "clang++", "python", "python3", "ruby", "node", "perl"),
        *("git", "docker", "docker-compose", "podman"),
    }
)
"""Commands with a category of their own: their output keeps repeated lines."""
_PACKAGE_MANAGERS: Final = frozenset(
    {"npm", "npx", "yarn", "pnpm", "bun", "pip", "pip3", "pipx", "uv", "gem", "bundle", "cargo"}
    | {"composer", "dotnet", "pod", "go", "poetry", "pdm", "nuget"}
)
_PACKAGE_VERBS: Final = ("install", "add", "update", "upgrade", "remove", "uninstall", "build")


def _general(command: str) -> bool:
    """Whether cc-reducer-proxy files ``command`` under its ``general`` category."""
    parts = command.strip().split()
    i = 0
    while i < len(parts) and ("=" in parts[i] or parts[i] in ("sudo", "env", "time", "nice")):
        i += 1
    if i >= len(parts):
        return True
    base = os.path.basename(parts[i])
    if base in _PACKAGE_MANAGERS:
        rest = " ".join(parts[i:]).lower()
        # go/cargo/dotnet test and cargo build are categorized whatever the verb check says.
        sub = parts[i + 1] if len(parts) > i + 1 else ""
        special = (base, sub) in {("go", "test"), ("cargo", "test"), ("dotnet", "test")}
        return not (
            special or (base, sub) == ("cargo", "build") or any(v in rest for v in _PACKAGE_VERBS)
        )
    return base not in _CATEGORIZED


def _collapse_blanks(text: str) -> str:
    return re.sub(r"\n{3,}", "\n\n", text)


def _collapse_repeats(text: str) -> str:
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        j = i + 1
        while j < len(lines) and lines[j] == lines[i]:
            j += 1
        out.append(lines[i])
        if j - i >= 3:
            out.append(f"[repeated {j - i} times]")
        else:
            out.extend(lines[i + 1 : j])
        i = j
    return "\n".join(out)


def _truncate(text: str) -> str:
    lines = text.split("\n")
    if len(lines) <= _MAX_LINES:
        return text
    return "\n".join([*lines[:_MAX_LINES], f"[truncated, {len(lines) - _MAX_LINES} more lines]"])


def _bash(text: str, command: str) -> str:
    text = _PROGRESS.sub("", _ANSI.sub("", text))
    text = _collapse_blanks(text)
    if _general(command):
        text = _collapse_repeats(text)
    return _truncate(text).strip()


def _body_of(line: str, numbered: bool) -> str | None:
    """A line's content (after the ``cat -n`` number when ``numbered``), or None if it has none."""
    if not numbered:
        return line
    m = _CAT_N.match(line)
    return m.group(2) if m else None


def _header_end(lines: list[str], start: int, numbered: bool) -> int | None:
    """Where the comment block opening at ``start`` ends (exclusive), or None if it is none."""
    first = (_body_of(lines[start], numbered) or "").strip()
    if first.startswith("/*"):
        for i in range(start, len(lines)):
            body = _body_of(lines[i], numbered)
            if body is not None and (
                "*/" in body if not numbered else body.rstrip().endswith("*/")
            ):
                return i + 1
        return None
    mark = "#" if first.startswith("#") and not first.startswith("#!") else "//"
    if not first.startswith(mark):
        return None
    end = start
    for i in range(start, len(lines)):
        body = _body_of(lines[i], numbered)
        if body is None or not (body.strip().startswith(mark) or not body.strip()):
            break
        end = i + 1
    return end


def _strip_license(lines: list[str], numbered: bool) -> list[str]:
    """``lines`` with a leading license comment replaced by one marker line."""
    firsts = [i for i, line in enumerate(lines) if (_body_of(line, numbered) or "").strip()]
    if not firsts:
        return lines
    start = firsts[0]
    if (_body_of(lines[start], numbered) or "").strip().startswith("#!"):
        if len(firsts) < 2:
            return lines
        start = firsts[1]  # the shebang stays
    end = _header_end(lines, start, numbered)
    if end is None or not _LICENSE.search("\n".join(lines[start:end])):
        return lines
    m = _CAT_N.match(lines[start]) if numbered else None
    prefix = m.group(1) if m else ("     \t" if numbered else "")
    return [*lines[:start], f"{prefix}[license header - {end - start} lines]", *lines[end:]]


def _read(text: str) -> str:
    lines = text.split("\n")
    if any(_CAT_N.match(line) for line in lines[:5] if line.strip()):
        stripped = []
        for raw in lines:
            m = _CAT_N.match(raw)
            stripped.append(m.group(1) + m.group(2).rstrip() if m else raw.rstrip())
        kept: list[str] = []
        run = 0
        for line in _strip_license(stripped, numbered=True):
            m = _CAT_N.match(line)
            blank = (m.group(2).strip() == "") if m else line.strip() == ""
            if blank:
                run += 1
                kept.append(line)
                continue
            if run >= 3:
                del kept[len(kept) - run + 1 :]  # a run of 3+ keeps its first line
            run = 0
            kept.append(line)
        if run >= 3:
            del kept[len(kept) - run + 1 :]
        return "\n".join(kept)
    out: list[str] = []
    run = 0
    for line in _strip_license([raw.rstrip() for raw in lines], numbered=False):
        run = run + 1 if not line.strip() else 0
        if run <= 1:
            out.append(line)
    return "\n".join(out)


def _boilerplate(text: str) -> str:
    stripped = text.strip()
    if stripped.startswith(("{", "[")) and stripped.endswith(("}", "]")):
        with contextlib.suppress(ValueError):
            text = json.dumps(json.loads(stripped), separators=(",", ":"))
    lines = text.split("\n")
    if sum(1 for line in lines[:20] if _TIMESTAMP.match(line)) >= 3:
        text = "\n".join(_TIMESTAMP.sub("", line) for line in lines)
    return text


def recompress(tool: str, text: str, command: str = "") -> str:
    """``text`` as cc-reducer-proxy re-compresses a result of ``tool`` (see the module)."""
    if tool == "Read":
        out = _read(text)
    elif tool in ("Grep", "Glob"):
        out = _collapse_blanks(_ANSI.sub("", text)).strip()
    elif tool == "Bash":
        out = _bash(text, command)
    else:
        out = _collapse_blanks(_ANSI.sub("", text))
    return _boilerplate(out)
