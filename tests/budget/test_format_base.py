"""The Format base class: a custom format implements scan and rewrite, the rest is defaulted."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from budget import Budget, BudgetConfig, Format, FormatError, FormatUnknown, get_format
from budget._view import Call, RawResult, Scanned

SMALL = BudgetConfig(result_cap=1_000, preview_chars=200, fsync=False)


class PlainFormat(Format):
    """A minimal custom format: ``{"call": (id, tool)}`` makes a call, ``{"result": (id, text)}``
    holds its result. Only ``scan`` and ``rewrite`` are written."""

    name = "plain"

    def scan(self, index: int, message: Any) -> Scanned:
        if "call" in message:
            call_id, tool = message["call"]
            return Scanned(calls=(Call(call_id, tool),), opens_round=True)
        if "result" in message:
            call_id, text = message["result"]
            return Scanned(results=(RawResult(call_id, 0, text, False, 0),))
        return Scanned()

    def rewrite(self, message: Any, texts: Mapping[int, str]) -> Any:
        return {"result": (message["result"][0], texts[0])}


class DuckFormat:
    """Has a name and a scan method, but is not a Format: no longer taken by sniffing."""

    name = "duck"

    def scan(self, index: int, message: Any) -> Scanned:
        return Scanned()


def test_format_subclass_gets_default_extension_points() -> None:
    """scan_in, outgoing and tool_definition work on a subclass that only wrote scan/rewrite."""
    fmt = PlainFormat()
    messages = [{"call": ("c1", "bash")}, {"result": ("c1", "ok")}]
    assert fmt.scan_in(messages, 1) == fmt.scan(1, messages[1])
    message = {"result": ("c1", "ok")}
    assert fmt.outgoing(message) is message
    schema = {"type": "object", "properties": {}}
    assert fmt.tool_definition("read", "reads", schema) == {
        "name": "read",
        "description": "reads",
        "input_schema": schema,
    }


def test_custom_format_subclass_budgets_a_session(tmp_path: Path) -> None:
    """A session prepares a custom format's history and spills its long result through the
    defaulted extension points, and its read tool has the default (Anthropic) shape."""
    long = "line\n" * 1_000
    messages = [{"call": ("c1", "bash")}, {"result": ("c1", long)}, {"call": ("c2", "bash")}]
    with Budget.open(tmp_path / "s", SMALL, format=PlainFormat()) as session:
        prepared = session.prepare(messages)
        assert prepared.report.format == "plain"
        assert prepared.report.spilled == 1
        shown = prepared.messages[1]["result"][1]
        ref = prepared.report.decisions[0].ref
        assert ref is not None and ref in shown and len(shown) < len(long)
        assert session.read(ref) == long
        assert set(session.read_tool()) == {"name", "description", "input_schema"}


def test_object_that_is_not_a_format_subclass_is_refused() -> None:
    """An object with a name and a scan method but no Format base is a FormatError naming
    budget.Format: formats are subclasses, not sniffed."""
    with pytest.raises(FormatError, match=r"subclass of budget\.Format"):
        get_format(DuckFormat())  # type: ignore[arg-type]


def test_format_without_scan_names_what_is_missing() -> None:
    """A subclass that forgot scan raises NotImplementedError naming its class and the method."""

    class Forgetful(Format):
        name = "forgetful"

    with pytest.raises(NotImplementedError, match=r"Forgetful must implement Format\.scan"):
        Forgetful().scan_in([{}], 0)


def test_a_remembered_format_that_is_not_built_in_is_not_guessed(tmp_path: Path) -> None:
    """A session started with a custom format and reopened without it: read_tool() raises
    FormatUnknown naming that format, and works once the format is passed again."""
    with Budget.open(tmp_path / "s", SMALL) as b:
        b.prepare([{"call": ("c1", "bash")}, {"result": ("c1", "ok")}], format=PlainFormat())
    with Budget.open(tmp_path / "s", SMALL) as b, pytest.raises(FormatUnknown, match="'plain'"):
        b.read_tool()
    with Budget.open(tmp_path / "s", SMALL, format=PlainFormat()) as b:
        assert "input_schema" in b.read_tool()
