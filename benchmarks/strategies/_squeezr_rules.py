"""Squeezr's deterministic compression of one tool result's text (its ``preprocessForTool``).

Re-implemented from the behaviour of github.com/sergioramosv/squeezr at commit
2870ef1402296195fadf040840647b5379f8983d (v1.46.3, 2026-05-28), ``src/deterministic.ts``; see
``benchmarks/strategies/squeezr.py`` for the pipeline around it and what is left out.

By tool (the lower-cased name of the ``tool_use`` the result answers):

* ``read``: the base clean-up without the progress-bar filter (CRs kept), then over 200 lines: a
  lockfile becomes one line of counts; over 500 lines of recognised source (TS, Python, Go, Rust)
  keeps its top-level structural lines; else the first 100 and last 80 lines around a marker;
* ``grep``: the base clean-up, then from 20 non-empty lines: matches grouped by file, 8 per file
  (6 at pressure 0.75, 4 at 0.9), 30 files at most; lines with no ``file:`` prefix (a file
  listing) keep their first 8;
* ``glob``: the base clean-up, then over 30 paths a count of files per directory;
* ``bash``: the base clean-up, then the first output family recognised (git diff, log, status
  and branch; pytest and Python tracebacks; go test; ...) is compacted, else dense errors keep
  their lines and a line of context, else output over 80 lines keeps its last 50 (50 / 30 at
  pressure 0.9). Families this module recognises but does not compact (Rust, JS test runners and
  linters, package listings, Docker, kubectl, Prisma, gh tables other than checks) keep the base
  clean-up only: their savings are under-counted, never invented;
* any other tool: the base clean-up.

The base clean-up: CRLF and CR to LF; ANSI escapes and control characters removed; progress-bar
lines (and with them every blank line) dropped; ISO and clock timestamps removed; a repeated
stack trace of 3+ frames becomes one line; a line occurring 3+ times is kept once, followed by
``  ... [repeated N more times]``; inline JSON objects of 200+ characters minified; trailing
blanks, runs of blank lines and the ends trimmed.

JavaScript semantics kept where they change the result: ``^`` without the ``m`` flag anchors at
the text's start only, ``\\d``/``\\w``/``\\b`` are ASCII, ``JSON.stringify`` prints an integral
number without ``.0``. Lengths are Python's (JavaScript counts UTF-16 units: characters outside
the BMP count twice there).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any, Final

__all__ = ["bash_family", "preprocess", "preprocess_assistant", "preprocess_for_tool"]

_A: Final = re.ASCII

# --- base pipeline -------------------------------------------------------------------------------

_ANSI_CSI: Final = re.compile(r"\x1b\[[0-9;]*[mGKHF]")
_ANSI_OSC: Final = re.compile(r"\x1b\][^\x07]*\x07")
_CONTROL: Final = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_BAR_CHARS: Final = re.compile(r"[\s=\-#░█▓▒▌▐►◄|]")
_TRAILING_BLANKS: Final = re.compile(r"[ \t]+$", re.MULTILINE)
_BLANK_RUNS: Final = re.compile(r"\n{3,}")
_FRAME: Final = re.compile(r"^[ \t]{2,}(at |File \"|in <)")
_JSON_OBJECT: Final = re.compile(r"\{[\s\S]{200,}?\}")
_ISO_TIME: Final = re.compile(
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?", _A
)
_BRACKET_TIME: Final = re.compile(r"\[\d{2}:\d{2}:\d{2}(\.\d+)?\]", _A)
_CLOCK_TIME: Final = re.compile(r"\d{2}:\d{2}:\d{2}(\.\d+)?\s", _A)


def _strip_ansi(text: str) -> str:
    return _CONTROL.sub("", _ANSI_OSC.sub("", _ANSI_CSI.sub("", text)))


def _strip_progress_bars(text: str) -> str:
    # A line is kept when what is left without bar characters is over 30% of it or over 5
    # characters: an empty line is neither, so every blank line goes too (as there).
    kept = []
    for line in text.split("\n"):
        rest = len(_BAR_CHARS.sub("", line))
        if rest > len(line) * 0.3 or rest > 5:
            kept.append(line)
    return "\n".join(kept)


def _collapse_whitespace(text: str) -> str:
    return _BLANK_RUNS.sub("\n\n", _TRAILING_BLANKS.sub("", text)).strip()


def _dedup_lines(text: str) -> str:
    lines = text.split("\n")
    counts: dict[str, int] = {}
    for line in lines:
        key = line.strip()
        if key:
            counts[key] = counts.get(key, 0) + 1
    out: list[str] = []
    emitted: set[str] = set()
    for line in lines:
        key = line.strip()
        total = counts.get(key, 1)
        if total < 3:
            out.append(line)
        elif key not in emitted:
            emitted.add(key)
            out.append(line)
            out.append(f"  ... [repeated {total - 1} more times]")
    return "\n".join(out)


def _dedup_stack_traces(text: str) -> str:
    chunks: list[tuple[bool, list[str]]] = []
    for line in text.split("\n"):
        frame = bool(_FRAME.match(line))
        if not chunks or chunks[-1][0] != frame:
            chunks.append((frame, [line]))
        else:
            chunks[-1][1].append(line)
    stacks = ["\n".join(lines) for frame, lines in chunks if frame and len(lines) >= 3]
    if len(set(stacks)) == len(stacks):  # none, or none repeated
        return text
    seen: set[str] = set()
    out: list[str] = []
    for frame, lines in chunks:
        key = "\n".join(lines)
        if not frame or len(lines) < 3:
            out.extend(lines)
        elif key not in seen:
            seen.add(key)
            out.extend(lines)
        else:
            out.append(f"  ... [same {len(lines)}-frame stack trace repeated]")
    return "\n".join(out)


_INDEX_KEY: Final = re.compile(r"0|[1-9][0-9]*")


def _js_key_order(obj: dict[str, Any]) -> list[str]:
    """A JS object's key order: array-index keys ascending first, then the rest as inserted."""
    index = [k for k in obj if _INDEX_KEY.fullmatch(k) and int(k) < 2**32 - 1]
    return sorted(index, key=int) + [k for k in obj if k not in set(index)]


