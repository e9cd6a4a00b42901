"""The built-in traces of ``toolbudget bench``: scripted agent sessions of real tool calls.

Three sessions (:data:`SCRIPTS`) play an agent exploring the Python standard library and fixing a
small generated project: every tool call really runs (``subprocess``, ``/bin/sh``) on files any
Python installation has (``cat`` of standard-library sources, ``grep -rn`` over packages,
``find``, ``ls -R``, ``python -m pydoc``, ``python -m unittest`` on a project written into a
temporary directory), and its output is recorded verbatim into an Anthropic-format trace: the
assistant's calls as ``tool_use`` blocks, the outputs as ``tool_result`` blocks (``is_error`` and
an ``Exit code N`` line when the command failed), one request per assistant message plus a final
one. Nothing is truncated: large outputs are what budgeting is for.

Time is synthetic: requests start at a fixed epoch and follow each other by 6 to 34 seconds, with
the pauses a script asks for (each session has at least one longer than the 300 s cache TTL, so a
cold-cache staleness batch can show). There is no recorded usage (no model ran).

Determinism: the traces are generated at run time and depend only on the machine's Python
(standard-library sources, ``pydoc`` output) and POSIX tools. Two things that would vary between
runs on one machine are normalized in the recorded text: the temporary directory's path (shown as
``~/demo``), durations printed by the test runner (``Ran 40 tests in 0.000s``) and object
addresses in ``pydoc`` output (``at 0x0``). Byte-code writing is off, so the sessions leave no
``__pycache__`` behind them. The sessions are recorded in parallel threads (they share nothing).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from benchmarks.trace import Request, Trace
from budget._errors import InputError

__all__ = ["SCRIPTS", "Call", "Script", "Step", "record", "record_builtin"]

EPOCH = 1_750_000_000.0
"""When the first request of every built-in session is sent (a fixed, arbitrary time)."""
SHOWN_ROOT = "~/demo"
"""What the temporary directory's path is shown as in the recorded outputs."""
TIMEOUT_S = 60.0

SYSTEM = (
    "You are a careful software engineering agent working in a terminal. Use the bash tool to "
    "inspect files and run commands, and the write_file tool to create or replace files. Read "
    "before you change anything, run the tests after every change, and explain what you found."
)


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call: ``bash`` with a command, or ``write_file`` with a path and its content."""

    tool: Literal["bash", "write_file"]
    arg: str
    """The command (bash) or the file path relative to the session's directory (write_file)."""
    content: str = ""


@dataclass(frozen=True, slots=True)
class Step:
    """One round: what the assistant says, the calls it makes (in parallel), the pause before."""

    say: str
    calls: tuple[Call, ...]
    pause_s: float = 0.0
    """Extra seconds before this round's request (the user away, a long think)."""


@dataclass(frozen=True, slots=True)
class Script:
    """A scripted session: its prompt, where it runs, its rounds."""

    name: str
    prompt: str
    where: Literal["stdlib", "project"]
    """``stdlib``: commands run in the standard library's directory; ``project``: in a new one."""
    steps: tuple[Step, ...]
    closing: str = "Summarize what you found."
    """A last user message after the final round (its answer is the final request)."""


def sh(say: str, *commands: str, pause_s: float = 0.0) -> Step:
    """A round of bash calls."""
    return Step(say, tuple(Call("bash", c) for c in commands), pause_s)


def write(say: str, path: str, content: str, *, pause_s: float = 0.0) -> Step:
    """A round writing one file."""
    return Step(say, (Call("write_file", path, content),), pause_s)


# -- the generated project of the test-fixing session -----------------------------------------------

_MODULE = '''\
"""Small text statistics helpers."""

import re
from collections import Counter

_WORD = re.compile(r"[A-Za-z']+")


def words(text):
    """The words of text, lower-cased."""
    return [w.lower() for w in _WORD.findall(text)]


def word_count(text):
    """How many words text has."""
    return len(words(text))


def top_words(text, n=3):
    """The n most frequent words, most frequent first, ties in alphabetical order."""
    counts = Counter(words(text))
    return [w for w, _ in counts.most_common(n)]


def slugify(text):
    """A URL slug: lower-case words joined by single hyphens."""
    return re.sub(r"[^a-z0-9]", "-", text.lower())


def camel_to_snake(name):
    """camelCase or CamelCase to snake_case; acronyms stay together (HTTPServer -> http_server)."""
    return re.sub(r"([A-Z])", r"_\\1", name).lower().lstrip("_")


def average_word_length(text):
    """Mean length of the words of text (0.0 when there is none)."""
    ws = words(text)
    return sum(len(w) for w in ws) / len(ws)


def is_palindrome(text):
    """Whether text reads the same backwards, ignoring case and non-letters."""
    letters = [c.lower() for c in text if c.isalpha()]
    return letters == letters[::-1]


def rot13(text):
    """ROT13 of text."""
    out = []
    for c in text:
        if "a" <= c <= "z":
            out.append(chr((ord(c) - 97 + 13) % 26 + 97))
        elif "A" <= c <= "Z":
            out.append(chr((ord(c) - 65 + 13) % 26 + 65))
        else:
            out.append(c)
    return "".join(out)
'''

