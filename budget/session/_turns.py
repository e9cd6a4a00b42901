"""The user's turns: where each prompt of the history scanned falls among the rounds.

A prompt is a message from the user that answers no call (``Scanned.prompt``). A result from
before the user's second-to-last prompt was read and acted on in a turn the user has moved on
from twice: the staleness pass may trim it inside the protected rounds
(``BudgetConfig.protect_turns``; the OpenAI Agents SDK's ``ToolOutputTrimmer`` keeps the last
two user turns).
"""

from __future__ import annotations

__all__ = ["Turns"]


class Turns:
    """The (message index, round) of each prompt of the history scanned, in order."""

    def __init__(self) -> None:
        self._at: list[tuple[int, int]] = []

    def note(self, index: int, round_after: int) -> None:
        """Message ``index`` is a prompt, after the round ``round_after`` (-1 before any)."""
        self._at.append((index, round_after))

    def truncate(self, k: int) -> None:
        """Forget the prompts from message ``k`` on."""
        while self._at and self._at[-1][0] >= k:
            self._at.pop()

    def settled(self, turns: int | None) -> int:
        """The newest round whose results came before the ``turns``-th last prompt: the turns
        before it were answered (-1 when there are fewer prompts, or ``turns`` is None)."""
        if turns is None or len(self._at) < turns:
            return -1
        return self._at[-turns][1]
