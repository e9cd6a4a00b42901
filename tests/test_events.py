"""toolbudget's events reach the application through stdlib logging and structlog, as it set them up."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from budget import Budget

_AREAS = ("toolbudget", *(f"toolbudget.{a}" for a in ("session", "spill", "log", "gc", "readback")))


def _history(text: str) -> list[dict[str, Any]]:
    """One cat call answered by ``text`` (Anthropic format)."""
    return [
        {"role": "user", "content": "Check the log."},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "cat", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": text}],
        },
    ]


def _stale_then_decided(path: Path) -> None:
    """Emit a debug decision per request and a ``decision_stale`` warning (a result edited)."""
    with Budget.open(path) as session:
        session.prepare(_history("line\n" * 20_000))
        session.prepare(_history("other\n" * 20_000))


class _Records(logging.Handler):
    """A real handler keeping the records it is given."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def events(self) -> list[str]:
        return [getattr(r, "event", "") for r in self.records]


@pytest.fixture
def unconfigured(structlog_defaults: None) -> Iterator[None]:
    """structlog at its defaults; the levels set on the ``toolbudget`` loggers unset afterwards."""
    try:
        yield
    finally:
        for name in _AREAS:
            logging.getLogger(name).setLevel(logging.NOTSET)


@pytest.fixture
def records(unconfigured: None) -> Iterator[_Records]:
    """A handler on the stdlib ``toolbudget`` logger, removed afterwards."""
    handler = _Records()
    root = logging.getLogger("toolbudget")
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)


def test_stdlib_level_on_toolbudget_silences_and_enables_events(
    records: _Records, tmp_path: Path
) -> None:
    """A level set on the stdlib ``toolbudget`` logger decides which events reach its handlers."""
    logging.getLogger("toolbudget").setLevel(logging.ERROR)
    _stale_then_decided(tmp_path / "quiet")
    assert records.records == []

    logging.getLogger("toolbudget").setLevel(logging.WARNING)
    _stale_then_decided(tmp_path / "warnings")
    assert records.events() == ["toolbudget.session.decision_stale"]
    stale = records.records[0]
    assert (stale.name, stale.levelno) == ("toolbudget.session", logging.WARNING)
    assert (stale.call_id, stale.logged_chars, stale.chars) == ("toolu_1", 100_000, 120_000)  # type: ignore[attr-defined]
    assert stale.getMessage().startswith("event=toolbudget.session.decision_stale call_id=toolu_1")


def test_stdlib_level_on_a_child_logger_enables_only_its_area(
    records: _Records, tmp_path: Path
) -> None:
    """DEBUG on ``toolbudget.session`` lets its decisions through, not ``toolbudget.spill``'s debug."""
    logging.getLogger("toolbudget").setLevel(logging.WARNING)
    logging.getLogger("toolbudget.session").setLevel(logging.DEBUG)
    _stale_then_decided(tmp_path / "s")
    events = records.events()
    assert events.count("toolbudget.session.decision") == 2
    assert "toolbudget.session.decision_stale" in events
    assert not [e for e in events if e.startswith("toolbudget.spill.")]  # opened/closed: debug
    decision = next(r for r in records.records if r.event == "toolbudget.session.decision")  # type: ignore[attr-defined]
    assert (decision.kind, decision.reason, decision.chars_before) == ("spilled", "cap", 100_000)  # type: ignore[attr-defined]


def test_processor_formatter_with_extra_adder_renders_the_fields(
    records: _Records, tmp_path: Path
) -> None:
    """An app rendering stdlib records with structlog's ProcessorFormatter gets structured events."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.JSONRenderer(sort_keys=True),
            ],
            foreign_pre_chain=[structlog.stdlib.add_log_level, structlog.stdlib.ExtraAdder()],
        )
    )
    logging.getLogger("toolbudget").addHandler(handler)
    try:
        _stale_then_decided(tmp_path / "s")
    finally:
        logging.getLogger("toolbudget").removeHandler(handler)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert lines == [
        {
            "event": "toolbudget.session.decision_stale",
            "level": "warning",
            "call_id": "toolu_1",
            "logged_chars": 100_000,
            "chars": 120_000,
            "sent_copy": False,
        }
    ]


def test_app_configuring_structlog_receives_events_and_stdlib_level_filters_them(
    records: _Records, tmp_path: Path
) -> None:
    """A structlog-configured app gets every event (debug too); a stdlib level still filters them."""
    seen: list[MutableMapping[str, Any]] = []

    def keep(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> Any:
        seen.append(event)
        raise structlog.DropEvent

    structlog.configure(processors=[structlog.processors.add_log_level, keep])
    _stale_then_decided(tmp_path / "all")
    names = [e["event"] for e in seen]
    assert names.count("toolbudget.session.decision") == 2
    assert "toolbudget.session.decision_stale" in names
    assert "toolbudget.spill.opened" in names
    assert records.records == []  # the app's structlog pipeline handled them, not stdlib

    seen.clear()
    logging.getLogger("toolbudget.spill").setLevel(logging.INFO)
    logging.getLogger("toolbudget.session").setLevel(logging.ERROR)
    _stale_then_decided(tmp_path / "filtered")
    assert [e["event"] for e in seen if not e["event"].startswith("toolbudget.log.")] == []


def test_capture_logs_still_collects_debug_events(unconfigured: None, tmp_path: Path) -> None:
    """``structlog.testing.capture_logs`` sees every event, debug decisions included, by name."""
    with capture_logs() as events:
        _stale_then_decided(tmp_path / "s")
    names = [e["event"] for e in events]
    assert names.count("toolbudget.session.decision") == 2
    assert {"toolbudget.spill.opened", "toolbudget.session.decision_stale"} <= set(names)


def test_unconfigured_process_prints_only_warnings_to_stderr(tmp_path: Path) -> None:
    """With no logging set up, Python's last resort prints the warning in logfmt, not the debug."""
    script = textwrap.dedent(
        f"""
        import sys
        sys.path[:0] = [{str(Path(__file__).parents[1])!r}]
        from tests.test_events import _stale_then_decided
        from pathlib import Path
        _stale_then_decided(Path({str(tmp_path / "s")!r}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "event=toolbudget.session.decision_stale call_id=toolu_1 logged_chars=100000 chars=120000"
        " sent_copy=false"
    ]