_FIXES = (
    (
        "    counts = Counter(words(text))\n    return [w for w, _ in counts.most_common(n)]\n",
        "    counts = Counter(words(text))\n"
        "    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))\n"
        "    return [w for w, _ in ranked[:n]]\n",
    ),
    (
        '    return re.sub(r"[^a-z0-9]", "-", text.lower())\n',
        '    return "-".join(re.findall(r"[a-z0-9]+", text.lower()))\n',
    ),
    (
        '    return re.sub(r"([A-Z])", r"_\\1", name).lower().lstrip("_")\n',
        '    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\\1_\\2", name)\n'
        '    return re.sub(r"([a-z0-9])([A-Z])", r"\\1_\\2", name).lower()\n',
    ),
    (
        "    ws = words(text)\n    return sum(len(w) for w in ws) / len(ws)\n",
        "    ws = words(text)\n    return sum(len(w) for w in ws) / len(ws) if ws else 0.0\n",
    ),
)


def _fixed(upto: int) -> str:
    text = _MODULE
    for old, new in _FIXES[:upto]:
        if old not in text:  # pragma: no cover - the script and the module disagree
            raise AssertionError(f"fix not applicable: {old!r}")
        text = text.replace(old, new)
    return text


_CASES: tuple[tuple[str, str, str], ...] = (
    ("word_count", "'one two three'", "3"),
    ("word_count", "''", "0"),
    ("word_count", "\"it's a dog's life\"", "4"),
    ("top_words", "'b a b a c'", "['a', 'b', 'c']"),
    ("top_words", "'x y z y'", "['y', 'x', 'z']"),
    ("top_words", "'pear apple pear fig apple kiwi', 2", "['apple', 'pear']"),
    ("slugify", "'Hello, World!'", "'hello-world'"),
    ("slugify", "'  many   spaces  '", "'many-spaces'"),
    ("slugify", "'already-a-slug'", "'already-a-slug'"),
    ("slugify", "'Version 2.0 (beta)'", "'version-2-0-beta'"),
    ("camel_to_snake", "'camelCase'", "'camel_case'"),
    ("camel_to_snake", "'CamelCase'", "'camel_case'"),
    ("camel_to_snake", "'HTTPServer'", "'http_server'"),
    ("camel_to_snake", "'getHTTPResponseCode'", "'get_http_response_code'"),
    ("camel_to_snake", "'simple'", "'simple'"),
    ("average_word_length", "'ab abcd'", "3.0"),
    ("average_word_length", "''", "0.0"),
    ("average_word_length", "'...'", "0.0"),
    ("is_palindrome", "'A man, a plan, a canal: Panama'", "True"),
    ("is_palindrome", "'palindrome'", "False"),
    ("is_palindrome", "''", "True"),
    ("rot13", "'Hello'", "'Uryyb'"),
    ("rot13", "rot13('Round trip!')", "'Round trip!'"),
    ("rot13", "'123 xyz'", "'123 klm'"),
)


def _tests(extra: bool = False) -> str:
    lines = ['"""Tests of textstats."""', "", "import unittest", "", "from textstats import *", ""]
    by_function: dict[str, list[tuple[str, str]]] = {}
    for function, args, expected in _CASES:
        by_function.setdefault(function, []).append((args, expected))
    for function, cases in by_function.items():
        cls = "Test" + "".join(part.title() for part in function.split("_"))
        lines += ["", f"class {cls}(unittest.TestCase):"]
        for k, (args, expected) in enumerate(cases, 1):
            lines += [
                f"    def test_{function}_{k}(self):",
                f"        self.assertEqual({function}({args}), {expected})",
                "",
            ]
    if extra:
        lines += [
            "",
            "class TestProperties(unittest.TestCase):",
            "    def test_slug_has_no_double_hyphen(self):",
            "        for text in ['a  b', 'a--b', '--a--', 'A & B & C']:",
            "            with self.subTest(text=text):",
            "                self.assertNotIn('--', slugify(text))",
            "",
            "    def test_rot13_is_an_involution(self):",
            "        for text in ['abc', 'The Quick Brown Fox', '']:",
            "            with self.subTest(text=text):",
            "                self.assertEqual(rot13(rot13(text)), text)",
            "",
        ]
    lines += ["", 'if __name__ == "__main__":', "    unittest.main()", ""]
    return "\n".join(lines)


