"""Importers of recorded agent traces into the normalized :class:`benchmarks.trace.Trace` model.

One private module per recording format, each with ``load(path, root) -> list[Trace]``; this
package recognizes formats (:func:`detect`) and loads a file or a whole directory, where a file it
cannot read is reported as :class:`Skipped` instead of stopping the run.

An import never silently shrinks a session: :func:`shrunk` names a trace that replays as at most
one request, or as far fewer requests than it has tool calls (a recording whose request
boundaries the importer could not find), and :func:`load_dir` lists it as skipped with that
reason instead of scoring it. The traces it keeps get the header the recording omits
(:func:`benchmarks.header.with_header`).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from benchmarks.header import with_header
from benchmarks.importers import (
    _anthropic,
    _claude_code,
    _codex_cli,
    _gemini_cli,
    _mini_swe_agent,
    _openai_chat,
    _openai_responses,
    _openhands,
)
from benchmarks.importers._check import checked
from benchmarks.importers._common import PartialTraceFile, TraceFileError
from benchmarks.importers._detect import sniff
from benchmarks.trace import Trace
from budget._errors import BudgetError, FormatError, InputError

__all__ = [
    "FORMATS",
    "LOADERS",
    "PartialTraceFile",
    "Skipped",
    "TraceFileError",
    "detect",
    "load_dir",
    "load_file",
    "shrunk",
]

Loader = Callable[[Path, Path], list[Trace]]

LOADERS: Mapping[str, Loader] = MappingProxyType(
    {
        "claude-code": _claude_code.load,
        "codex-cli": _codex_cli.load,
        "gemini-cli": _gemini_cli.load,
        "mini-swe-agent": _mini_swe_agent.load,
        "openhands": _openhands.load,
        "anthropic": _anthropic.load,
        "openai-chat": _openai_chat.load,
        "openai-responses": _openai_responses.load,
    }
)
FORMATS: tuple[str, ...] = tuple(LOADERS)

CALLS_PER_REQUEST_MAX = 5
"""More tool calls per request than this, on average, means the request boundaries were lost
(the public traces have at most 2.8: a Claude Code subagent's parallel reads)."""


@dataclass(frozen=True, slots=True)
class Skipped:
    """A file under the traces directory that gave no trace, and why."""

    path: str
    """Relative to the traces directory."""
    reason: str
    strategy: str | None = None
    """For a trace left out at replay time: the strategy whose replay failed (None: the file gave
    no trace to score)."""


def detect(path: Path) -> str | None:
    """The format name of the trace file at ``path``, or None when it is not recognized."""
    return sniff(path)[0]


def load_file(path: Path, root: Path, format: str | None = None) -> list[Trace]:
    """The traces in ``path`` (``root`` is the traces directory ``Trace.path`` is relative to).

    Raises :class:`TraceFileError` (an ``InputError``) naming the file when it cannot be read, is
    malformed or holds a trace the replay could not score (:func:`~benchmarks.importers._check.checked`:
    an impossible recorded usage, a message the replay cannot encode), and ``FormatError`` when its
    format is unknown or ``format`` is not a known name. When only some of a file's traces fail,
    a :class:`PartialTraceFile` (a ``TraceFileError``) names them and holds the others. No other
    exception leaves it.
    """
    if format is None:
        format, why = sniff(path)
        if format is None:
            raise FormatError(f"{path}: unrecognized trace format: {why}")
    loader = LOADERS.get(format)
    if loader is None:
        raise FormatError(f"unknown trace format {format!r}; known: {', '.join(FORMATS)}")
    try:
        return _all_checked(loader(path, root))
    except PartialTraceFile as exc:  # the loader's refusals named with the check's
        return _all_checked(exc.traces, [exc])
    except BudgetError:
        raise
    except OSError as exc:
        raise TraceFileError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except Exception as exc:
        # The recording does not have the shape its format promises (any exception: a KeyError,
        # orjson's recursion limit, a RecursionError of a deeply nested value); say where, keep going.
        raise TraceFileError(
            f"{path}: malformed {format} trace ({type(exc).__name__}: {exc})"
        ) from exc


def _all_checked(traces: list[Trace], bad: list[TraceFileError] | None = None) -> list[Trace]:
    """``traces`` through :func:`checked`; when some fail (or the loader refused some: ``bad``)
    but not all, a :class:`PartialTraceFile` naming every one, the others kept."""
    good: list[Trace] = []
    bad = list(bad or ())
    for trace in traces:
        try:
            good.append(checked(trace))
        except TraceFileError as exc:
            bad.append(exc)
    if bad and not good:
        # None left to score: a plain TraceFileError (a partial one's traces would be scored).
        if len(bad) == 1 and not isinstance(bad[0], PartialTraceFile):
            raise bad[0]
        raise TraceFileError("; ".join(str(e) for e in bad))
    if bad:
        raise PartialTraceFile("; ".join(str(e) for e in bad), good)
    return good


def shrunk(trace: Trace) -> str | None:
    """Why ``trace`` cannot be scored as a session (too few requests for it), or None."""
    requests = len(trace.requests)
    calls = sum(
        1
        for m in trace.messages
        if m.get("role") == "assistant"
        for b in m.get("content") or ()
        if isinstance(b, dict) and b.get("type") == "tool_use"
    )
    found = f"{requests} request{'' if requests == 1 else 's'} found"
    if requests <= 1 and calls == 0:
        # A single model call: a whole session of its own, with no tool result to budget.
        return f"{trace.name}: {found} and no tool call: nothing to budget, so it is not scored"
    if requests <= 1:
        why = found
    elif calls > CALLS_PER_REQUEST_MAX * requests:
        why = f"only {requests} requests for {calls} tool calls"
    else:
        return None
    notes = trace.meta.get("import_notes") or {}
    detail = f" (import notes: {', '.join(f'{k} {v}' for k, v in notes.items())})" if notes else ""
    return (
        f"{trace.name}: {why} in {len(trace.messages)} messages; the request boundaries of "
        f"this recording were not recognized, so it is not scored{detail}"
    )


def _ignored(rel: Path) -> bool:
    name = rel.name.lower()
    return (
        any(part.startswith(".") for part in rel.parts)
        or name.startswith("readme")
        or name.endswith(".meta.json")  # a Claude Code subagent's sidecar, read with its trace
    )


def _unfollowed(path: Path) -> str | None:
    """Why a symbolic link under the traces directory gives no trace; None for a directory or a
    special file (a socket, a FIFO), which are passed over quietly."""
    if not path.is_symlink():
        return None
    # Named, not passed over: whatever the user linked in was meant to be scored.
    if path.is_dir():
        return (
            f"{path}: a symbolic link to a directory, not followed (links can loop); "
            "pass its target to --traces"
        )
    if path.exists():
        # Not broken: a link to /dev/null or a FIFO, which a read would block on or find empty.
        return f"{path}: a symbolic link to a special file (a device, a FIFO, a socket), not read"
    return f"{path}: a broken symbolic link (its target is missing, or the links loop)"


def load_dir(root: Path) -> tuple[list[Trace], list[Skipped]]:
    """Every trace under ``root`` (recursively), sorted by path then name, and the files skipped.

    Hidden files, READMEs and ``*.meta.json`` sidecars are not traces and are passed over quietly;
    any other file that yields no trace is listed in the skipped files with the reason, and so are
    each trace that :func:`shrunk` refuses and each symbolic link that is broken or names a
    special file or a directory (not followed). Kept traces carry their reconstructed header.
    """
    if not root.is_dir():
        raise InputError(f"traces directory {root} does not exist or is not a directory")
    traces: list[Trace] = []
    skipped: list[Skipped] = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if _ignored(rel):
            continue
        if not path.is_file():
            why = _unfollowed(path)
            if why is not None:
                skipped.append(Skipped(rel.as_posix(), why))
            continue
        try:
            found = load_file(path, root)
        except PartialTraceFile as exc:
            # One instance of many (an evaluation's output.jsonl) is no reason to lose the rest.
            skipped.append(Skipped(rel.as_posix(), str(exc)))
            found = exc.traces
        except BudgetError as exc:
            skipped.append(Skipped(rel.as_posix(), str(exc)))
            continue
        except Exception as exc:
            skipped.append(Skipped(rel.as_posix(), f"{path}: {type(exc).__name__}: {exc}"))
            continue
        for trace in found:
            why = shrunk(trace)
            if why is None:
                traces.append(trace)
            else:
                skipped.append(Skipped(rel.as_posix(), why))
        if not found:
            skipped.append(Skipped(rel.as_posix(), "no trace in this file"))
    shown = [dataclasses.replace(t, name=_shown(t.name), path=_shown(t.path)) for t in traces]
    kept = with_header(_unique_names(shown))
    named = [dataclasses.replace(s, path=_shown(s.path), reason=_shown(s.reason)) for s in skipped]
    return sorted(kept, key=lambda t: (t.path, t.name)), named


def _shown(text: str) -> str:
    """``text`` with each byte of a file name that is not UTF-8 written as ``\\xff``.

    Python keeps such a byte as a lone surrogate (``\\udcff``), which no UTF-8 output takes:
    the JSON report and a strict terminal refused it after the whole replay. Escaped, the name
    still says which byte to look for.
    """
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _unique_names(traces: list[Trace]) -> list[Trace]:
    """Traces whose short names collide get their file path appended (and a counter if needed)."""
    counts = Counter(t.name for t in traces)
    renamed = [
        dataclasses.replace(t, name=f"{t.name}@{t.path}") if counts[t.name] > 1 else t
        for t in traces
    ]
    seen: Counter[str] = Counter()
    out: list[Trace] = []
    for trace in renamed:
        seen[trace.name] += 1
        n = seen[trace.name]
        out.append(dataclasses.replace(trace, name=f"{trace.name}#{n}") if n > 1 else trace)
    return out
