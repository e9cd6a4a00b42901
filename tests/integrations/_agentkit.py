"""What the integration tests share: a big file worth reading, and reading what the model got."""

from __future__ import annotations

import random
import re
from pathlib import Path

FILE_LINES = 2_000
PAGE_OFFSET = 1_234
PAGE_LIMIT = 40
_REF = re.compile(r"stored in full as ref ([0-9a-f]{32})")
_ROW = re.compile(r"^ *(\d+)\t(.*)$")
_WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "omicron",
    "pi",
    "rho",
    "sigma",
    "tau",
    "upsilon",
    "phi",
    "chi",
    "psi",
    "omega",
    "error",
    "warning",
    "retry",
    "timeout",
    "socket",
    "buffer",
]


def write_big_file(path: Path, *, seed: int = 20_241_202) -> str:
    """Write a log-like file of varied lines (about 135 KB) to ``path``; return its text."""
    rng = random.Random(seed)
    lines = []
    for n in range(1, FILE_LINES + 1):
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 12)))
        lines.append(
            f"{n:05d} [{rng.choice(('INFO', 'WARN', 'DEBUG'))}] {words} id={rng.getrandbits(40):x}"
        )
    text = "\n".join(lines) + "\n"
    path.write_text(text, encoding="utf-8", newline="\n")
    assert len(text) >= 120_000
    return text


def envelope_ref(text: str) -> str | None:
    """The ref an envelope names, found as a model reading it would; None for other texts."""
    match = _REF.search(text)
    return match.group(1) if match else None


def page_rows(page: str) -> list[tuple[int, str]]:
    """The numbered rows of a read-back page: (line number, line text)."""
    rows = []
    for line in page.split("\n"):
        match = _ROW.match(line)
        if match:
            rows.append((int(match.group(1)), match.group(2)))
    return rows


def expected_rows(
    text: str, offset: int = PAGE_OFFSET, limit: int = PAGE_LIMIT
) -> list[tuple[int, str]]:
    """The rows a read of ``limit`` lines from ``offset`` must show: the file's own lines."""
    lines = text.split("\n")
    return [(offset + k + 1, lines[offset + k]) for k in range(limit)]
