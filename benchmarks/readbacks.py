"""Read-backs: what a lossy strategy pays when the agent later needs a line it hid.

A strategy that spills, trims, clears or truncates a tool result looks free as long as the agent
never needs the hidden text again. The recordings say when it did: a later answer (the assistant's
text, or its tool inputs) *quotes* a line of an earlier result. This module finds those quotes and
charges every strategy, toolbudget included, the same way for the ones its copy hid.

Quotes
    A line of a tool result is quotable when, stripped of surrounding whitespace, it has at least
    :data:`MIN_QUOTE_CHARS` (30) characters; a numbered file view's lines (Claude Code's ``Read``,
    ``cat -n``, ``nl``, OpenHands' editor) count without their line numbers, since an edit's old
    text quotes the code, not its number (``budget._quoting``, the rule the library's cost policy
    learns its read-back rate by). The answer to request ``i`` is every assistant
    message between request ``i``'s history and the next request's (to the end of the trace for
    the last one); its lines are those of its text blocks and of every string in its tool inputs.
    Request ``i``'s answer quotes line ``L`` when ``L`` is one of its (stripped) lines and some
    tool result in request ``i``'s history holds ``L``. Each line counts once per answer.

Visible
    A quoted line is visible when the request copy the strategy sent for request ``i`` holds it
    anywhere (in any message: an earlier result, a later re-fetch by the recorded agent, the
    agent's own earlier text or tool input, a preview), or when the page of a read-back made for
    an earlier request holds it (the agent has that page in its context: every later request
    carries it, and is billed for it; a page read back for this request's answer came after the
    answer needed it). A unified diff's row shows its line without its ``+`` or ``-``
    (:func:`shown_lines`: a re-run shown as its diff from an earlier output, a ``git diff``).
    ``quoted_visibility`` is the share of quotes that were visible: the whole session is looked
    at, not only the last rounds.

Read-back
    A quote that is not visible, and not covered by an earlier read-back, costs one read-back of
    the most recent result in the history that holds the line:

    * size: when the strategy kept the output (``recover(call_id)`` gives it back: toolbudget,
      claude-code, opencode's truncated outputs, gemini-cli), a page of :data:`PAGE_CHARS`
      (2,000) characters of it around the line; otherwise the original tool is run again and
      returns the whole result;
    * an extra request: the copy of request ``i`` read from the cache (``read_price`` per token)
      plus the read-back result written (``write_price`` on Anthropic, the base price elsewhere);
    * the read-back result is carried by every later request, read from the cache.

    The lines of a page (or of the whole re-run result) count as covered from then on.

Not modelled: the read-back's own tool call and answer tokens, the cache misses a carried result
would suffer where the strategy later rewrites the prefix before it, and the effect of carried
tokens on the strategy's later decisions. Tokens are counted with the replay's counter.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.strategies._base import StrategySession
from benchmarks.strategies._common import result_text
from benchmarks.trace import Trace
from budget._quoting import MIN_QUOTE_CHARS, quotable

__all__ = [
    "MIN_QUOTE_CHARS",
    "PAGE_CHARS",
    "Quotes",
    "ReadbackTracker",
    "Readbacks",
    "answer_lines",
    "quotable_lines",
    "shown_lines",
]

PAGE_CHARS = 2_000
"""Characters of the page a read-back returns where the strategy kept the output."""


def quotable_lines(text: str) -> set[str]:
    """The stripped lines of ``text`` long enough to count as a quote (a numbered file view's
    without their line numbers): the library's rule, ``budget._quoting.quotable``."""
    return set(quotable(text))


_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@", re.MULTILINE)
"""A unified diff's hunk header (``git diff``'s, and toolbudget's re-run deltas')."""


def shown_lines(text: str) -> set[str]:
    """The quotable lines ``text`` shows: :func:`quotable_lines`, and in a unified diff (a text
    with a hunk header) each added or removed row's line without its ``+`` or ``-``, as a
    numbered view's lines count without their numbers: the model reads the line there."""
    lines = quotable_lines(text)
    if "@@ -" in text and _HUNK.search(text):
        rows = (r[1:] for r in text.split("\n") if r[:1] in "+-" and r[:3] not in ("+++", "---"))
        lines |= quotable_lines("\n".join(rows))
    return lines


