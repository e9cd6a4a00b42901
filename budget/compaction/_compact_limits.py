"""What one compaction may take and give under one window: the thresholds and sizes of
:class:`Limits`, where the summarized part starts, and how long its summary may be."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from budget._config import BudgetConfig
from budget._errors import InputError
from budget._view import Format
from budget.compaction._compaction import Tail, paired_start

__all__ = ["Limits", "check_summary_size", "limits", "summarized_part", "summary_start"]


@dataclass(frozen=True, slots=True)
class Limits:
    """The compaction settings as they apply under one window and one unseen header.

    The token settings are Claude Code's, made for a 200k window. Under a window where the
    reserve and margin take more than half of it, they shrink in proportion to half of it (a
    32k window otherwise has a negative threshold: every request would compact). The tail, the
    attachments and the minimum reclaim are bounded by what the messages may hold under the
    threshold once the header (system prompt, tool definitions: what the request carries that
    toolbudget never sees) is counted: the tail by a quarter of it, the attachments by an eighth,
    so that a compacted copy leaves room for the summary and the rounds until the next one
    (a tail of half of it was measured to compact every third round on the public traces at a
    32k window).
    """

    threshold: int
    """Auto compaction when the view's tokens plus the header exceed this."""
    reserve: int
    """Most tokens a summary may have: what the window keeps for the summary call's output."""
    room: int
    """Most tokens one summary request may hold (window - reserve - margin)."""
    tail_tokens: int
    tail_max_tokens: int
    min_reclaim_tokens: int
    constraint_chars: int
    file_chars: int


def limits(config: BudgetConfig, window: int, header: int, *, manual: bool) -> Limits:
    """The :class:`Limits` of ``config`` under ``window`` with ``header`` unseen tokens."""
    reserve, margin = config.compact_reserve_tokens, config.compact_margin_tokens
    manual_margin = config.compact_manual_margin_tokens
    half = window // 2
    if reserve + margin > half:
        scale = half / (reserve + margin)
        reserve, margin = int(reserve * scale), int(margin * scale)
        manual_margin = int(manual_margin * scale)
    threshold = window - reserve - margin
    room = window - reserve - (manual_margin if manual else margin)
    messages = max(threshold - header, 0)
    tail_max = max(1, min(config.compact_tail_max_tokens, messages // 4))
    # Attachments get an eighth of the messages' tokens, at ~4 characters a token: a quarter
    # of it for the constraints, the rest shared by the file snapshots.
    chars = messages // 2
    constraint_chars = min(config.compact_constraint_chars, chars // 4)
    files = max(config.compact_files, 1)
    return Limits(
        threshold=threshold,
        reserve=reserve,
        room=room,
        tail_tokens=min(config.compact_tail_tokens, tail_max),
        tail_max_tokens=tail_max,
        # A summary must pay for its call even when the header leaves the messages nothing:
        # never less than a sixteenth of the window.
        min_reclaim_tokens=min(config.compact_min_reclaim_tokens, max(window // 16, messages // 4)),
        constraint_chars=constraint_chars,
        file_chars=min(config.compact_file_chars, (chars - constraint_chars) // files),
    )


def check_summary_size(summary: str, tokens: Callable[[Any], int], reserve: int) -> None:
    """Refuse a summary longer than the output the window keeps for it: a summarizer echoing
    its input, or running away, would leave every later request due for compaction again."""
    size = tokens({"role": "user", "content": summary})
    if size > reserve:
        raise InputError(
            f"the summary has {size:,} tokens, more than the {reserve:,} the window keeps for "
            "it (compact_reserve_tokens, scaled to the window)"
        )


def summary_start(
    view: list[Any], tail: Tail, tokens: Callable[[Any], int], room: int, pinned: int = 0
) -> int:
    """The first message summarized: the newest messages before the tail that fit in ``room``
    beside the ``pinned`` first ones after the head (summarized whatever else fits)."""
    first_summarized = tail.start
    held = sum(tokens(m) for m in view[tail.head : tail.head + pinned])
    while first_summarized > tail.head and held + tokens(view[first_summarized - 1]) <= room:
        first_summarized -= 1
        held += tokens(view[first_summarized])
    return first_summarized


def summarized_part(
    sent: list[Any], fmt: Format, tail: Tail, tokens: Callable[[Any], int], room: int, pinned: int
) -> tuple[int, list[Any]]:
    """The first message summarized and the part a summarizer reads: the newest messages of
    ``sent`` before the tail that fit in ``room`` and open on no orphan result
    (:func:`paired_start`), after the ``pinned`` first ones past the head. Over a compacted view
    that is the last summary: it stands for everything before it, so a new summary that did not
    read it would lose that, however little else of the prefix fits beside it."""
    first = paired_start(sent, fmt, summary_start(sent, tail, tokens, room, pinned), tail.start)
    after = max(first, tail.head + pinned)
    return first, [*sent[tail.head : tail.head + pinned], *sent[after : tail.start]]
