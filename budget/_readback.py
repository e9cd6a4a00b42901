"""Read-back: the exact lines of a spilled output, and the tool that lets a model page through them.

``grep`` runs on RE2 (``google-re2``): time linear in the text, whatever the pattern, and no
dependence on the private parser of Python's ``re``.
"""

from __future__ import annotations

import copy
import functools
import re
import time
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Annotated, Any, Final

import orjson
import re2
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    ValidationError,
    WithJsonSchema,
)
from pydantic.json_schema import SkipJsonSchema

from budget._config import BudgetConfig
from budget._errors import BudgetError, InputError, RefError
from budget._log import get_logger
from spill import LocalStore, Store, validate_ref
from spill._readonly import ReadOnlyStore

__all__ = ["ReadArgs", "ReadBack", "ReadToolResult", "read_tool_definition", "split_lines"]

_MAX_GREP: Final = 500
_GREP_SECONDS: Final = 2.0
"""A grep that has not finished by then stops with an error the model can act on."""
_MAX_PROGRAM: Final = 1_000
"""Most RE2 instructions a grep pattern may compile to. RE2 runs in time linear in the text, but
the factor is the program's size when its DFA gives up (e.g. ``(?s)(.{0,1000}).{1000}x`` took
9 s on 16 KB): bounding the program bounds what one search call can cost."""
_SEARCH_STEPS: Final = 1 << 22
"""Bytes times program instructions one search call may cover; the clock is read between calls."""
_MIN_SPAN: Final = 4_096
_MAX_SPAN: Final = 1 << 16
_NOT_PER_LINE: Final = re.compile(r"\\[Az]|\(\?[imsU]*-")
"""Constructs whose truth differs between a line searched alone and inside a run of lines
(text anchors, a multi-line flag turned off): such patterns are searched line by line only."""
_LITERAL: Final = re.compile(r"[^.^$*+?()\[\]{}|\\\n]+")
"""A pattern without any regex syntax (nor a newline, which no line's text holds)."""
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
    offset: Annotated[int, AfterValidator(_bounded)] = Field(
        0, ge=0, description="Lines to skip (0 starts at the first line)."
    )
    limit: Annotated[int, Field(ge=1), AfterValidator(_bounded)] | SkipJsonSchema[None] = Field(
        None, description="Most lines to return."
    )
    grep: _Grep | SkipJsonSchema[None] = Field(
        None, description="Only lines matching this regular expression (RE2 syntax)."
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
            "the arguments are ref, offset, limit and grep",
        )
    return InputError("; ".join(dict.fromkeys(problems)))