def _strings(obj: Any) -> Iterator[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from _strings(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from _strings(value)


def _message_text(message: Any) -> str:
    """Every string of a message's content (text, tool inputs, tool results), one per line."""
    if not isinstance(message, dict):
        return ""
    return "\n".join(_strings(message.get("content")))


def answer_lines(messages: Sequence[dict[str, Any]]) -> set[str]:
    """The quotable lines of an answer: its text blocks and the strings of its tool inputs."""
    out: set[str] = set()
    for message in messages:
        if message.get("role") != "assistant":
            continue
        content = message.get("content")
        if isinstance(content, str):
            out |= quotable_lines(content)
            continue
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                out |= quotable_lines(str(block.get("text", "")))
            elif block.get("type") == "tool_use":
                for text in _strings(block.get("input")):
                    out |= quotable_lines(text)
    return out


@dataclass(frozen=True, slots=True)
class Readbacks:
    """What the quotes of one replay cost."""

    quotes: int
    """Quoted result lines (once per answer)."""
    visible: int
    """Of those, the ones the strategy's copy held when they were quoted."""
    readbacks: int
    tokens: int
    """Tokens of the read-back results."""
    billed: float
    """Base-price equivalents of the extra requests and of carrying the results afterwards."""


@dataclass(frozen=True, slots=True)
class _Res:
    msg: int
    call_id: str
    text: str


class Quotes:
    """The quote events of one trace, shared by every strategy replayed on it."""

    def __init__(self, trace: Trace) -> None:
        messages = trace.messages
        self.results: list[_Res] = []
        holders: dict[str, list[int]] = {}
        self.msg_lines: list[set[str]] = []
        for j, message in enumerate(messages):
            self.msg_lines.append(quotable_lines(_message_text(message)))
            content = message.get("content")
            if message.get("role") != "user" or not isinstance(content, list):
                continue
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    res = _Res(
                        j, str(block.get("tool_use_id", "")), result_text(block.get("content"))
                    )
                    for line in quotable_lines(res.text):
                        holders.setdefault(line, []).append(len(self.results))
                    self.results.append(res)
        self.where: dict[str, list[int]] = {}
        """Quotable line -> the messages holding it, in order."""
        for j, lines in enumerate(self.msg_lines):
            for line in lines:
                self.where.setdefault(line, []).append(j)
        # events[i]: (line, result index) for each line request i's answer quotes.
        self.events: list[list[tuple[str, int]]] = []
        bounds = [r.n_messages for r in trace.requests]
        for i, n in enumerate(bounds):
            end = bounds[i + 1] if i + 1 < len(bounds) else len(messages)
            answer = list(messages[n : max(n, end)])
            found: list[tuple[str, int]] = []
            for line in sorted(answer_lines(answer)):
                held = [k for k in holders.get(line, ()) if self.results[k].msg < n]
                if held:
                    found.append((line, held[-1]))
            self.events.append(found)


class ReadbackTracker:
    """Follows one replay request by request and prices the read-backs its quotes need.

    Build one :class:`Quotes` per trace with :meth:`for_trace` and share it between strategies.
    """

    def __init__(
        self,
        quotes: Quotes,
        count: Callable[[Any], int],
        *,
        read_price: float,
        write_price: float,
    ) -> None:
        self.q = quotes
        self.count = count
        self.read_price = read_price
        self.write_price = write_price
        self.covered: set[str] = set()
        self.carried = 0
        self.n_quotes = self.n_visible = self.n_readbacks = self.tokens = 0
        self.billed = 0.0
        self._memo: dict[int, tuple[Any, set[str]]] = {}

    def _lines(self, message: Any) -> set[str]:
        """Quotable lines of a message of a copy (remembered: strategies reuse their edits)."""
        hit = self._memo.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        lines = shown_lines(_message_text(message))
        self._memo[id(message)] = (message, lines)
        return lines

    @staticmethod
    def for_trace(trace: Trace) -> Quotes:
        """The quote events of ``trace`` (computed once, shared by every strategy)."""
        return Quotes(trace)

    def _visible(self, line: str, out: Sequence[Any], history: Sequence[Any]) -> bool:
        same_shape = len(out) == len(history)
        if same_shape:
            for j in self.q.where.get(line, ()):
                if j >= len(history):
                    break
                if out[j] is history[j] or line in self._lines(out[j]):
                    return True
            return False
        return any(line in self._lines(m) for m in out)

    def observe(
        self,
        i: int,
        out: Sequence[Any],
        history: Sequence[Any],
        session: StrategySession,
        prompt_tokens: int,
    ) -> None:
        """Account request ``i``: its copy ``out`` of ``history``, ``prompt_tokens`` in size."""
        self.billed += self.carried * self.read_price
        brought: set[str] = set()
        """Lines the read-backs of this request newly brought (not yet in the agent's context)."""
        for line, k in self.q.events[i]:
            self.n_quotes += 1
            if self._visible(line, out, history):
                self.n_visible += 1
                continue
            if line in self.covered:
                # A read-back's page holds it. Of an earlier request: the agent has that page in
                # its context (every later request carries it, as billed below), so it is shown.
                # Of this request: the answer needed it before that read-back brought it.
                self.n_visible += line not in brought
                continue
            res = self.q.results[k]
            kept = session.recover(res.call_id)
            if kept is not None:
                text = kept
                at = max(0, text.find(line))
                start = max(0, min(at + len(line) // 2 - PAGE_CHARS // 2, len(text) - PAGE_CHARS))
                page = text[start : start + PAGE_CHARS]
            else:
                page = res.text
            tokens = self.count(page)
            page_lines = quotable_lines(page)
            page_lines.add(line)
            brought |= page_lines - self.covered
            self.covered |= page_lines
            self.n_readbacks += 1
            # The session learns of it as of an agent's read (the next request's history).
            read_back = getattr(session, "read_back", None)
            if callable(read_back):
                read_back(res.call_id)
            self.tokens += tokens
            self.billed += prompt_tokens * self.read_price + tokens * self.write_price
            self.carried += tokens

    def result(self) -> Readbacks:
        """The totals of the replay."""
        return Readbacks(self.n_quotes, self.n_visible, self.n_readbacks, self.tokens, self.billed)