# -- the scripts ------------------------------------------------------------------------------------

_PARSERS = (
    sh("Let me look at the layout of the standard library first.", "ls"),
    sh(
        "The packages I care about, recursively.",
        "ls -R json email http xml unittest asyncio",
    ),
    sh("Start with the json package's entry point.", "cat json/__init__.py"),
    sh("Now the decoder.", "cat json/decoder.py"),
    sh("The scanner it uses.", "cat json/scanner.py"),
    sh("And the encoder.", "cat json/encoder.py"),
    sh("Which functions does the package define?", "grep -rn 'def ' --include=*.py json"),
    sh("The generated documentation.", "python -m pydoc json"),
    sh(
        "Where else is the re module imported among the parsers?",
        "grep -rn 'import re' --include=*.py json email http html xml tomllib",
    ),
    sh("argparse is the biggest parser of all; read it.", "cat argparse.py"),
    sh("Its classes.", "grep -n '^class ' argparse.py"),
    sh("textwrap, for comparison.", "cat textwrap.py"),
    sh("shlex tokenizes shell text.", "cat shlex.py"),
    sh("string's Template parser.", "cat string.py"),
    sh(
        "The email package's files.",
        "find email -name '*.py' -not -path '*/__pycache__/*' | sort",
    ),
    sh("The email parser.", "cat email/parser.py"),
    sh("The feed parser does the real work.", "cat email/feedparser.py"),
    sh(
        "How do these packages report bad input?",
        "grep -rn 'raise ValueError' --include=*.py email json http",
    ),
    sh("tomllib's parser.", "cat tomllib/_parser.py", pause_s=420.0),
    sh("configparser next.", "cat configparser.py"),
    sh("The csv module's Python side.", "cat csv.py"),
    sh("csv's documentation.", "python -m pydoc csv"),
    sh("How big is asyncio's API surface?", "grep -rn 'def ' --include=*.py asyncio"),
    sh("Line counts of the two packages.", "wc -l json/*.py email/*.py | sort -n"),
    sh("The HTML parser.", "cat html/parser.py"),
    sh("ElementTree.", "cat xml/etree/ElementTree.py"),
    sh("Its error classes.", "grep -rn 'class .*Error' --include=*.py xml"),
    sh("plistlib parses XML and binary plists.", "cat plistlib.py"),
    sh("Its documentation.", "python -m pydoc plistlib"),
    sh("netrc is a tiny hand-written parser.", "cat netrc.py"),
    sh(
        "Which top-level modules are larger than 40 KB?",
        "find . -maxdepth 1 -name '*.py' -size +40k | sort",
    ),
    sh("The tokenizer for Python itself.", "cat tokenize.py"),
    sh("And the ast helpers.", "cat ast.py", pause_s=900.0),
    sh("The visitor methods.", "grep -n 'def visit' ast.py"),
    sh("Finally json's command-line tool.", "cat json/tool.py"),
    sh("The decoder's documentation, to check my reading.", "python -m pydoc json.decoder"),
)