def _js_json(value: Any) -> str:
    """``JSON.stringify(value)`` of a parsed value (integral numbers print without ``.0``)."""

    def plain(v: Any) -> Any:
        if isinstance(v, float) and v.is_integer() and abs(v) < 1e21:
            return int(v)
        if isinstance(v, dict):
            return {k: plain(v[k]) for k in _js_key_order(v)}
        if isinstance(v, list):
            return [plain(x) for x in v]
        return v

    return json.dumps(plain(value), separators=(",", ":"), ensure_ascii=False)


def _no_constant(name: str) -> Any:
    raise ValueError(name)  # JSON.parse refuses NaN and Infinity


def _minify_json(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        try:
            value = json.loads(match.group(0), parse_constant=_no_constant)
        except (ValueError, RecursionError):
            return match.group(0)
        if isinstance(value, float) and not math.isfinite(value):
            return match.group(0)
        return _js_json(value)

    return _JSON_OBJECT.sub(one, text)


def _strip_timestamps(text: str) -> str:
    return _CLOCK_TIME.sub("", _BRACKET_TIME.sub("", _ISO_TIME.sub("", text)))


def preprocess(text: str) -> str:
    """The base clean-up every tool's result but Read's goes through (``preprocess``)."""
    t = text.replace("\r\n", "\n").replace("\r", "\n")
    t = _strip_ansi(t)
    t = _strip_progress_bars(t)
    t = _strip_timestamps(t)
    t = _dedup_stack_traces(t)
    t = _dedup_lines(t)
    t = _minify_json(t)
    return _collapse_whitespace(t)


def _preprocess_read(text: str) -> str:
    # No progress-bar filter: on cat -n output it dropped blank lines and broke Edit (as there).
    t = _strip_ansi(text)
    t = _strip_timestamps(t)
    t = _dedup_stack_traces(t)
    t = _dedup_lines(t)
    t = _minify_json(t)
    return _collapse_whitespace(t)


# --- prose (compressor.ts's steps 1.5-1.7 run it on old assistant and user text) ---------------

_I: Final = re.IGNORECASE | re.ASCII
_VERBOSE: Final[tuple[tuple[re.Pattern[str], str], ...]] = tuple(
    (re.compile(rf"\b{phrase}\b", _I), short)
    for phrase, short in (
        ("in order to", "to"),
        ("due to the fact that", "because"),
        ("in spite of the fact that", "although"),
        ("with regard to", "about"),
        ("at this point in time", "now"),
        ("in the event that", "if"),
        ("for the purpose of", "to"),
        ("in a manner that", "how"),
        ("in the process of", ""),
        ("as a matter of fact", ""),
        ("it is important to note that", "note:"),
        ("it should be noted that", "note:"),
        ("please note that", ""),
        ("keep in mind that", ""),
    )
)
_LEADING_MARKER: Final = re.compile(
    r"(^|\.\s+|\n)([Ll]et me |[Ii]'ll |[Ii] will |[Ii]'m going to |[Nn]ow,? |[Ss]o,? )"
)
_MARKER: Final = re.compile(
    r"\b(let me |i'll |i will |i'm going to |i'm now |i am now |i shall |now |so,? |so let's "
    r"|well,? |alright,? |actually,? |basically,? |essentially,? |fundamentally,? )",
    _I,
)
_TRAILING_SUMMARY: Final = re.compile(
    r"\n\n(?:Here'?s a (?:summary|brief recap)|To summarize|In summary|Summary:|Recap:|To recap"
    r"|In conclusion)\b[\s\S]{50,}\Z",
    _I,
)
_FENCE: Final = re.compile(r"```[\s\S]*?```")


def _prose(text: str) -> str:
    p = _LEADING_MARKER.sub(r"\1", text)
    p = _MARKER.sub("", p)
    for rx, short in _VERBOSE:
        p = rx.sub(short, p)
    p = re.sub(r"\*\*([^*\n]+)\*\*", r"\1", p)
    p = re.sub(r"(?<!\w)_([^_\n]+)_(?!\w)", r"\1", p, flags=re.ASCII)
    return re.sub(r" +([.,;:!?])", r"\1", re.sub(r"  +", " ", p))


def preprocess_assistant(text: str) -> str:
    """``preprocessAssistant``: the base clean-up, then outside code fences narration markers,
    verbose phrases and markdown emphasis go; a closing summary paragraph goes."""
    t = preprocess(text)
    out: list[str] = []
    last = 0
    for fence in _FENCE.finditer(t):
        out.append(_prose(t[last : fence.start()]))
        out.append(fence.group(0))
        last = fence.end()
    out.append(_prose(t[last:]))
    return _collapse_whitespace(_TRAILING_SUMMARY.sub("", "".join(out)))


# --- Read ----------------------------------------------------------------------------------------

_READ_MAX_LINES: Final = 200
_READ_HEAD: Final = 100
_READ_TAIL: Final = 80
_LOCK_PACKAGE: Final = re.compile(r'^"?[a-z@]', re.MULTILINE)
_LANGS: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    (
        "ts",
        re.compile(
            r"^import .+ from ['\"]|^export (function|class|const|type|interface|default)\b"
            r"|: (string|number|boolean|void|unknown)\b",
            _A,
        ),
    ),
    ("py", re.compile(r"^from \S+ import |^def \w+\(|^class \w+[:(]", _A)),
    ("go", re.compile(r"^package \w+|^func \w+\(|^\s*import \(", _A)),
    ("rs", re.compile(r"^use (std|crate|self)::|^(pub\s+)?fn \w+\(|^impl\s+", _A)),
)
_STRUCTURE: Final = {
    "ts": re.compile(
        r"^(import |export |async function |function |class |const |let |var |type |interface "
        r"|enum |@\w)",
        _A,
    ),
    "py": re.compile(r"^(import |from .+ import|def |class |@\w)", _A),
    "go": re.compile(r"^(import|func |type |var |const |package )\b", _A),
    "rs": re.compile(r"^(use |pub |fn |struct |enum |impl |trait |mod |const |static )\b", _A),
}


