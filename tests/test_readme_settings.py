"""README's settings table says what ``BudgetConfig()`` holds: every row, parsed from README.md."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from budget import BudgetConfig

README = Path(__file__).resolve().parents[1] / "README.md"

UNDOCUMENTED = {
    "staleness",
    "image_chars",
    "read_tool_name",
    "read_page_chars",
    # Compaction's tuning knobs: README names the switch and the threshold; docs/settings.md
    # and docs/concepts/compaction.md give the tail, reclaim, breaker and attachment sizes.
    "compact_manual_margin_tokens",
    "compact_tail_tokens",
    "compact_tail_messages",
    "compact_tail_max_tokens",
    "compact_min_reclaim_tokens",
    "compact_breaker_failures",
    "compact_files",
    "compact_file_chars",
    "compact_constraint_chars",
    "compact_timeout_s",
}
"""Settings the table leaves out (tuning knobs); a new setting must join the table or this set."""


def settings_table() -> list[tuple[str, str]]:
    """(settings cell, default cell) of each row of the table under README's ``## Settings``."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Settings\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    out = []
    for row in rows:
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        out.append((cells[0], cells[1]))
    return out


def names(cell: str) -> list[str]:
    """Field names of a settings cell: ``a`` / ``b``, where ``_cap`` extends the previous name."""
    out: list[str] = []
    for part in re.findall(r"`([^`]+)`", cell):
        # `expected_requests_factor` / `_cap`: the suffix replaces the last word.
        full = out[-1].rsplit("_", 1)[0] + part if part.startswith("_") and out else part
        out.append(full)
    return out


def value(cell: str) -> Any:
    """The Python value of one documented default (50,000; 0.6; `head_tail`; None; `{}`; 1 GiB)."""
    cell = cell.strip().strip("`")
    literals: dict[str, Any] = {"None": None, "True": True, "False": False, "{}": {}}
    if cell in literals:
        return literals[cell]
    if m := re.fullmatch(r"(\d+) GiB", cell):
        return int(m.group(1)) << 30
    if re.fullmatch(r"\d{1,3}(,\d{3})*", cell):
        return int(cell.replace(",", ""))
    if re.fullmatch(r"\d+\.\d+", cell):
        return float(cell)
    if re.fullmatch(r"[a-z_]+", cell):
        return cell
    raise ValueError(f"cannot read the README default {cell!r}")


def documented() -> dict[str, Any]:
    """Every setting the table names, with the default it documents."""
    out: dict[str, Any] = {}
    for setting_cell, default_cell in settings_table():
        fields, defaults = names(setting_cell), default_cell.split(" / ")
        assert len(fields) == len(defaults), f"row {setting_cell!r} has {default_cell!r}"
        for field, default in zip(fields, defaults, strict=True):
            out[field] = value(default)
    return out


def test_the_table_is_parsed_whole() -> None:
    """Every row of the table names at least one real setting, including the `_cap` suffix."""
    rows = settings_table()
    assert len(rows) >= 10
    for setting_cell, _ in rows:
        assert names(setting_cell), setting_cell
        assert set(names(setting_cell)) <= set(BudgetConfig.model_fields), setting_cell
    table = documented()
    assert table["expected_requests_cap"] == 50
    assert table["quota_bytes"] == 1 << 30
    assert table["preview_shape"] == "head_tail"


@pytest.mark.parametrize("field", sorted(documented()))
def test_each_documented_default_is_the_shipped_default(field: str) -> None:
    """The README row's default for ``field`` equals BudgetConfig()'s value, type included."""
    shipped = getattr(BudgetConfig(), field)
    expected = documented()[field]
    assert shipped == expected
    # 300 documents 300.0 for a float setting; a documented 0.5 must not be an int setting.
    assert isinstance(shipped, type(expected)) or (type(expected), type(shipped)) == (int, float)


def test_every_setting_is_documented_or_listed_as_undocumented() -> None:
    """The table and UNDOCUMENTED together name exactly BudgetConfig's fields."""
    table = set(documented())
    assert not table & UNDOCUMENTED
    assert table | UNDOCUMENTED == set(BudgetConfig.model_fields)
