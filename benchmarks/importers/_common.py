"""What every importer shares: JSON reading, block shapes, usage and time conversion, the builder.

The builder owns the two invariants every trace keeps, whatever its recording looked like: a
``tool_result`` always sits in a user message after the assistant message holding its ``tool_use``
(only user messages in between), and tool-use ids are unique within a trace.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from benchmarks._jsonbytes import dumps, loads
from benchmarks.trace import Provider, Request, Trace, Usage
from budget._errors import InputError
from budget.tokens._usage import is_token_count

Block = dict[str, Any]
Message = dict[str, Any]


class TraceFileError(InputError):
    """A trace file cannot be read or does not hold what its format promises; names the file."""


class PartialTraceFile(TraceFileError):
    """Some traces of a file that holds several (OpenHands' ``output.jsonl``, one instance a
    line) could not be read; the message names them, ``traces`` holds the others, still scored."""

    def __init__(self, message: str, traces: list[Trace]) -> None:
        super().__init__(message)
        self.traces = traces


def fail(path: Path, why: str) -> TraceFileError:
    """The error for ``path``, with the file named first so a skip reason is self-explanatory."""
    return TraceFileError(f"{path}: {why}")


_BOM = b"\xef\xbb\xbf"
"""A UTF-8 byte order mark, which some Windows editors and tools write first; RFC 8259 lets a
parser ignore it, orjson refuses it."""


def without_bom(data: bytes) -> bytes:
    """``data`` without a leading UTF-8 byte order mark."""
    return data[len(_BOM) :] if data.startswith(_BOM) else data


def read_json(path: Path) -> Any:
    """The parsed JSON document in ``path`` (a leading UTF-8 byte order mark ignored)."""
    try:
        return loads(without_bom(path.read_bytes()))
    except orjson.JSONDecodeError as exc:
        raise fail(path, f"not valid JSON ({exc})") from exc


def read_jsonl(path: Path) -> list[Any]:
    """The JSON values of ``path``, one per non-empty line (a leading byte order mark ignored).

    A truncated last line (a recorder killed mid-write: no newline after it) is dropped; a bad
    line anywhere else, or a last line ended by its newline (the recorder finished writing it),
    is an error, because silently losing part of a session would falsify the replay.
    """
    values = jsonl_values(path)
    bad = next((v for v in values if isinstance(v, BadLine)), None)
    if bad is not None:
        raise fail(path, bad.why)
    return values


@dataclass(frozen=True, slots=True)
class BadLine:
    """A line of a JSON-lines file that is not JSON, and why."""

    why: str


def jsonl_values(path: Path) -> list[Any]:
    """:func:`read_jsonl`'s values, with a :class:`BadLine` in place of each line that is not
    JSON instead of an error: for a file whose lines are independent traces."""
    data = without_bom(path.read_bytes())
    torn_allowed = not data.rstrip(b" \t\r").endswith(b"\n")
    # Numbered as in the file (blank lines counted), so the error names the line an editor shows.
    raw = [(n, line) for n, line in enumerate(data.splitlines(), start=1) if line.strip()]
    out: list[Any] = []
    for i, (n, line) in enumerate(raw):
        try:
            out.append(loads(line))
        except orjson.JSONDecodeError as exc:
            if i == len(raw) - 1 and i > 0 and torn_allowed:
                break
            out.append(BadLine(f"line {n} is not valid JSON ({exc})"))
    return out


def parse_time(value: Any) -> float | None:
    """Epoch seconds from an ISO-8601 string (naive means UTC) or a number; None when absent."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and value:
        try:
            stamp = datetime.fromisoformat(value)
        except ValueError:
            return None
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=UTC)
        return stamp.timestamp()
    return None


def as_int(value: Any) -> Any:
    """A token count as recorded, a missing or null one as zero. Any other value is kept as it
    is (a negative, fractional or quoted count): the importers' last gate
    (:mod:`benchmarks.importers._check`) skips the trace, naming it, where rounding it to a count
    would score a recording no provider made."""
    return 0 if value is None else value


def count_sum(*values: Any) -> Any:
    """The sum of recorded counts (missing ones zero), or the first that is no count (kept for
    the last gate to name)."""
    counts = [as_int(v) for v in values]
    bad = next((v for v in counts if not is_token_count(v)), None)
    return sum(counts) if bad is None else bad