def _compact_read(text: str) -> str:
    lines = text.split("\n")
    if len(lines) <= _READ_MAX_LINES:
        return text
    if "integrity sha" in text or '"resolved"' in text or "# yarn lockfile" in text:
        packages = len(_LOCK_PACKAGE.findall(text))
        return f"[lockfile — {len(lines)} lines, ~{packages} packages — omitted to save tokens]"
    if len(lines) > 500:
        sample = "\n".join(lines[:30])
        # No m flag there: each ^ anchors at the sample's start only.
        lang = next((name for name, rx in _LANGS if rx.search(sample)), None)
        if lang is not None:
            structural = [line for line in lines if _STRUCTURE[lang].match(line)]
            if len(structural) >= 2:
                omitted = len(lines) - len(structural)
                return "\n".join(structural) + f"\n... [{omitted} implementation lines omitted]"
    omitted = len(lines) - _READ_HEAD - _READ_TAIL
    marker = f"\n... [{omitted} lines omitted] ...\n"
    return "\n".join([*lines[:_READ_HEAD], marker, *lines[-_READ_TAIL:]])


# --- Grep, Glob ----------------------------------------------------------------------------------

_GREP_LINE: Final = re.compile(r"^([^:]+):(\d+:)?(.*)$", _A)
_GREP_PER_FILE: Final = 8
_GREP_FILES: Final = 30
_RAW: Final = "\0raw"  # a key no file name can be


