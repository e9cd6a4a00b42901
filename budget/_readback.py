"""Read-back: the exact lines of a spilled output, and the tool that lets a model page through them.

``grep`` runs on RE2 (``google-re2``): time linear in the text, whatever the pattern, and no
dependence on the private parser of Python's ``re``.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Final

import orjson
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    ValidationError,
    WithJsonSchema,
)
from pydantic.json_schema import SkipJsonSchema

from budget._config import BudgetConfig
from budget._errors import BudgetError, InputError, RefError
from budget._grep import _grep, _matcher
from budget._log import get_logger
from budget.previews._jsonpath import select as json_select
from spill import LocalStore, Store, validate_ref
from spill._readonly import ReadOnlyStore

__all__ = ["ReadArgs", "ReadBack", "ReadToolResult", "read_tool_definition", "split_lines"]

_MAX_GREP: Final = 500
_MAX_SHOWN_ARGS: Final = 5
_SCHEMA_REF: Final = r"^[0-9a-f]{32}$"


def split_lines(text: str) -> list[str]:
    """The lines of ``text``, each keeping its newline, so that joining them gives ``text`` back."""
    if not text:
        return []
    lines = text.split("\n")
    last = lines.pop()
    # In place, so a huge output is held once as lines, not twice.
    for i, line in enumerate(lines):
        lines[i] = line + "\n"
    if last:
        lines.append(last)
    return lines


def _drop_titles(schema: dict[str, Any]) -> None:
    """Keep the tool schema to what a model reads: no generated titles, no ``null`` defaults, not
    the class's docstring."""
    schema.pop("title", None)
    schema.pop("description", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
        if "default" in prop and prop["default"] is None:
            del prop["default"]


def _grep_text(value: object) -> str:
    """A grep pattern: checked here rather than by pydantic's ``str``, which refuses the lone
    surrogates a tool's output may hold (and so a pattern searching for them)."""
    if not isinstance(value, str):
        raise ValueError(f"must be a string, not {type(value).__name__}")
    if not value:
        raise ValueError("must be a non-empty string")
    if len(value) > _MAX_GREP:
        raise ValueError(f"must be at most {_MAX_GREP} characters, not {len(value)}")
    return str.__str__(value)


def _bounded(value: int) -> int:
    # Past 2**1024 (the largest double) only a big-int JSON parser (jiter) hands us a number, and
    # past 4,300 digits Python will not format it: a 5,000-digit offset raised ValueError here.
    if value.bit_length() > 1024:
        raise ValueError("must be below 2**1024")
    return value


def _whole(value: object) -> object:
    """A whole number sent as a string (models send ``"3"`` for 3) as that number; anything
    else as it is, for the strict check to refuse with its own message."""
    if isinstance(value, str):
        digits = value.strip()
        if digits.isascii() and digits.isdigit() and len(digits) <= _MAX_DIGITS:
            return int(digits)
    return value


_MAX_DIGITS: Final = 18
"""Longest numeric string taken as a number (any offset or limit past 10**18 lines is nonsense,
and a bounded length keeps a model's megabyte of digits from costing a big-int parse)."""
_Whole = BeforeValidator(_whole)


_MAX_CONTEXT: Final = 1_000
"""Most lines of context around a grep match (more is a page of its own: use offset)."""
_MAX_PATH: Final = 500
_Path = Annotated[str, Field(min_length=1, max_length=_MAX_PATH)]

_Grep = Annotated[
    str,
    PlainValidator(_grep_text),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": _MAX_GREP}),
]


class ReadArgs(BaseModel):
    """The read-back tool's arguments; :meth:`model_json_schema` is the tool's input schema, so
    the schema the model sees and the checks its calls get cannot drift apart."""

    model_config = ConfigDict(
        extra="forbid", strict=True, frozen=True, json_schema_extra=_drop_titles
    )

    ref: str = Field(pattern=_SCHEMA_REF, description="The 32-character ref from the notice.")
    offset: Annotated[int, _Whole, AfterValidator(_bounded)] = Field(
        0, ge=0, description="Lines to skip (0 starts at the first line)."
    )
    limit: Annotated[int, Field(ge=1), _Whole, AfterValidator(_bounded)] | SkipJsonSchema[None] = (
        Field(None, description="Most lines to return.")
    )
    grep: _Grep | SkipJsonSchema[None] = Field(
        None, description="Only lines matching this regular expression (RE2 syntax)."
    )
    context: Annotated[int, Field(ge=0, le=_MAX_CONTEXT), _Whole] = Field(
        0, description="With grep: also this many lines before and after each match."
    )
    path: _Path | SkipJsonSchema[None] = Field(
        None,
        description='A JSON output: only the value at this path, e.g. "$.items[3].name".',
    )


def _input_schema() -> dict[str, Any]:
    """A fresh copy of the arguments' schema (built once: it never changes; a copy, since
    callers may edit the tool definition they get)."""
    return copy.deepcopy(_schema())


@functools.cache
def _schema() -> dict[str, Any]:
    return ReadArgs.model_json_schema()


@dataclass(frozen=True, slots=True)
class ReadToolResult:
    """What the read-back tool returns: the text for the model, and whether it is an error (set
    the provider's ``is_error`` flag from it rather than matching the ``Error:`` prefix)."""

    text: str
    is_error: bool

    def __str__(self) -> str:
        return self.text


def _arg_errors(tool_input: Mapping[str, Any], exc: ValidationError) -> InputError | RefError:
    """One error naming what is wrong with each argument, shortened (names come from a model)."""
    problems: list[str] = []
    unknown: list[str] = []
    for err in exc.errors(include_url=False, include_input=False):
        if err["type"] == "none_required":  # the other half of ``int | None``: noise
            continue
        name = str(err["loc"][0]) if err["loc"] else ""
        if err["type"] == "extra_forbidden":
            unknown.append(ascii(name)[:40])
        elif name == "ref" and "ref" in tool_input:
            try:
                validate_ref(tool_input["ref"])
            except RefError as ref_error:  # its message says what is wrong without echoing it
                return ref_error
        elif name == "ref":
            problems.append("ref is required (the 32-character ref from the notice)")
        else:
            problems.append(f"{name}: {err['msg'].removeprefix('Value error, ')}")
    if unknown:
        names = sorted(unknown)[:_MAX_SHOWN_ARGS]
        more = f" and {len(unknown) - len(names)} more" if len(unknown) > len(names) else ""
        problems.insert(
            0,
            f"unknown argument(s): {', '.join(names)}{more}; "
            "the arguments are ref, offset, limit, grep, context and path",
        )
    return InputError("; ".join(dict.fromkeys(problems)))


def _args(**kwargs: Any) -> ReadArgs:
    try:
        return ReadArgs.model_validate(kwargs)
    except ValidationError as exc:
        raise _arg_errors(kwargs, exc) from None


def _json_text(value: Any) -> str:
    """A JSON value as indented text (the standard library's: it keeps lone surrogates and big
    integers that orjson refuses)."""
    import json  # noqa: PLC0415 - only path read-backs need it

    return json.dumps(value, indent=1, ensure_ascii=False)


def _around(
    matches: Sequence[tuple[int, str]], lines: Sequence[str], context: int
) -> list[tuple[int, str]]:
    """The matched lines with ``context`` lines before and after each, in order, once each."""
    keep: list[int] = []
    last = 0  # 1-based number of the last line kept
    for n, _ in matches:
        for k in range(max(n - context, last + 1), min(n + context, len(lines)) + 1):
            keep.append(k)
        last = max(last, min(n + context, len(lines)))
    return [(k, lines[k - 1]) for k in keep]


def read_tool_definition(config: BudgetConfig) -> dict[str, Any]:
    """The read-back tool in the Anthropic format (``input_schema``): it depends on the config
    only, so an integration can register it before any session is open."""
    return {
        "name": config.read_tool_name,
        "description": (
            "Read a tool output that was too large to show in full. Pass the ref given in "
            "the [toolbudget] notice; page with offset (lines to skip) and limit, or pass "
            "grep (a regular expression) to see only the matching lines, with line numbers "
            "(and context: lines around each match); for JSON, path selects one value "
            '(e.g. "$.items[3].name").'
        ),
        "input_schema": _input_schema(),
    }


class ReadBack:
    """Reads spilled outputs back by lines; keeps the last one read, for paging."""

    def __init__(self, store: Store, config: BudgetConfig) -> None:
        self._store = store
        self._config = config
        self._cached: tuple[str, list[str]] | None = None

    def _lines(self, ref: str) -> list[str]:
        if self._cached is not None and self._cached[0] == ref:
            return self._cached[1]
        try:
            text = self._store.get(ref)
        except RefError:
            # The store's message names the session's path: not for the model's eyes.
            raise RefError(f"no output is stored under ref {ref} in this session") from None
        lines = split_lines(text)
        self._cached = (ref, lines)
        return lines

    def _value_lines(self, ref: str, path: str) -> list[str]:
        """The lines of the JSON value at ``path`` in output ``ref``, indented one space a level."""
        value = json_select("".join(self._lines(ref)), path)
        return split_lines(_json_text(value))

    def lines(
        self,
        ref: str,
        *,
        offset: int = 0,
        limit: int | None = None,
        grep: str | None = None,
        context: int = 0,
        path: str | None = None,
    ) -> tuple[list[tuple[int, str]], int]:
        """(1-based line number, line) pairs chosen, and the number of candidate lines.

        ``path`` selects a JSON value first (its lines are numbered from 1); ``context`` adds
        that many lines before and after each ``grep`` match."""
        args = _args(
            ref=validate_ref(ref), offset=offset, limit=limit, grep=grep, context=context, path=path
        )
        return self._select(args)

    def _select(self, args: ReadArgs) -> tuple[list[tuple[int, str]], int]:
        lines = (
            self._lines(args.ref) if args.path is None else self._value_lines(args.ref, args.path)
        )
        offset, limit = args.offset, args.limit
        if args.grep is None:
            end = len(lines) if limit is None else offset + limit
            return list(enumerate(lines[offset:end], offset + 1)), len(lines)
        numbered = _grep(_matcher(args.grep), args.grep, lines)
        if args.context:
            numbered = _around(numbered, lines, args.context)
        end = len(numbered) if limit is None else offset + limit
        return numbered[offset:end], len(numbered)

    def read(
        self,
        ref: str,
        *,
        offset: int = 0,
        limit: int | None = None,
        grep: str | None = None,
        context: int = 0,
        path: str | None = None,
    ) -> str:
        """The exact text of the chosen lines (the whole output, byte-exact, when no argument)."""
        if offset == 0 and limit is None and grep is None and path is None:
            return self._store.get(validate_ref(ref))
        chosen, _ = self.lines(
            ref, offset=offset, limit=limit, grep=grep, context=context, path=path
        )
        return "".join(line for _, line in chosen)

    def tool_definition(self) -> dict[str, Any]:
        """The read-back tool in the Anthropic format (``input_schema``)."""
        return read_tool_definition(self._config)

    def handle(self, tool_input: Mapping[str, Any] | str) -> str:
        """One page of numbered lines, with a hint to read on; an error text the model can act on."""
        return self.result(tool_input).text

    def result(self, tool_input: Mapping[str, Any] | str) -> ReadToolResult:
        """:meth:`handle` with whether its text is an error, for the provider's ``is_error``."""
        try:
            return ReadToolResult(self._page(tool_input), is_error=False)
        except (InputError, RefError) as exc:
            return ReadToolResult(f"Error: {exc}", is_error=True)
        except BudgetError as exc:
            get_logger("toolbudget").error("toolbudget.readback.failed", error=str(exc))
            return ReadToolResult(f"Error: {self._for_model(str(exc))}", is_error=True)

    def _for_model(self, message: str) -> str:
        """``message`` without the session's absolute path: a model is told what failed and
        why (the errno), not where this machine keeps its files."""
        store = self._store
        path = store.path if isinstance(store, LocalStore | ReadOnlyStore) else None
        if not path:
            return message
        return message.replace(f"session {path}", "the session").replace(path, "the session")

    def _page(self, tool_input: Mapping[str, Any] | str) -> str:
        if isinstance(tool_input, str):  # OpenAI formats pass the arguments as a JSON string
            try:
                # orjson reads an exact str only; a subclass's would be "not valid JSON".
                tool_input = orjson.loads(str.__str__(tool_input))
            except orjson.JSONDecodeError as exc:
                raise InputError(f"the tool input is not valid JSON: {exc}") from None
        if not isinstance(tool_input, Mapping):
            raise InputError(f"the tool input must be an object, not {type(tool_input).__name__}")
        try:
            args = ReadArgs.model_validate(dict(tool_input))
        except ValidationError as exc:
            raise _arg_errors(tool_input, exc) from None
        chosen, total = self._select(args)
        budget = self._config.read_page_chars
        out: list[str] = []
        used = 0
        shown = 0
        for n, line in chosen:
            body = line.removesuffix("\n")
            row = f"{n:>6}\t{body}"
            if used + len(row) + 1 > budget:
                if shown == 0:
                    # One line longer than a page: show its start rather than nothing.
                    # At least one character of it, however small the page: its number alone
                    # would show nothing, call after call.
                    keep = max(budget - (len(row) - len(body)), 1)
                    out.append(row[: len(row) - len(body) + keep])
                    out[-1] += f" [line {n} continues: {len(body):,} characters]"
                    shown = 1
                break
            out.append(row)
            used += len(row) + 1
            shown += 1
        ref, offset = args.ref, args.offset
        what = "matching lines" if args.grep is not None else "lines"
        if args.grep is not None and args.context:
            what = f"lines around matches (context {args.context})"
        where = "" if args.path is None else f" (the value at {args.path})"
        head = f"[toolbudget] ref {ref}{where}: {what} {offset + 1}-{offset + shown} of {total}"
        if not chosen:
            head = (
                f"[toolbudget] ref {ref}{where}: no {what} at offset {offset} (there are {total})"
            )
        nxt = offset + shown
        tail = f"[more: call again with offset={nxt}]" if nxt < total else "[end]"
        return "\n".join([head, *out, tail])