def openai_usage(prompt: Any, cached: Any, completion: Any, cache_write: Any = 0) -> Usage:
    """Usage from OpenAI-style counts, where the prompt total includes the cached tokens (a
    cached part larger than the total is no usage a provider reports: kept negative, for the
    last gate to refuse)."""
    read, write, total = as_int(cached), as_int(cache_write), as_int(prompt)
    counts = all(is_token_count(v) for v in (read, write, total))
    return Usage(
        input_tokens=total - read - write if counts else total,
        cache_read_tokens=read,
        cache_write_tokens=write,
        output_tokens=as_int(completion),
    )


def parts_text(content: Any, sep: str = "\n") -> str:
    """A message's text: ``content`` itself if a string, else its parts' ``text`` joined by ``sep``
    (parts without text, and content of any other type, give nothing)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return sep.join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p
        )
    return ""


def text_block(text: str) -> Block:
    """A canonical text block."""
    return {"type": "text", "text": text}


def text_blocks(text: str) -> list[Block]:
    """``text`` as a block list; empty text gives no block (the API refuses empty text blocks)."""
    return [text_block(text)] if text else []


def json_text(value: Any) -> str:
    """A compact, deterministic JSON rendering, for values that have no text form of their own."""
    return dumps(value, sort_keys=True).decode()


def parse_arguments(raw: Any) -> dict[str, Any]:
    """Tool-call arguments as a dict: parsed JSON when it is an object, else ``{"input": raw}``."""
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            parsed = loads(raw)
        except orjson.JSONDecodeError:
            return {"input": raw}
        if isinstance(parsed, dict):
            return parsed
    return {"input": raw}


@dataclass(slots=True)
class _PendingRequest:
    n_messages: int
    usage: Usage | None = None
    timestamp: float | None = None


class TraceBuilder:
    """Accumulates canonical messages and requests for one trace, keeping tool pairing intact."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.stats: Counter[str] = Counter()
        self._requests: dict[str, _PendingRequest] = {}
        self._assistant_at: dict[str, int] = {}
        self._owner: dict[str, int] = {}  # unique tool-use id -> its assistant message index
        self._results_at: dict[int, int] = {}  # assistant index -> its tool-result user message
        self._answered: set[str] = set()
        self._latest_id: dict[str, str] = {}  # recorded id -> unique id of its latest tool_use
        self._used_ids: set[str] = set()

    # -- requests -------------------------------------------------------------------------

    def begin_request(self, key: str, timestamp: float | None = None) -> None:
        """Open the model call ``key``; it saw every message so far. Later calls are no-ops."""
        if key not in self._requests:
            self._requests[key] = _PendingRequest(len(self.messages), timestamp=timestamp)
        elif self._requests[key].timestamp is None:
            self._requests[key].timestamp = timestamp

    def set_usage(self, key: str, usage: Usage | None) -> None:
        """Record what the provider billed for call ``key`` (opening it if needed)."""
        self.begin_request(key)
        if usage is not None:
            self._requests[key].usage = usage

    def has_request(self, key: str) -> bool:
        """Whether call ``key`` was opened."""
        return key in self._requests

    @property
    def request_count(self) -> int:
        """How many model calls were opened so far."""
        return len(self._requests)

    # -- messages -------------------------------------------------------------------------

    def assistant(self, key: str, blocks: list[Block], timestamp: float | None = None) -> None:
        """Add ``blocks`` to the assistant message of model call ``key`` (created on first use)."""
        self.begin_request(key, timestamp)
        at = self._assistant_at.get(key)
        if at is None:
            at = len(self.messages)
            self._assistant_at[key] = at
            self.messages.append({"role": "assistant", "content": []})
        content = self.messages[at]["content"]
        for block in blocks:
            is_call = block.get("type") == "tool_use"
            content.append(self._unique_tool_use(block, at) if is_call else block)

    def user(self, blocks: list[Block]) -> None:
        """A user turn: its tool results go after their calls, its other blocks in a new message."""
        rest: list[Block] = []
        for block in blocks:
            if block.get("type") == "tool_result":
                self.tool_result(block)
            else:
                rest.append(block)
        if rest:
            self.messages.append({"role": "user", "content": rest})

    def user_message(self, blocks: list[Block]) -> None:
        """A user message kept exactly as given (generic formats already pair their results)."""
        out: list[Block] = []
        for block in blocks:
            if block.get("type") == "tool_result":
                fixed = self._resolve_result(block)
                if fixed is None:
                    out.append(self._orphan_text(block))
                else:
                    self._answered.add(fixed["tool_use_id"])
                    out.append(fixed)
            else:
                out.append(block)
        if out:
            self.messages.append({"role": "user", "content": out})

    def tool_result(self, block: Block) -> None:
        """Put ``block`` in the tool-result message right after the assistant message calling it."""
        fixed = self._resolve_result(block)
        if fixed is None:
            self.messages.append({"role": "user", "content": [self._orphan_text(block)]})
            return
        uid = fixed["tool_use_id"]
        owner = self._owner[uid]
        at = self._results_at.get(owner)
        if at is None:
            if any(m["role"] != "user" for m in self.messages[owner + 1 :]):
                # An assistant message came between call and result: pairing would break.
                self.stats["late_results"] += 1
                self.messages.append({"role": "user", "content": [self._orphan_text(block)]})
                return
            at = len(self.messages)
            self._results_at[owner] = at
            self.messages.append({"role": "user", "content": []})
        self._answered.add(uid)
        self.messages[at]["content"].append(fixed)

    # -- finishing ------------------------------------------------------------------------

    def plain(
        self, fmt: str, path: Path, root: Path, provider: Provider, system: str, model: str | None
    ) -> list[Trace]:
        """The one trace of a plain message list at ``path``: one request per model turn, plus
        one when the list ends on a user turn (the request it was about to make)."""
        if self.messages and self.messages[-1]["role"] == "user":
            self.begin_request("final")
        rel = path.relative_to(root).as_posix()
        return [
            self.build(
                name=f"{fmt}/{path.stem}",
                path=rel,
                format=fmt,
                provider=provider,
                system=system,
                model=model,
            )
        ]

    def build(
        self,
        *,
        name: str,
        path: str,
        format: str,
        provider: Provider,
        system: str = "",
        model: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Trace:
        """The finished trace; empty assistant messages (thinking-only answers) are dropped."""
        keep = [bool(m["content"]) for m in self.messages]
        before = [0]
        for kept in keep:
            before.append(before[-1] + kept)
        messages = tuple(m for m, kept in zip(self.messages, keep, strict=True) if kept)
        requests = tuple(
            Request(before[r.n_messages], r.usage, r.timestamp) for r in self._requests.values()
        )
        unanswered = sum(
            1 for uid, at in self._owner.items() if uid not in self._answered and keep[at]
        )
        stats = Counter(self.stats)
        if unanswered:
            stats["unanswered_tool_uses"] = unanswered
        full_meta = dict(meta or {})
        if stats:
            full_meta["import_notes"] = dict(sorted(stats.items()))
        return Trace(
            name=name,
            path=path,
            format=format,
            provider=provider,
            messages=messages,
            requests=requests,
            system=system,
            model=model,
            meta=full_meta,
        )

    # -- internals ------------------------------------------------------------------------

    def _unique_tool_use(self, block: Block, at: int) -> Block:
        recorded = str(block.get("id") or f"call_{len(self._used_ids) + 1}")
        uid = recorded
        n = 1
        while uid in self._used_ids:
            n += 1
            uid = f"{recorded}~{n}"
        if uid != recorded:
            self.stats["renamed_tool_ids"] += 1
        self._used_ids.add(uid)
        self._latest_id[recorded] = uid
        self._owner[uid] = at
        return {**block, "id": uid}

    def _resolve_result(self, block: Block) -> Block | None:
        uid = self._latest_id.get(str(block.get("tool_use_id")))
        if uid is None or uid in self._answered:
            self.stats["orphan_results"] += 1
            return None
        return {**block, "tool_use_id": uid}

    @staticmethod
    def _orphan_text(block: Block) -> Block:
        # Kept as plain text so nothing recorded is lost and no result is left without its call.
        parts = [b.get("text", "") for b in block.get("content", []) if b.get("type") == "text"]
        head = f"[tool result for unknown call {block.get('tool_use_id')}]"
        return text_block("\n".join([head, *parts]))


def short_id(text: str) -> str:
    """The first 8 characters of a UUID-like id, the convention for short trace names."""
    return text[:8]