def _compact_grep(text: str, pressure: float) -> str:
    lines = [line for line in text.split("\n") if line]
    if len(lines) < 20:
        return text
    per_file = 4 if pressure >= 0.9 else 6 if pressure >= 0.75 else _GREP_PER_FILE
    by_file: dict[str, list[str]] = {}
    for line in lines:
        m = _GREP_LINE.match(line)
        if m is None:
            by_file.setdefault(_RAW, []).append(line)
            continue
        kept = by_file.setdefault(m.group(1), [])
        if len(kept) < per_file:
            kept.append(m.group(3).strip())
        elif len(kept) == per_file:
            kept.append("  ... (+more)")
    out = []
    for name in list(by_file)[:_GREP_FILES]:
        kept = by_file[name]
        if name == _RAW:
            out.append("\n".join(kept[:_GREP_PER_FILE]))
        else:
            body = "\n".join("  " + k for k in kept)
            out.append(f"{name} ({len(kept)} match{'' if len(kept) == 1 else 'es'}):\n{body}")
    if len(by_file) > _GREP_FILES:
        out.append(f"... [{len(by_file) - _GREP_FILES} more files]")
    return "\n\n".join(out)


def _compact_listing(text: str) -> str:
    lines = [line for line in text.split("\n") if line.strip()]
    if len(lines) < 20:
        return text
    by_dir: dict[str, int] = {}
    for line in lines:
        d = "/".join(line.replace("\\", "/").split("/")[:-1]) or "."
        by_dir[d] = by_dir.get(d, 0) + 1
    ranked = sorted(by_dir.items(), key=lambda kv: -kv[1])  # stable, as Array.sort
    return f"{len(lines)} files total:\n" + "\n".join(f"{d}/ ({n} files)" for d, n in ranked)


# --- Bash ----------------------------------------------------------------------------------------


def _compact_git_diff(text: str, pressure: float) -> str:
    out: list[str] = []
    budget = 0
    allowed = 0 if pressure >= 0.9 else 1
    changed: dict[str, None] = {}
    for line in text.split("\n"):
        if line.startswith(("diff --git", "index ", "--- ", "+++ ")):
            out.append(line)
            budget = 0
        elif line.startswith("@@"):
            out.append(line)
            budget = allowed
            m = re.search(r"@{2}[^@]+@{2}\s+(.+)", line)
            if m:
                name = re.sub(
                    r"^(export\s+)?(default\s+)?(async\s+)?(function\s+)?", "", m.group(1).strip()
                )
                name = re.split(r"[\s(:{<]", name)[0]
                if name and re.match(r"\w", name, _A):
                    changed[name] = None
        elif line.startswith(("+", "-")):
            out.append(line)
            budget = allowed
        elif line.startswith(" ") and budget > 0:
            out.append(line)
            budget -= 1
    if len(out) > 100 and changed:
        return f"Changed: {', '.join(changed)}\n" + "\n".join(out)
    return "\n".join(out)


def _full_git_log(text: str) -> bool:
    return text.startswith("commit ") and "Author:" in text and "Date:" in text


def _compact_git_log(text: str, pressure: float) -> str:
    cap = 10 if pressure >= 0.9 else 20 if pressure >= 0.75 else 30
    if _full_git_log(text):
        out: list[str] = []
        sha = author = date = msg = ""
        for line in text.split("\n"):
            if line.startswith("commit "):
                if sha:
                    out.append(f"{sha} {msg} ({author}, {date})")
                sha, author, date, msg = line[7:14], "", "", ""
            elif line.startswith("Author:"):
                author = line.replace("Author:", "", 1).strip().split("<")[0].strip()
            elif line.startswith("Date:"):
                date = line.replace("Date:", "", 1).strip()
            elif line.strip() and author:
                msg = msg or line.strip()
        if sha:
            out.append(f"{sha} {msg} ({author}, {date})")
        commits = out[:cap]
        if len(out) > cap:
            commits.append(f"... [{len(out) - cap} more commits]")
        return "\n".join(commits) or text
    lines = [line for line in text.split("\n") if line.strip()]
    if len(lines) > cap:
        return "\n".join(lines[:cap]) + f"\n... [{len(lines) - cap} more commits]"
    return text


