"""The orphans pass (first): a pointer whose earlier output is gone from the history is trimmed.

A pointer (``budget.passes.duplicate``) says "the same as the output of call X earlier in this
conversation". A caller that compacts its own history (drops or summarizes its first messages)
may drop call X and keep the pointer: the model would be sent to an output it no longer has.
Such a pointer moves to ``trimmed`` (the one later transition a frozen decision has): a stub
saying how to read its output back. It costs no cache: the history changed before it, so
everything from there is new to the cache anyway.
"""

from __future__ import annotations

from budget._ledger import Decision
from budget.passes._context import PassContext, trim

__all__ = ["orphans"]


def orphans(ctx: PassContext) -> list[Decision]:
    """Trim to a stub each pointer whose earlier output is gone from the history."""
    return [trim(ctx, result, "orphan", decision.ref) for result, decision in ctx.orphans()]
