"""What the proxy sent for a body: its request copy's bytes, where the next body's encoding
starts from (:mod:`budget.proxy._encode`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Sent"]


@dataclass(frozen=True, slots=True)
class Sent:
    """A body's request copy as encoded: what the next body's encoding starts from."""

    raw: bytes
    """The agent's bytes it was made from: the next body starts from it only if they are the
    body it goes on from (a body sent unchanged or refused made none of its own)."""
    copy: list[Any]
    """The copy's messages."""
    out: bytes
    """The bytes sent."""
    replaced: list[int]
    """The indices of the copy's messages that are not the agent's, ascending."""
    shifts: list[int]
    """After each of them: the copy's bytes' offset minus the agent's (what the swaps added)."""