def _looks_like_git_log(text: str) -> bool:
    if _full_git_log(text):
        return True
    lines = [line for line in text.split("\n") if line.strip()]
    if len(lines) < 3:
        return False
    hashes = [line for line in lines if re.match(r"[a-f0-9]{7,12}[^a-f0-9]", line)]
    return len(hashes) >= 3 and len(hashes) / len(lines) > 0.6


def _compact_git_status(text: str) -> str:
    lines = text.split("\n")
    staged: list[str] = []
    modified: list[str] = []
    untracked: list[str] = []
    section = branch = tracking = ""
    for line in lines:
        trimmed = line.strip()
        if line.startswith("On branch "):
            branch = line.replace("On branch ", "", 1).strip()
        elif line.startswith("HEAD detached at"):
            branch = trimmed
        elif "ahead" in trimmed or "behind" in trimmed or "diverged" in trimmed:
            tracking = trimmed
        elif line.startswith("Changes to be committed"):
            section = "staged"
        elif line.startswith("Changes not staged"):
            section = "modified"
        elif line.startswith("Untracked files:"):
            section = "untracked"
        elif line.startswith(("nothing to commit", "no changes added")):
            section = ""
        elif line.startswith(("\t", "  ")) and trimmed and not trimmed.startswith("("):
            name = re.sub(
                r"^(modified|new file|deleted|renamed|both modified|copied):\s+", "", trimmed
            )
            {"staged": staged, "modified": modified, "untracked": untracked}.get(
                section, []
            ).append(name)
    out: list[str] = []
    if branch:
        out.append(f"* {branch}{f' [{tracking}]' if tracking else ''}")
    for mark, label, names in (
        ("+", "Staged", staged),
        ("~", "Modified", modified),
        ("?", "Untracked", untracked),
    ):
        if names:
            listed = "\n".join("   " + n for n in names)
            out.append(
                f"{mark} {label}: {len(names)} file{'' if len(names) == 1 else 's'}\n{listed}"
            )
    clean = next((x for x in lines if "nothing to commit" in x or "working tree clean" in x), None)
    if not (staged or modified or untracked) and clean is not None:
        out.append(clean.strip())
    if not out:
        return clean if clean is not None else text
    return "\n".join(out)


_BRANCH_LINE: Final = re.compile(r"^[* ]{1,2}[\w/.\-]+(?: -> [\w/.\-]+)?$", _A)


def _looks_like_git_branch(text: str) -> bool:
    lines = [line for line in text.split("\n") if line.strip()]
    if len(lines) < 2:
        return False
    return sum(1 for line in lines if _BRANCH_LINE.match(line)) / len(lines) > 0.8


def _compact_git_branch(text: str) -> str:
    lines = [line for line in text.split("\n") if line.strip()]
    if len(lines) <= 20:
        return text
    current = next((line for line in lines if line.startswith("* ")), None)
    rest = [line for line in lines if not line.startswith("* ")][:15]
    omitted = len(lines) - 1 - len(rest)
    out = [current, *rest] if current is not None else rest
    if omitted > 0:
        out.append(f"... [{omitted} more branches]")
    return "\n".join(out)


def _summary_or(lines: list[str], pattern: str, text: str) -> str:
    found = "\n".join(line for line in lines if re.search(pattern, line, _A))
    return found or text


_PASS_MARK: Final = re.compile(r"^\s*[\u2713\u2714]\s")
_FAIL_MARK: Final = re.compile(r"^\s*([\u2718\u00d7\u2715]|FAILED)\s")
_ANY_MARK: Final = re.compile(r"^\s*[\u2713\u2714\u2718\u00d7\u2715]\s")