_FIX = (
    write("I'll create the module as described.", "textstats.py", _MODULE),
    write("And its tests.", "test_textstats.py", _tests()),
    sh("Check the project's files.", "ls -R"),
    sh("Run the tests.", "python -m unittest -v"),
    sh("Several failures. Let me re-read the module.", "cat textstats.py"),
    sh("Its functions.", "grep -n 'def ' textstats.py"),
    sh("And the tests, to see what they expect.", "cat test_textstats.py"),
    sh("How does the re module document sub and findall?", "python -m pydoc re"),
    sh("Counter.most_common's contract.", "python -m pydoc collections.Counter.most_common"),
    write("Fix top_words: sort ties alphabetically.", "textstats.py", _fixed(1)),
    sh("Run the top_words tests.", "python -m unittest -v test_textstats.TestTopWords"),
    sh("And the whole suite.", "python -m unittest -v"),
    write("Fix slugify: join the runs of letters and digits.", "textstats.py", _fixed(2)),
    sh("Run the slugify tests.", "python -m unittest -v test_textstats.TestSlugify"),
    sh(
        "Look at how the standard library splits camel case, if anywhere.",
        "grep -rn 'A-Z\\]\\[a-z' --include=*.py email http json logging unittest",
        pause_s=600.0,
    ),
    write("Fix camel_to_snake for acronyms.", "textstats.py", _fixed(3)),
    sh("Run its tests.", "python -m unittest -v test_textstats.TestCamelToSnake"),
    sh("The full suite again.", "python -m unittest -v"),
    write("Guard average_word_length against empty input.", "textstats.py", _fixed(4)),
    sh("Full suite.", "python -m unittest -v"),
    write("Add property tests.", "test_textstats.py", _tests(extra=True)),
    sh("Run everything.", "python -m unittest -v"),
    sh("The module's documentation as a user sees it.", "python -m pydoc textstats"),
    sh("Final look at the module.", "cat textstats.py"),
    sh("And the project tree.", "ls -R"),
)

_SURVEY = (
    sh(
        "Read the core utility modules side by side.",
        "cat os.py",
        "cat random.py",
        "cat tempfile.py",
        "cat contextlib.py",
        "cat functools.py",
        "cat pathlib.py",
    ),
    sh(
        "Count their definitions.",
        "grep -c 'def ' os.py random.py tempfile.py contextlib.py functools.py pathlib.py",
    ),
    sh("The two largest typing-related modules.", "cat enum.py", "cat typing.py"),
    sh("Their documentation.", "python -m pydoc os.path", "python -m pydoc shutil"),
    sh("shutil's source.", "cat shutil.py"),
    sh(
        "Where are the public names declared?",
        "grep -n '__all__' os.py shutil.py tempfile.py pathlib.py",
    ),
    sh("Numbers: statistics and fractions.", "cat statistics.py", "cat fractions.py"),
    sh("heapq and bisect.", "cat heapq.py", "cat bisect.py"),
    sh("copy.", "cat copy.py"),
    sh("difflib is large.", "cat difflib.py"),
    sh("How is it documented?", "python -m pydoc difflib.SequenceMatcher"),
    sh(
        "Which modules use functools.lru_cache?",
        "grep -rn 'lru_cache' --include=*.py email json http importlib re",
        pause_s=360.0,
    ),
    sh("importlib's layout.", "ls -R importlib"),
    sh("The import machinery's Python side.", "cat importlib/_bootstrap.py"),
    sh("Its external half.", "cat importlib/_bootstrap_external.py"),
    sh("The metadata package.", "find importlib -name '*.py' -not -path '*/__pycache__/*'"),
    sh("The pure-Python decimal module, for scale.", "wc -l _pydecimal.py decimal.py"),
    sh(
        "Its classes and their first lines.",
        "grep -n -A 3 '^class ' _pydecimal.py",
    ),
    sh("And the module docstring.", "head -n 120 _pydecimal.py"),
    sh("Last: the operator module.", "cat operator.py", "python -m pydoc operator"),
)

SCRIPTS: tuple[Script, ...] = (
    Script(
        "stdlib-parsers",
        "Survey how the Python standard library parses text formats (json, email, csv, toml, "
        "XML, HTML, shell and command lines) and compare the approaches.",
        "stdlib",
        _PARSERS,
    ),
    Script(
        "fix-tests",
        "Create a small textstats module with its unittest suite in this empty directory, then "
        "make every test pass without weakening any of them.",
        "project",
        _FIX,
    ),
    Script(
        "stdlib-survey",
        "Give me an overview of the standard library's core utility modules: what they offer "
        "and how big they are.",
        "stdlib",
        _SURVEY,
    ),
)
"""The built-in sessions (36, 25 and 20 rounds)."""


# -- recording --------------------------------------------------------------------------------------

_DURATION = re.compile(r"\b(Ran \d+ tests? in )\d+\.\d+s\b")
_ADDRESS = re.compile(r"\b(at 0x)[0-9a-fA-F]+\b")


def _environment(bindir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "LC_", "LANG"))}
    env.update(
        PATH=f"{bindir}{os.pathsep}{env.get('PATH', '')}",
        PAGER="cat",
        MANPAGER="cat",
        TERM="dumb",
        LC_ALL="C",
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONHASHSEED="0",
        PYTHONIOENCODING="utf-8",
        COLUMNS="80",
    )
    return env


