"""The user's turns: where each prompt of the history scanned falls among the rounds.

A prompt is a message from the user that answers no call (``Scanned.prompt``); it opens a turn
when the assistant spoke since the user's last message (an answer, or a call: ``Scanned.reply``,
``Scanned.calls``): the user's messages that follow a result or another of theirs with no answer
between (an interruption's marker and the prompt after it, a screenshot sent after a tool's
text) are one turn, and a system or developer message between them changes nothing. A result
from before the user's second-to-last turn was read and acted on in a turn the user has moved on
from twice: the staleness pass may trim it inside the protected rounds
(``BudgetConfig.protect_turns``; the OpenAI Agents SDK's ``ToolOutputTrimmer`` keeps the last
two user turns).
"""

from __future__ import annotations

from budget._view import Scanned

__all__ = ["Turns"]


def _answered(scanned: Scanned) -> bool | None:
    """Whether the assistant spoke last after ``scanned``: False after the user's message (a
    prompt, results), True after the assistant's, None after one of neither (a system note)."""
    if scanned.prompt or scanned.results:
        return False
    if scanned.reply or scanned.calls:
        return True
    return None


class Turns:
    """The (message index, round) of each turn the user opened in the history scanned."""

    def __init__(self) -> None:
        self._at: list[tuple[int, int]] = []
        self._answered: list[bool] = []
        """Per message seen: the assistant spoke since the user's last message (True before the
        user has spoken), kept per message so that a truncation reads it back at once."""

    def see(self, index: int, scanned: Scanned, round_after: int) -> None:
        """Message ``index`` (the next one), scanned, after the round ``round_after`` (-1
        before any)."""
        before = self._answered[-1] if self._answered else True
        if scanned.prompt and before:
            self._at.append((index, round_after))
        answered = _answered(scanned)
        self._answered.append(before if answered is None else answered)

    def truncate(self, k: int) -> None:
        """Forget the messages from ``k`` on."""
        while self._at and self._at[-1][0] >= k:
            self._at.pop()
        del self._answered[k:]

    def settled(self, turns: int | None) -> int:
        """The newest round whose results came before the ``turns``-th last turn: the turns
        before it were answered (-1 when there are fewer turns, or ``turns`` is None)."""
        if turns is None or len(self._at) < turns:
            return -1
        return self._at[-turns][1]