def _extract_playwright_failures(text: str) -> str:
    lines = text.split("\n")
    out: list[str] = []
    for i, line in enumerate(lines):
        if _PASS_MARK.match(line):
            continue
        if _FAIL_MARK.match(line):
            out.append(line)
            for after in lines[i + 1 :]:
                if _ANY_MARK.match(after) or re.match(r"\s*\d+\s+(passed|failed|skipped)", after):
                    break
                if after.strip():
                    out.append(after)
            continue
        if "Error:" in line or "TimeoutError" in line:
            out.append(line)
        if (
            re.match(r"\s*\d+\s+(passed|failed|skipped|flaky)", line)
            or "Slowest" in line
            or line.startswith("Finished in")
        ):
            out.append(line)
    if not out:
        return _summary_or(lines, r"\d+\s+(passed|failed)", text)
    return "\n".join(out)


def _extract_py_failures(text: str) -> str:
    lines = text.split("\n")
    out: list[str] = []
    in_traceback = in_fail = False
    for line in lines:
        if line.startswith("Traceback (most recent call last)"):
            out.append(line)
            in_traceback = True
        elif in_traceback:
            out.append(line)
            if line.strip() and not line.startswith((" ", "\t")):
                in_traceback = False
        elif re.match(r"(FAILED|ERROR) .+::", line):
            out.append(line)
            in_fail = True
        elif re.match(
            r"(PASSED|passed \d+|failed \d+|error \d+|=+ \d+ (passed|failed|error))", line, _A
        ):
            out.append(line)
            in_fail = False
        elif in_fail and line.strip():
            out.append(line)
        elif not line.strip():
            in_fail = False
    if not out:
        return _summary_or(lines, r"\d+ (passed|failed|error)", text)
    return "\n".join(out)


def _looks_like_go_test(text: str) -> bool:
    return bool(
        re.match(r"--- (PASS|FAIL):", text) or re.match(r"(ok|FAIL)\s+\S+\s+[\d.]+s", text, _A)
    )


def _extract_go_failures(text: str) -> str:
    lines = text.split("\n")
    out: list[str] = []
    in_fail = False
    for line in lines:
        if line.startswith(("--- FAIL:", "FAIL\t")):
            out.append(line)
            in_fail = True
        elif line.startswith("--- PASS:") or re.match(r"ok\s", line, _A):
            in_fail = False
        elif line.startswith(("FAIL", "panic:")):
            out.append(line)
            in_fail = True
        elif re.match(r"(ok|FAIL)\s+\S+\s+[\d.]+s", line, _A) or (in_fail and line.strip()):
            out.append(line)
        elif not line.strip():
            in_fail = False
    if not out:
        return _summary_or(lines, r"^(ok|FAIL)\s", text)
    return "\n".join(out)


def _extract_install_summary(text: str) -> str:
    keep = re.compile(
        r"added \d+|removed \d+|Done in|\d+ packages? in \d|warn|vulnerabilit|up to date", _A
    )
    return "\n".join(line for line in text.split("\n") if keep.search(line)) or text


def _looks_like_terraform(text: str) -> bool:
    planned = "will be created" in text or "will be destroyed" in text or "must be replaced" in text
    return ("# " in text and planned) or "Terraform will perform" in text


def _compact_terraform(text: str) -> str:
    out: list[str] = []
    for line in text.split("\n"):
        if (
            re.match(r"\s*#", line)
            and ("will be" in line or "must be" in line or "has been" in line)
        ) or any(k in line for k in ("Plan:", "Apply complete", "No changes", "Destroy complete")):
            out.append(line.strip())
        elif "Error:" in line or "error:" in line:
            out.append(line)
    return "\n".join(out) or text


def _strip_npx_noise(text: str) -> str:
    lines = text.split("\n")
    noise = next(
        (i for i, x in enumerate(lines) if re.match(r"(npx: installed \d+|Packages: \d+)", x, _A)),
        -1,
    )
    if noise >= 0:
        start = next(
            (
                i
                for i, x in enumerate(lines)
                if i > noise and x.strip() and not re.match(r"npm (warn|error)", x)
            ),
            -1,
        )
        if start > 0:
            return "\n".join(lines[start:])
    return "\n".join(x for x in lines if not re.match(r"npm warn (deprecated|WARN)", x))


def _compact_gh_checks(text: str) -> str:
    lines = [line for line in text.split("\n") if line.strip()]
    if len(lines) <= 25:
        return text
    return "\n".join(lines[:25]) + f"\n... [{len(lines) - 25} more checks]"


