"""The table style the benchmark reports share: bold left title, simple head rule, no edge."""

from __future__ import annotations

from rich import box
from rich.table import Table

__all__ = ["report_table"]


def report_table(title: str, caption: str | None = None) -> Table:
    """An empty table in the reports' style, with ``caption`` (if any) left-aligned below it."""
    return Table(
        title=title,
        caption=caption,
        caption_justify="left",
        title_justify="left",
        title_style="bold",
        header_style="bold",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 1),
        collapse_padding=True,
    )
