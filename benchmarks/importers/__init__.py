"""Importers of recorded agent traces into the normalized :class:`benchmarks.trace.Trace` model.

One private module per recording format, each with ``load(path, root) -> list[Trace]``; this
package recognizes formats (:func:`detect`) and loads a file or a whole directory, where a file it
cannot read is reported as :class:`Skipped` instead of stopping the run.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from benchmarks.importers import (
    _anthropic,
    _claude_code,
    _codex_cli,
    _gemini_cli,
    _mini_swe_agent,
    _openai_chat,
    _openhands,
)
from benchmarks.importers._common import TraceFileError
from benchmarks.importers._detect import sniff
from benchmarks.trace import Trace
from budget._errors import BudgetError, FormatError, InputError

__all__ = [
    "FORMATS",
    "LOADERS",
    "Skipped",
    "TraceFileError",
    "detect",
    "load_dir",
    "load_file",
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
    }
)
FORMATS: tuple[str, ...] = tuple(LOADERS)


@dataclass(frozen=True, slots=True)
class Skipped:
    """A file under the traces directory that gave no trace, and why."""

    path: str
    """Relative to the traces directory."""
    reason: str


def detect(path: Path) -> str | None:
    """The format name of the trace file at ``path``, or None when it is not recognized."""
    return sniff(path)[0]


def load_file(path: Path, root: Path, format: str | None = None) -> list[Trace]:
    """The traces in ``path`` (``root`` is the traces directory ``Trace.path`` is relative to).

    Raises :class:`TraceFileError` (an ``InputError``) naming the file when it cannot be read or
    is malformed, and ``FormatError`` when its format is unknown or ``format`` is not a known name.
    """
    if format is None:
        format, why = sniff(path)
        if format is None:
            raise FormatError(f"{path}: unrecognized trace format: {why}")
    loader = LOADERS.get(format)
    if loader is None:
        raise FormatError(f"unknown trace format {format!r}; known: {', '.join(FORMATS)}")
    try:
        return loader(path, root)
    except BudgetError:
        raise
    except OSError as exc:
        raise TraceFileError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        # The recording does not have the shape its format promises; say where, keep going.
        raise TraceFileError(
            f"{path}: malformed {format} trace ({type(exc).__name__}: {exc})"
        ) from exc


def _ignored(rel: Path) -> bool:
    name = rel.name.lower()
    return (
        any(part.startswith(".") for part in rel.parts)
        or name.startswith("readme")
        or name.endswith(".meta.json")  # a Claude Code subagent's sidecar, read with its trace
    )


def load_dir(root: Path) -> tuple[list[Trace], list[Skipped]]:
    """Every trace under ``root`` (recursively), sorted by path then name, and the files skipped.

    Hidden files, READMEs and ``*.meta.json`` sidecars are not traces and are passed over quietly;
    any other file that yields no trace is listed in the skipped files with the reason.
    """
    if not root.is_dir():
        raise InputError(f"traces directory {root} does not exist or is not a directory")
    traces: list[Trace] = []
    skipped: list[Skipped] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root)
        if _ignored(rel):
            continue
        try:
            traces.extend(load_file(path, root))
        except BudgetError as exc:
            skipped.append(Skipped(rel.as_posix(), str(exc)))
    return sorted(_unique_names(traces), key=lambda t: (t.path, t.name)), skipped


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