def _compact_curl(text: str) -> str:
    lines = text.split("\n")
    start = next(
        (i for i, x in enumerate(lines) if x.startswith(("* Connected", "{", "[", "<")) or x == ""),
        -1,
    )
    if start < 3:
        return text
    verbose = [x for x in lines if x.startswith((">", "<", "*"))]
    if len(verbose) > len(lines) * 0.4:
        return "\n".join(
            x for x in lines if not x.startswith((">", "*")) and not re.match(r"^\s*$", x)
        )
    return text


def _compact_wget(text: str) -> str:
    keep = [
        x
        for x in text.split("\n")
        if any(k in x for k in ("saved [", "200 OK", "404 Not Found", "Error", "ERROR"))
        or re.match(r"\d{4}-\d{2}-\d{2}.*saved", x, _A)
    ]
    return "\n".join(keep) or text


_ERROR_WORD: Final = re.compile(
    r"\b(Error|ERROR|error|FATAL|fatal|WARN|Warning|warning|Exception|exception|failed|FAILED)\b",
    _A,
)
_ERROR_LINE: Final = re.compile(
    r"\b(Error|ERROR|error|FATAL|fatal|Exception|exception|failed|FAILED)\b", _A
)
_COMMENTED: Final = re.compile(r"^\s*//")


def _extract_generic_errors(text: str) -> str:
    lines = text.split("\n")
    if len(lines) < 30:
        return text
    flagged = [x for x in lines if _ERROR_WORD.search(x) and not _COMMENTED.match(x)]
    if not flagged or len(flagged) > len(lines) * 0.5:
        return text
    seen: set[int] = set()
    out: list[str] = []
    for i, line in enumerate(lines):
        if _ERROR_LINE.search(line) and not _COMMENTED.match(line):
            if i - 1 not in seen and i > 0 and lines[i - 1].strip():
                seen.add(i - 1)
                out.append(lines[i - 1])
            seen.add(i)
            out.append(line)
            if i + 1 < len(lines) and lines[i + 1].strip():
                seen.add(i + 1)
                out.append(lines[i + 1])
    saved = len(lines) - len(out)
    if out and saved > 10:
        return "\n".join(out) + f"\n... [{saved} non-error lines omitted]"
    return text


def _truncate_long(text: str, pressure: float) -> str:
    threshold, keep = (50, 30) if pressure >= 0.9 else (80, 50)
    lines = text.split("\n")
    if len(lines) <= threshold:
        return text
    return f"... [{len(lines) - keep} earlier lines omitted]\n" + "\n".join(lines[-keep:])


def _same(text: str, _pressure: float) -> str:
    """A family Squeezr compacts and this module does not: the base clean-up only."""
    return text


def _has(*words: str) -> Callable[[str], bool]:
    return lambda t: all(w in t for w in words)


def _rx(pattern: str, flags: int = _A) -> Callable[[str], bool]:
    compiled = re.compile(pattern, flags)
    return lambda t: compiled.search(t) is not None