class _Runner:
    """Runs one script's calls in its directory and normalizes what varies between runs."""

    def __init__(self, cwd: Path, root: Path, env: dict[str, str]) -> None:
        self.cwd = cwd
        self.root = str(root)
        self.env = env

    def run(self, call: Call) -> tuple[str, bool]:
        if call.tool == "write_file":
            target = (self.cwd / call.arg).resolve()
            if not target.is_relative_to(self.cwd.resolve()):
                raise InputError(f"recorder: write_file path {call.arg!r} leaves the session")
            target.write_text(call.content, encoding="utf-8")
            return f"Wrote {len(call.content)} characters to {call.arg}", False
        proc = subprocess.run(
            call.arg,
            shell=True,
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=TIMEOUT_S,
        )
        text = proc.stdout.decode("utf-8", errors="replace")
        text = text.replace(self.root, SHOWN_ROOT)
        text = _ADDRESS.sub(r"\g<1>0", _DURATION.sub(r"\g<1>0.000s", text))
        if proc.returncode != 0:
            return f"Exit code {proc.returncode}\n{text}", True
        return text, False


def _gap(k: int) -> float:
    """Seconds between request ``k - 1`` and request ``k``: the model's answer and the tool's run."""
    return 6.0 + (k * 37) % 29


def _bindir(workdir: Path) -> Path:
    """A directory to put first on PATH, whose ``python`` is this interpreter."""
    bindir = workdir / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    python = bindir / "python"
    if not python.is_symlink():
        # Scripts say ``python``; it must be this interpreter whatever PATH holds.
        with contextlib.suppress(FileExistsError):  # another session's thread made it
            python.symlink_to(sys.executable)
    return bindir


def record(script: Script, workdir: Path) -> Trace:
    """Run ``script`` for real (in ``workdir`` when it needs a project) and return its trace."""
    workdir = workdir.resolve()
    bindir = _bindir(workdir)
    if script.where == "stdlib":
        cwd = Path(sysconfig.get_paths()["stdlib"])
    else:
        cwd = workdir / script.name
        cwd.mkdir(parents=True, exist_ok=True)
    runner = _Runner(cwd, workdir, _environment(bindir))

    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": script.prompt}]}
    ]
    requests: list[Request] = []
    now = EPOCH
    for k, step in enumerate(script.steps):
        if k:
            now += _gap(k) + step.pause_s
        requests.append(Request(n_messages=len(messages), timestamp=now))
        ids = [f"toolu_{script.name}_{k:03d}_{j}" for j in range(len(step.calls))]
        uses: list[dict[str, Any]] = [{"type": "text", "text": step.say}]
        results: list[dict[str, Any]] = []
        for call_id, call in zip(ids, step.calls, strict=True):
            args = (
                {"command": call.arg}
                if call.tool == "bash"
                else {"path": call.arg, "content": call.content}
            )
            uses.append({"type": "tool_use", "id": call_id, "name": call.tool, "input": args})
            text, failed = runner.run(call)
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": call_id,
                "content": [{"type": "text", "text": text}] if text else [],
            }
            if failed:
                result["is_error"] = True
            results.append(result)
        messages.append({"role": "assistant", "content": uses})
        messages.append({"role": "user", "content": results})
    messages[-1] = {
        "role": "user",
        "content": [*messages[-1]["content"], {"type": "text", "text": script.closing}],
    }
    requests.append(Request(n_messages=len(messages), timestamp=now + _gap(len(script.steps))))
    return Trace(
        name=f"builtin/{script.name}",
        path=f"builtin/{script.name}",
        format="anthropic",
        provider="anthropic",
        messages=tuple(messages),
        requests=tuple(requests),
        system=SYSTEM,
        model=None,
        meta={"recorder": "benchmarks.recorder", "python": sys.version.split()[0]},
    )


def record_builtin(workdir: Path | None = None, scripts: Sequence[Script] = SCRIPTS) -> list[Trace]:
    """Record the built-in sessions (in a temporary directory unless ``workdir`` is given)."""
    if workdir is not None:
        return _record_all(scripts, workdir)
    with tempfile.TemporaryDirectory(prefix="toolbudget-rec-") as tmp:
        return _record_all(scripts, Path(tmp))


def _record_all(scripts: Sequence[Script], workdir: Path) -> list[Trace]:
    # Most of the time is spent waiting for subprocesses: one thread per session.
    _bindir(workdir.resolve())
    with ThreadPoolExecutor(max_workers=max(1, len(scripts))) as pool:
        return list(pool.map(lambda s: record(s, workdir), scripts))
