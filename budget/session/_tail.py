"""Whether the last messages of a history, and their copies, are as the last request left them.

Callers edit the last messages of their history in place (``cache_control`` markers moved, a
result's text replaced), so each request looks at the last ``RESCAN`` messages again. Each of
them (and its copy, where the copy is not the message itself) is kept with its ``marshal`` bytes
as a request ends: the next request finds the same message objects holding the same values, of
the same exact types, in the same order (a value put in place of an equal one of its type aside),
so their scan, tokens and copies would come out as the last request made them, and it reuses
those instead. ``marshal`` writes the values of dicts, lists, strings, numbers, booleans and None
with their types (``True`` is not ``1``, a NaN keeps its bits) in C, and refuses anything else (a
subclass, an SDK model, which may change in place unseen): such a message is looked at again, as
every message was before.
"""

from __future__ import annotations

import marshal
from typing import Any, Final

__all__ = ["Tail"]

_VERSION: Final = 2
"""``marshal``'s format without back-references (from version 3 a shared object is written as a
reference, depending on reference counts: the same values could give other bytes)."""


def _bytes(value: Any) -> bytes | None:
    """``value``'s values in ``marshal``'s bytes; None when it holds anything else."""
    if type(value) is not dict and type(value) is not list:
        return None
    try:
        return marshal.dumps(value, _VERSION)
    except ValueError:  # unmarshallable, or nested too deeply (a cycle)
        return None


class Tail:
    """The last messages of the history a request ended with and their copies, with their bytes:
    its state, for a history of one length."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Forget them (a request failed, the caches were rebuilt)."""
        self._length = -1
        self._kept: list[tuple[int, Any, Any, bytes, bytes | None]] = []

    def keep(self, messages: list[Any], outputs: list[Any], start: int) -> None:
        """Keep ``messages`` from ``start`` on and their ``outputs`` (the copies handed out);
        none when one of them cannot be kept (all are looked at again next time)."""
        self.clear()
        kept = []
        for i in range(start, len(messages)):
            message, out = messages[i], outputs[i]
            given = _bytes(message)
            shown = None if out is message else _bytes(out)
            if given is None or (shown is None and out is not message):
                return
            kept.append((i, message, out, given, shown))
        self._kept, self._length = kept, len(messages)

    def holds(self, messages: list[Any], outputs: list[Any]) -> bool:
        """Whether ``messages`` holds, where they were kept, the same messages with the same
        values, and ``outputs`` (the copies of a history of the length they were kept at) the
        same copies with the same values."""
        if len(outputs) != self._length or not self._kept:
            return False
        for i, message, out, given, shown in self._kept:
            if messages[i] is not message or outputs[i] is not out:
                return False
            if _bytes(message) != given or (shown is not None and _bytes(out) != shown):
                return False
        return True