_Detect = Callable[[str], bool]
_Compact = Callable[[str, float], str]
_BASH: Final[tuple[tuple[str, _Detect, _Compact], ...]] = (
    # (family, looksLike..., compactor), in applyBashPatterns' order: the first match wins.
    (
        "gitDiff",
        lambda t: "diff --git" in t or ("--- a/" in t and "+++ b/" in t),
        _compact_git_diff,
    ),
    ("gitLog", _looks_like_git_log, _compact_git_log),
    (
        "gitStatus",
        lambda t: t.startswith(("On branch ", "HEAD detached at")),
        lambda t, _p: _compact_git_status(t),
    ),
    ("gitBranch", _looks_like_git_branch, lambda t, _p: _compact_git_branch(t)),
    ("cargoTest", _rx(r"test .+\.\.\. (ok|FAILED)"), _same),
    (
        "cargoBuild",
        lambda t: (
            bool(re.search(r"error\[E\d+\]", t, _A))
            or ("Compiling" in t and ("error" in t or "warning" in t))
        ),
        _same,
    ),
    (
        "vitest",
        lambda t: (
            ("✓" in t or "✕" in t or "×" in t) and ("Test Files" in t or "PASS" in t or "FAIL" in t)
        ),
        _same,
    ),
    (
        "playwright",
        lambda t: (
            ("playwright" in t or bool(re.search(r"\.(spec|test)\.(ts|js)", t)))
            and any(k in t for k in ("passed", "failed", "Error", "FAILED"))
        ),
        lambda t, _p: _extract_playwright_failures(t),
    ),
    (
        "pyTraceback",
        lambda t: "Traceback (most recent call last)" in t or ("FAILED" in t and ".py::" in t),
        lambda t, _p: _extract_py_failures(t),
    ),
    ("goTest", _looks_like_go_test, lambda t, _p: _extract_go_failures(t)),
    ("tsc", _rx(r"error TS\d+:"), _same),
    ("eslint", _rx(r"\d+:\d+\s+(error|warning)\s+"), _same),
    (
        "prettier",
        lambda t: "[warn]" in t and ("needs formatting" in t or "Code style issues" in t),
        _same,
    ),
    (
        "nextBuild",
        lambda t: "Next.js" in t and ("Route (" in t or "Failed to compile" in t),
        _same,
    ),
    (
        "pkgInstall",
        lambda t: (
            bool(re.search(r"added \d+ package", t, _A))
            or ("packages are looking for funding" in t and len(t.split("\n")) > 5)
        ),
        lambda t, _p: _extract_install_summary(t),
    ),
    (
        "pkgList",
        lambda t: "├──" in t and ("@" in t or bool(re.search(r"\bv\d+\.\d+", t, _A))),
        _same,
    ),
    ("pkgOutdated", _rx(r"Current\s+Wanted\s+Latest", re.IGNORECASE | _A), _same),
    ("terraform", _looks_like_terraform, lambda t, _p: _compact_terraform(t)),
    (
        "npx",
        _rx(r"^npm warn|^npm error|Packages: .*installed|npx: installed"),
        lambda t, _p: _strip_npx_noise(t),
    ),
    ("dockerPs", _has("CONTAINER ID", "IMAGE"), _same),
    ("dockerImages", _has("REPOSITORY", "TAG", "IMAGE ID"), _same),
    (
        "kubectl",
        _rx(
            r"^NAME\s+READY\s+STATUS|^NAME\s+STATUS\s+ROLES|^NAME\s+TYPE\b|^NAME\s+AGE\b"
            r"|^NAME\s+SHORTNAMES\b"
        ),
        _same,
    ),
    (
        "prisma",
        lambda t: "prisma" in t.lower() and ("┌" in t or "└─" in t or "Prisma schema" in t),
        _same,
    ),
    (
        "ghPrChecks",
        lambda t: (
            bool(re.search(r"\bCONCLUSION\b", t, _A))
            and bool(re.search(r"(success|failure|neutral|cancelled|skipped)", t, re.IGNORECASE))
            and "WORKFLOW" not in t
        ),
        lambda t, _p: _compact_gh_checks(t),
    ),
    (
        "ghPr",
        lambda t: (
            bool(re.search(r"^(title|state|url):?\s", t, re.IGNORECASE | re.MULTILINE | _A))
            and "github.com" in t
        ),
        _same,
    ),
    ("ghRunList", _has("STATUS", "CONCLUSION", "WORKFLOW"), _same),
    ("ghIssueList", _has("ISSUE", "TITLE", "STATE"), _same),
    (
        "curl",
        lambda t: "* Connected to" in t or sum(1 for x in t.split("\n") if x.startswith(">")) > 3,
        lambda t, _p: _compact_curl(t),
    ),
    (
        "wget",
        lambda t: (
            "--" in t
            and any(
                k in t for k in ("Resolving ", "Connecting to ", "HTTP request sent", "saved [")
            )
        ),
        lambda t, _p: _compact_wget(t),
    ),
)


def bash_family(text: str) -> str | None:
    """The output family Squeezr's Bash patterns recognise ``text`` as first, or None."""
    return next((name for name, looks, _ in _BASH if looks(text)), None)


def _apply_bash(text: str, pressure: float) -> str:
    for _name, looks, compact in _BASH:
        if looks(text):
            return compact(text, pressure)
    errors = _extract_generic_errors(text)
    if errors != text:
        return errors
    return _truncate_long(text, pressure)


def preprocess_for_tool(text: str, tool: str, pressure: float = 0.0) -> str:
    """``text`` as Squeezr's deterministic stages leave a result of ``tool`` at ``pressure``."""
    name = tool.lower()
    if name == "read":
        return _compact_read(_preprocess_read(text))
    t = preprocess(text)
    if name == "bash":
        return _apply_bash(t, pressure)
    if name == "grep":
        return _compact_grep(t, pressure)
    if name == "glob" and len([x for x in t.split("\n") if x.strip()]) > 30:
        return _compact_listing(t)
    return t