def _args(**kwargs: Any) -> ReadArgs:
    try:
        return ReadArgs.model_validate(kwargs)
    except ValidationError as exc:
        raise _arg_errors(kwargs, exc) from None


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _matcher(grep: str) -> Any:
    """``grep`` compiled by RE2 (linear time, no backtracking); InputError with RE2's own
    message for a pattern it refuses (invalid, or a backreference or lookaround)."""
    options = re2.Options()
    options.log_errors = False
    options.never_capture = True
    encoded = grep.encode("utf-8", "surrogatepass")  # the texts are encoded the same way
    if _has_surrogate(grep):
        # A lone surrogate is no UTF-8: such a pattern is matched byte by byte (``.`` is then
        # one byte), which still finds the surrogates a tool's output kept.
        options.encoding = re2.Options.Encoding.LATIN1
    try:
        # (?m): ^ and $ match at each line's ends, so a run of lines can be searched at once.
        pattern = re2.compile(b"(?m)" + encoded, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise InputError(f"grep is not a valid regular expression: {reason}") from None
    if pattern.programsize > _MAX_PROGRAM:
        raise InputError(
            f"grep pattern is too complex ({pattern.programsize} instructions once compiled, "
            f"at most {_MAX_PROGRAM}); use a simpler pattern (e.g. smaller {{n}} repeats)"
        )
    return pattern


def _grep(pattern: Any, grep: str, lines: Sequence[str]) -> list[tuple[int, str]]:
    """The (1-based number, line) pairs whose line, without its newline, ``pattern`` matches.

    Every search call covers a bounded number of bytes (fewer for a bigger program), and the
    clock is read between calls: InputError once :data:`_GREP_SECONDS` have passed. Short lines
    are searched in runs: with ``(?m)`` a line matches alone exactly where it matches inside
    the run, so a match within one line's text is that line's, and the search goes on at the
    next line; only a match crossing a newline needs its first line searched alone. A line
    longer than a call's span is searched in windows overlapping by half: a match longer than
    half a window may be missed, and ``^`` and ``$`` also match at a window's ends.
    """
    deadline = time.monotonic() + _GREP_SECONDS
    if _LITERAL.fullmatch(grep):
        # A plain word (most greps): a substring test per line, the same lines RE2 would give.
        hits = []
        for n, line in enumerate(lines, 1):
            if grep in line:
                hits.append((n, line))
            if not n % 4_096:
                _check(deadline, n)
        return hits
    span = max(_MIN_SPAN, min(_MAX_SPAN, _SEARCH_STEPS // max(pattern.programsize, 1)))
    most = span // 4 if _NOT_PER_LINE.search(grep) is None else 0  # UTF-8: <= 4 bytes a char
    run_chars = most
    out: list[tuple[int, str]] = []
    i, n = 0, len(lines)
    while i < n:
        j, size = i + 1, len(lines[i])
        while j < n and size + len(lines[j]) <= run_chars:
            size += len(lines[j])
            j += 1
        found = len(out)
        if j - i == 1:
            if _line_matches(pattern, lines[i], span, deadline, i + 1):
                out.append((i + 1, lines[i]))
        else:
            _run_matches(pattern, lines, i, j, span, deadline, out)
        # Each search call has a fixed cost and, in a run, copies the run: where matches are
        # dense, shorter runs (down to single lines) cost less; where sparse, longer ones.
        run_chars = run_chars // 4 if len(out) > found else min(max(run_chars * 2, 256), most)
        i = j
    return out


def _run_matches(
    pattern: Any,
    lines: Sequence[str],
    first: int,
    end: int,
    span: int,
    deadline: float,
    out: list[tuple[int, str]],
) -> None:
    """Append the matching lines among ``lines[first:end]``, searched as one text."""
    encoded = [line.encode("utf-8", "surrogatepass") for line in lines[first:end]]
    run = b"".join(encoded)
    starts = list(accumulate((len(e) for e in encoded), initial=0))
    pos = 0
    while pos < len(run):
        found = pattern.search(run, pos)
        _check(deadline, first + 1)
        if found is None:
            return
        k = bisect_right(starts, found.start()) - 1
        if k == len(encoded):  # an empty match at the very end of the run
            if encoded[-1].endswith(b"\n"):
                return  # after the last newline: no line's
            k -= 1  # at the end of a last line without a newline: that line's
        text_end = starts[k + 1] - encoded[k].endswith(b"\n")
        n = first + k
        if found.end() <= text_end or _line_matches(pattern, lines[n], span, deadline, n + 1):
            out.append((n + 1, lines[n]))
        pos = starts[k + 1]


def _line_matches(pattern: Any, line: str, span: int, deadline: float, n: int) -> bool:
    data = line.removesuffix("\n").encode("utf-8", "surrogatepass")
    if len(data) <= span:
        found = pattern.search(data) is not None
        _check(deadline, n)
        return found
    step = span // 2
    for start in range(0, len(data) - step, step):
        # A slice, not pos/endpos: google-re2 1.1's binding (re2/__init__.py, _match) hands
        # the whole text to C++ on every call, which made windows cost the line's length.
        if pattern.search(data[start : start + span]) is not None:
            return True
        _check(deadline, n)
    return False


def _check(deadline: float, n: int) -> None:
    if time.monotonic() > deadline:
        raise InputError(
            f"grep stopped after {_GREP_SECONDS:g} s at line {n}: the pattern is too slow on "
            "this output; use a simpler pattern, or page with offset and limit"
        )


def read_tool_definition(config: BudgetConfig) -> dict[str, Any]:
    """The read-back tool in the Anthropic format (``input_schema``): it depends on the config
    only, so an integration can register it before any session is open."""
    return {
        "name": config.read_tool_name,
        "description": (
            "Read a tool output that was too large to show in full. Pass the ref given in "
            "the [toolbudget] notice; page with offset (lines to skip) and limit, or pass "
            "grep (a regular expression) to see only the matching lines, with line numbers."
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

    def lines(
        self, ref: str, *, offset: int = 0, limit: int | None = None, grep: str | None = None
    ) -> tuple[list[tuple[int, str]], int]:
        """(1-based line number, line) pairs chosen, and the number of candidate lines."""
        return self._select(_args(ref=validate_ref(ref), offset=offset, limit=limit, grep=grep))

    def _select(self, args: ReadArgs) -> tuple[list[tuple[int, str]], int]:
        lines = self._lines(args.ref)
        offset, limit = args.offset, args.limit
        if args.grep is None:
            end = len(lines) if limit is None else offset + limit
            return list(enumerate(lines[offset:end], offset + 1)), len(lines)
        numbered = _grep(_matcher(args.grep), args.grep, lines)
        end = len(numbered) if limit is None else offset + limit
        return numbered[offset:end], len(numbered)

    def read(
        self, ref: str, *, offset: int = 0, limit: int | None = None, grep: str | None = None
    ) -> str:
        """The exact text of the chosen lines (the whole output, byte-exact, when no argument)."""
        if offset == 0 and limit is None and grep is None:
            return self._store.get(validate_ref(ref))
        chosen, _ = self.lines(ref, offset=offset, limit=limit, grep=grep)
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
                tool_input = orjson.loads(tool_input)
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
                    out.append(row[:budget] + f" [line {n} continues: {len(body):,} characters]")
                    shown = 1
                break
            out.append(row)
            used += len(row) + 1
            shown += 1
        ref, offset = args.ref, args.offset
        what = "matching lines" if args.grep is not None else "lines"
        head = f"[toolbudget] ref {ref}: {what} {offset + 1}-{offset + shown} of {total}"
        if not chosen:
            head = f"[toolbudget] ref {ref}: no {what} at offset {offset} (there are {total})"
        nxt = offset + shown
        tail = f"[more: call again with offset={nxt}]" if nxt < total else "[end]"
        return "\n".join([head, *out, tail])
