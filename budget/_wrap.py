"""The tool wrapper: spill a tool's output when it is produced, so the history itself stays small.

A host that keeps its whole history in memory (or on disk) can wrap its tools: an output over the
tool's cap is stored in the session right away and the tool returns its envelope instead, the very
text the cap pass would have shown (same ref, same bytes). The envelope then sits in the history
as a small result; when ``prepare`` later meets it, it recognises it by its ref (a body of this
session whose envelope is exactly that text) and freezes it as ``kept`` with reason ``wrapped``: never spilled again, never wrapped in
a second envelope. Staleness may still trim it later; its stub names the same ref.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from typing import Any, ParamSpec, Protocol, TypeVar, cast

from budget._errors import InputError
from budget._ledger import Decision
from budget._view import ToolResult

__all__ = ["Spiller", "wrap_tool", "wrapped_decisions"]

P = ParamSpec("P")
T = TypeVar("T")


class Spiller(Protocol):
    """What the wrapper needs from a session: ``Budget.spill_output``."""

    def __call__(self, text: str, *, tool: str = "") -> str:
        """``text``, or its envelope when it is over ``tool``'s cap (stored first)."""
        ...


def wrap_tool(fn: Callable[P, T], *, spill: Spiller, name: str | None = None) -> Callable[P, T]:
    """``fn`` (sync or async) with its string outputs passed through ``spill``.

    ``name`` is the tool's name as the model calls it (its per-tool policy and the envelope's
    wording use it); by default the function's ``__name__``. Outputs that are not strings and
    exceptions pass through untouched.
    """
    if not callable(fn):
        raise InputError(f"wrap_tool takes the tool's function, not {fn!r:.80}")
    if name is not None and not isinstance(name, str):
        raise InputError(f"name must be the tool's name (a string), not {name!r:.80}")
    if not callable(spill):  # else a TypeError at the tool's first run, far from the cause
        raise InputError(f"spill must be a session's spill_output, not {spill!r:.80}")
    tool = name if name is not None else getattr(fn, "__name__", "")

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            out = await fn(*args, **kwargs)
            return spill(out, tool=tool) if isinstance(out, str) else out

        return cast(Callable[P, T], async_wrapper)

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        out = fn(*args, **kwargs)
        return cast(T, spill(out, tool=tool)) if isinstance(out, str) else out

    return wrapper


def wrapped_decisions(
    fresh: Iterable[ToolResult], envelope_of: Callable[[str], str | None]
) -> dict[str, Decision]:
    """Decisions for fresh results that are envelopes already (made by the wrapper, or a request
    copy fed back as history): kept as they are, with the ref they name. ``envelope_of`` gives
    the ref of a text that is exactly an envelope of this session, else None."""
    out: dict[str, Decision] = {}
    for r in fresh:
        ref = envelope_of(r.text)
        if ref is not None:
            out[r.call_id] = Decision(
                r.call_id, "kept", "wrapped", len(r.text), ref=ref, tool=r.tool
            )
    return out
