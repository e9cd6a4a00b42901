"""The neutral view of a conversation's tool calls and results that passes work on.

A format adapter turns each message of its format into a :class:`Scanned` (the calls it makes and
the results it holds) and later rewrites a message to show new result texts. Passes see only
:class:`ToolResult` values, never messages, so one set of passes serves every format.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = [
    "EMPTY_SCAN",
    "PROMPT_SCAN",
    "REPLY_SCAN",
    "Call",
    "Format",
    "RawResult",
    "Scanned",
    "ToolResult",
    "build_call",
    "build_raw",
    "build_result",
    "build_scanned",
    "builder",
    "scan_at",
]


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call made by an assistant message."""

    call_id: str
    tool: str
    key: str = ""
    """What the call asks for (:func:`budget.formats._common.call_key`: its command, else its
    tool and input), "" where the format does not say: a later call with the same key is a re-run."""
    refs: tuple[str, ...] = ()
    """Spilled bodies' refs its input names (:func:`budget.formats._common.call_facts`): a call
    naming a hidden result's ref reads it back."""


@dataclass(frozen=True, slots=True)
class RawResult:
    """A tool result as found in one message, before it is placed in its group and round."""

    call_id: str
    slot: int
    """Where in its message the result sits (block index; 0 where a message holds one result)."""
    text: str
    """The text parts, joined by newlines: what is measured, spilled and read back."""
    is_error: bool
    other_blocks: int
    """Images and other non-text parts: never rewritten, counted by an estimate."""


@dataclass(frozen=True, slots=True)
class Scanned:
    """What one message holds: the calls it makes, the results it carries."""

    calls: tuple[Call, ...] = ()
    results: tuple[RawResult, ...] = ()
    opens_round: bool = False
    """True for a message that starts a round (an assistant message making tool calls)."""
    prompt: bool = False
    """True for a message from the user that answers no call: a new prompt (a turn of the
    conversation starts). Results from before the user's last turns are no longer protected
    by the rounds (``BudgetConfig.protect_turns``)."""
    reply: bool = False
    """True for a message of the assistant's that makes no call (an answer): the user's next
    prompt opens a new turn. A message making calls is the assistant's too."""


EMPTY_SCAN = Scanned()
PROMPT_SCAN = Scanned(prompt=True)
REPLY_SCAN = Scanned(reply=True)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """One tool result, placed: which call it answers, its group and its round."""

    call_id: str
    tool: str
    msg_index: int
    slot: int
    group: int
    """Index of the message that made the call; results sharing it form one group."""
    round: int
    """0-based ordinal of the round the call was made in."""
    text: str
    is_error: bool
    extra_chars: int
    """Size estimate of the non-text parts, in characters."""
    order: int
    """Position among all results of the conversation (ties are broken by it: earlier first)."""
    call_key: str = ""
    """The :attr:`Call.key` of the call it answers ("" when unknown)."""

    @property
    def size(self) -> int:
        """Characters this result takes as it stands: its text plus its non-text estimate."""
        return len(self.text) + self.extra_chars


class Format:
    """A message format: find the tool calls and results, and rewrite results. One per format.

    A format subclasses this and gives ``name``, :meth:`scan` and :meth:`rewrite`; the other
    methods are optional extension points with their default here, as httpx's ``BaseTransport``
    leaves one method to implement (encode/httpx, ``httpx/_transports/base.py``).
    """

    name: str
    breakpoints: bool = True
    """Whether this format's API caches at explicit breakpoints (Anthropic's ``cache_control``),
    as the cost model assumes when neither the caller nor the model's name tells; False for
    automatic prefix caching (OpenAI's formats have no breakpoint to mark)."""

    def scan(self, index: int, message: Any) -> Scanned:
        """Validate one message and say what it holds; raise InputError naming what is wrong."""
        raise NotImplementedError(f"{type(self).__name__} must implement Format.scan")

    def rewrite(self, message: Any, texts: Mapping[int, str]) -> Any:
        """A new message showing ``texts[slot]`` for each given result; all else kept as is."""
        raise NotImplementedError(f"{type(self).__name__} must implement Format.rewrite")

    def scan_in(self, messages: Sequence[Any], index: int) -> Scanned:
        """What ``messages[index]`` holds, seen among its neighbours: :meth:`scan` by default.

        A format whose round boundaries depend on neighbouring messages (in the Responses API
        each call is its own item, and parallel calls are consecutive items) overrides it.
        """
        return self.scan(index, messages[index])

    def outgoing(self, message: Any) -> Any:
        """``message`` as a request sends it when none of its results is rewritten (and it is
        not a plain dict): itself by default; a format whose histories may hold SDK response
        objects converts them to what the request takes."""
        return message

    def tool_definition(
        self, name: str, description: str, parameters: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A tool definition as this format's API takes it: the Anthropic shape by default
        (name, description, input_schema)."""
        return {"name": name, "description": description, "input_schema": dict(parameters)}


def scan_at(fmt: Format, messages: Sequence[Any], index: int) -> Scanned:
    """What ``messages[index]`` holds, in ``fmt`` (its :meth:`Format.scan_in`)."""
    return fmt.scan_in(messages, index)


_T = TypeVar("_T")


def builder(cls: type[_T]) -> Callable[..., _T]:
    """A constructor of frozen slotted dataclass ``cls`` taking its fields positionally (or by
    name), with its defaults, at the cost of a plain slotted object; TypeError for a class it
    cannot stand in for.

    A frozen dataclass sets each field in ``__init__`` through ``object.__setattr__``, about four
    times the cost of a plain attribute store; the first request after a resume builds several per
    message of a long history (its calls and results, their placed results, the decisions restored
    from the log). This constructor stores the fields on a plain slotted
    twin of the class, then makes the instance the frozen class itself: CPython allows ``__class__``
    assignment between classes of one slot layout (same base, same slots), and a frozen dataclass
    adds nothing to its slots. The result is an instance of the frozen class, equal to and as frozen
    as the one its own constructor makes (tests/budget/test_resume_rebuild.py). A process with an
    audit hook (:func:`sys.addaudithook`) calls it on each such assignment (audited as
    ``object.__setattr__``), which takes most of the gain back: 1.8 µs a ToolResult against 2.3
    through its constructor and 0.5 without a hook, measured on the development VM.
    """
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__} is not a frozen dataclass with slots")
    spec: list[tuple[str, Any, Any]] = []
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.default_factory is not dataclasses.MISSING or not f.init:
            raise TypeError(f"{cls.__name__}.{f.name}: a builder takes plain fields only")
        spec.append((f.name, Any, dataclasses.field(default=f.default)))

    def become(self: Any) -> None:
        self.__class__ = cls

    made: Callable[..., _T] = dataclasses.make_dataclass(
        f"_{cls.__name__}Builder",
        spec,
        namespace={"__post_init__": become},
        slots=True,
        eq=False,
        repr=False,
        match_args=False,
    )
    return made


# A resume builds these for every message and result of a long history (see ``builder``).
build_call = builder(Call)
build_raw = builder(RawResult)
build_scanned = builder(Scanned)
build_result = builder(ToolResult)
