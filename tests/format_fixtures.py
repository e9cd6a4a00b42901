"""Format cases as data: a history in, the request copies and decisions out, one JSON file each.

As markdown-it-py keeps its rendering cases as data files fed to one parametrized test
(``tests/test_port/fixtures/*.md`` read by ``markdown_it.utils.read_fixture_file``), each file
under ``tests/fixtures/formats/<format>/`` holds one case::

    {
      "title": "what the case shows",
      "from": "the test it was converted from",
      "config": {"window": 1000},              # overrides of tests.strategies.SMALL
      "history": [...],                        # the caller's messages, in <format>
      "requests": [                            # prepared in order in one session
        {"upto": 7, "now": 0.0,                # history[:upto] (null: all of it) at this clock
         "copy": [...],                        # the exact request copy
         "decisions": [...],                   # report.decisions, as dumped
         "report": {...}}                      # the report's counts, sizes and staleness
      ]
    }

Three shorthands keep the files readable: ``{"$lines": [n, tag]}`` is ``tests.strategies.big(n,
tag)``; ``{"$repeat": [text, n]}`` is ``text * n``; and in a copy ``{"$same": i}`` means the
request copy holds the caller's own object ``history[i]`` (checked with ``is``).

``python -m tests.format_fixtures`` rewrites every file's expected outputs from the current code,
for a deliberate change of the copies; review the diff before committing it.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from budget import Budget, Prepared
from tests.strategies import SMALL, big

ROOT = Path(__file__).resolve().parent / "fixtures" / "formats"
REPORT_KEYS = (
    "format",
    "results",
    "kept",
    "spilled",
    "trimmed",
    "unspillable",
    "chars_before",
    "chars_after",
    "prefix_stable",
    "staleness_ran",
    "staleness_reason",
)
"""The report fields a case pins (token estimates and timings are pinned elsewhere)."""


@dataclass(frozen=True, slots=True)
class Case:
    """One fixture file, read."""

    path: Path
    format: str
    data: dict[str, Any]

    @property
    def id(self) -> str:
        """``<format>/<file stem>``, the test id."""
        return f"{self.format}/{self.path.stem}"


def load_cases() -> list[Case]:
    """Every case under ``tests/fixtures/formats``, in path order."""
    return [
        Case(path, path.parent.name, json.loads(path.read_text()))
        for path in sorted(ROOT.glob("*/*.json"))
    ]


def expand(value: Any) -> Any:
    """``value`` with the ``$lines`` and ``$repeat`` shorthands replaced by their text."""
    if isinstance(value, dict):
        if set(value) == {"$lines"}:
            n, tag = value["$lines"]
            return big(n, tag)
        if set(value) == {"$repeat"}:
            text, n = value["$repeat"]
            return text * n
        return {k: expand(v) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v) for v in value]
    return value


def run(case: Case, workdir: Path) -> list[tuple[list[Any], Prepared]]:
    """Prepare each request of ``case`` in one session: (the history sent, what came back)."""
    history = expand(case.data["history"])
    config = SMALL.model_copy(update=case.data.get("config", {}))
    out = []
    with Budget.open(workdir / "session", config, format=case.format) as session:
        for request in case.data["requests"]:
            upto = request["upto"]
            sent = history if upto is None else history[:upto]
            out.append((sent, session.prepare(sent, now=request["now"])))
    return out


def observed(sent: list[Any], prepared: Prepared) -> dict[str, Any]:
    """What a case pins of one request: copy (shared objects as ``$same``), decisions, report."""
    copy = [
        {"$same": i} if i < len(sent) and message is sent[i] else message
        for i, message in enumerate(prepared.messages)
    ]
    report = prepared.report.model_dump(mode="json")
    return {
        "copy": copy,
        # The cost model's figures are pinned by tests/budget/test_policy.py, worked by hand.
        "decisions": [
            d.model_dump(mode="json", exclude={"cost"}) for d in prepared.report.decisions
        ],
        "report": {key: report[key] for key in REPORT_KEYS},
    }


def regenerate() -> None:
    """Rewrite every case's expected outputs from what the current code produces."""
    for case in load_cases():
        with tempfile.TemporaryDirectory() as tmp:
            results = run(case, Path(tmp))
        for request, (sent, prepared) in zip(case.data["requests"], results, strict=True):
            request.update(observed(sent, prepared))
        case.path.write_text(json.dumps(case.data, indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {case.path.relative_to(ROOT)}")


if __name__ == "__main__":
    regenerate()
