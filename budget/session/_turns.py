"""The user's turns: where each prompt of the history scanned falls among the rounds.

A prompt is a message from the user that answers no call (``Scanned.prompt``); it opens a turn
when something other than the user's own side came before it (an answer, a system message):
the user's messages that follow a result or another of theirs with no answer between (an
interruption's marker and the prompt after it, a screenshot sent after a tool's text) are the
same turn. A result from before the user's second-to-last turn was read and acted on in a turn
the user has moved on from twice: the staleness pass may trim it inside the protected rounds
(``BudgetConfig.protect_turns``; the OpenAI Agents SDK's ``ToolOutputTrimmer`` keeps the last
two user turns).
"""

from __future__ import annotations

from budget._view import Scanned

__all__ = ["Turns"]


class Turns:
    """The (message index, round) of each turn the user opened in the history scanned."""

    def __init__(self) -> None:
        self._at: list[tuple[int, int]] = []
        self._user_side = False
        """The last message scanned was the user's (a prompt, or results)."""

    def see(self, index: int, scanned: Scanned, round_after: int) -> None:
        """Message ``index``, scanned, after the round ``round_after`` (-1 before any)."""
        if scanned.prompt and not self._user_side:
            self._at.append((index, round_after))
        self._user_side = scanned.prompt or bool(scanned.results)

    def truncate(self, k: int, last: Scanned | None) -> None:
        """Forget the messages from ``k`` on; ``last`` is the scan of message ``k - 1``."""
        while self._at and self._at[-1][0] >= k:
            self._at.pop()
        self._user_side = last is not None and (last.prompt or bool(last.results))

    def settled(self, turns: int | None) -> int:
        """The newest round whose results came before the ``turns``-th last turn: the turns
        before it were answered (-1 when there are fewer turns, or ``turns`` is None)."""
        if turns is None or len(self._at) < turns:
            return -1
        return self._at[-turns][1]
