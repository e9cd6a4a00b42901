"""Telling the three formats apart from the messages themselves, and fixing one per session.

Each message is checked against what each format allows: its role, its keys (``tool_calls``,
``tool_call_id``), its item ``type`` and the ``type`` of its content parts. The formats every
message fits are the candidates:

* one candidate: that format, for sure (tool calls are always conclusive: ``tool_use`` /
  ``tool_result`` blocks are Anthropic, ``tool_calls`` and ``role: "tool"`` are Chat Completions,
  ``function_call`` / ``function_call_output``... items are Responses);
* several (no tool call, only shapes all of them allow, such as role/content dicts with string
  content or ``text`` parts): Anthropic if it is still a candidate, else Chat Completions. Nothing
  is a tool result then, so no result is budgeted differently either way; the guess is used for
  this request only and the session keeps detecting until the format is certain. Where neither
  the caller nor the model's name tells the cache's style, the request's estimated bill is
  priced in the guess's (``Format.breakpoints``: Anthropic's write surcharge, or none), so a
  session detected and one named at open can bank those first requests a little differently;
* none (one message fits no format, or two messages fit different ones): FormatError naming the
  messages seen. Nothing is ever budgeted silently in the wrong format.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from budget._errors import FormatError, FormatUnknown, InputError
from budget._view import Format
from budget.formats._common import type_name
from budget.formats._shapes import NAMES, describe, explain, shape_fits
from budget.formats.anthropic import ANTHROPIC
from budget.formats.openai_chat import OPENAI_CHAT
from budget.formats.openai_responses import OPENAI_RESPONSES

__all__ = ["FORMATS", "FormatChoice", "detect", "detect_format", "get_format"]

FORMATS: Mapping[str, Format] = {f.name: f for f in (ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES)}
"""The built-in formats by name, in the order a guess prefers them."""


def detect(messages: Sequence[Any]) -> tuple[Format, bool]:
    """The format of ``messages`` and whether it is certain (see the module's rules)."""
    candidates = frozenset(NAMES)
    because = -1  # the message that narrowed the candidates last
    because_reason: tuple[Any, ...] = ()
    for i, message in enumerate(messages):
        fits, reason = shape_fits(message)
        if candidates <= fits:
            continue
        if not fits:
            raise FormatError(
                f"cannot tell the message format: {explain(i, message, reason)}. Messages must "
                "be Anthropic Messages, OpenAI Chat Completions or OpenAI Responses input items "
                "(dicts or SDK models); name the format with format=... to get that format's own "
                "validation errors"
            )
        narrowed = candidates & fits
        if not narrowed:
            earlier = explain(because, messages[because], because_reason)
            raise FormatError(
                f"the messages mix formats: {earlier} ({describe(candidates)}), but "
                f"{explain(i, message, reason)} ({describe(fits)})"
            )
        candidates, because, because_reason = narrowed, i, reason
    if len(candidates) == 1:
        return FORMATS[next(iter(candidates))], True
    guess = next(name for name in FORMATS if name in candidates)
    return FORMATS[guess], False


def detect_format(messages: Sequence[Any]) -> Format:
    """The format ``messages`` are in; FormatError when they fit none, or mix formats.

    Messages without any tool call that every format allows (role/content dicts with string
    content, say) are taken as Anthropic when Anthropic fits, else as Chat Completions.
    InputError when ``messages`` is no sequence of messages at all (None, a dict).
    """
    if not isinstance(messages, Sequence):
        raise InputError(f"messages must be a list of messages, not {type_name(messages)}")
    return detect(messages)[0]


def get_format(name: str | Format) -> Format:
    """The built-in format called ``name`` (anthropic, openai_chat, openai_responses).

    A Format object is returned as it is, so custom adapters can be passed wherever a name is.
    """
    if not isinstance(name, str):
        if isinstance(name, Format):
            return name
        raise FormatError(
            f"a format must be a name or a Format (a subclass of budget.Format), "
            f"not {type_name(name)}"
        )
    fmt = FORMATS.get(name)
    if fmt is None:
        raise FormatError(
            f"unknown format {name!r}: the built-in formats are {', '.join(map(repr, FORMATS))}"
        )
    return fmt


@dataclass(slots=True)
class FormatChoice:
    """A session's format: fixed once named or detected for sure, then held to.

    ``fixed_name`` alone (no ``fixed``) is a format remembered from a resumed session that is not
    built in: the caller must pass that format again.
    """

    fixed: Format | None = None
    fixed_name: str | None = None

    @classmethod
    def start(cls, given: str | Format | None, remembered: object) -> FormatChoice:
        """The choice for a new or resumed session: ``given`` to the constructor, ``remembered``
        in the session's metadata. A given format that differs from the remembered one is refused.
        """
        choice = cls()
        if isinstance(remembered, str) and remembered:
            choice.fixed_name = remembered
            choice.fixed = FORMATS.get(remembered)
        if given is not None:
            choice.hold(get_format(given))
        return choice

    def hold(self, fmt: Format) -> bool:
        """Fix ``fmt``; True when it was not fixed before. FormatError if another one is."""
        self._check(fmt)
        new = self.fixed is None
        self.fixed, self.fixed_name = fmt, fmt.name
        return new

    def known(self) -> Format:
        """The session's format; FormatUnknown while it is neither named nor detected for sure.

        A guess from messages every format allows (no tool call yet) is good enough to budget a
        request (nothing is budgeted differently either way), not to shape what the caller sends
        next: the read-back tool of the first request would be Anthropic-shaped in an OpenAI Chat
        session.
        """
        if self.fixed is not None:
            return self.fixed
        if self.fixed_name is not None:
            why = f"it was started with the {self.fixed_name!r} format, which is not built in"
        else:
            why = "no request has shown it yet (no tool call)"
        raise FormatUnknown(
            f"the session's format is not known: {why}; name it at open "
            "(Budget.open(..., format='openai_chat'), or 'anthropic', 'openai_responses', a "
            "Format), or pass read_tool(format=...)"
        )

    def _check(self, fmt: Format) -> None:
        """FormatError if the session holds another format than ``fmt``."""
        if self.fixed_name is not None and fmt.name != self.fixed_name:
            raise FormatError(
                f"this session's messages are in the {self.fixed_name!r} format; "
                f"they cannot be prepared as {fmt.name!r}"
            )

    def for_request(
        self, messages: Sequence[Any], requested: str | Format | None
    ) -> tuple[Format, bool]:
        """The format to prepare ``messages`` in, and whether to fix it once the request succeeds.

        A named format is to be fixed; so is a detected one that is certain. Nothing is fixed
        here: a request refused as bad input must not settle the session's format (the caller
        calls :meth:`hold` after the request copy is made).
        """
        if requested is not None:
            fmt = get_format(requested)
            self._check(fmt)
            return fmt, self.fixed is not fmt
        if self.fixed is not None:
            return self.fixed, False
        if self.fixed_name is not None:
            raise FormatError(
                f"this session was started with the {self.fixed_name!r} format, which is not "
                "built in: pass that Format again (format=...)"
            )
        fmt, certain = detect(messages)
        return fmt, certain
