"""Reading a response on the side while its bytes go to the agent unchanged.

The tap sees each raw chunk after it was forwarded; it never holds the stream back. It decodes a
copy (gzip and deflate with zlib; any other content coding leaves the usage unread, with an
event), and reads:

* from a JSON body: its ``usage`` (Anthropic Messages, Chat Completions and Responses all put it
  there), or the whole error body of a refused request;
* from a server-sent event stream: the ``usage`` of the events carrying one, merged in order
  (Anthropic's ``message_start`` has the prompt's tokens and ``message_delta`` the answer's; Chat
  Completions sends one in its last chunk when ``stream_options.include_usage`` is set; the
  Responses API's ``response.completed`` holds the response with its usage). Only events whose
  data mentions ``"usage"`` are parsed. A stream is complete once its API's final event came
  (Anthropic's ``message_stop``, Chat Completions' ``data: [DONE]``, the Responses API's
  ``response.completed``, ``.incomplete`` or ``.failed``): one that ends before is cut off, and
  what usage it carried so far (the prompt's, without the answer's) is not the response's. An
  error event (Anthropic's ``event: error``, the Responses API's ``error`` or ``response.failed``,
  a chunk holding an ``error`` object) makes the stream a failed one, whatever follows it.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping
from typing import Any, Final

import orjson

from budget._errors import BudgetError
from budget.tokens._usage import normalize_usage

__all__ = ["Tap", "understood"]

MAX_JSON_BYTES: Final = 32 << 20
"""A JSON body larger than this is forwarded but not read (no response of these APIs is this
large; the copy must not grow without bound)."""
MAX_EVENT_BYTES: Final = 32 << 20
"""The same bound for one server-sent event."""
_USAGE: Final = b'"usage"'
_ERROR: Final = b'"error"'
"""What an error event's data holds (a key or a ``type``): only events mentioning it are parsed
for one (a text delta's own quotes are escaped, so an answer's words do not match)."""
_FINAL: Final = re.compile(
    rb"^(?:event: ?(?:message_stop|response\.(?:completed|incomplete|failed))|data: ?\[DONE\])"
    rb"[ \t]*$",
    re.MULTILINE,
)
"""A line of a stream's final event, in each API (an ``event:`` line, or Chat's last data)."""
_FINAL_TYPES: Final = frozenset({"response.completed", "response.incomplete", "response.failed"})
"""The final events' types where a stream sends them with their usage and no ``event:`` line."""


class Tap:
    """Reads the usage (or the error body) of one response from the chunks forwarded."""

    def __init__(self, content_type: str, content_encoding: str, status: int) -> None:
        self.usage: dict[str, Any] | None = None
        self.error_body: Any = None
        self.unreadable: str | None = None
        """Why the response could not be read, or None."""
        self.stream_error: str | None = None
        """The type of the error event a stream ended its answer with (Anthropic's ``event:
        error``, the Responses API's ``error``, a Chat Completions chunk holding an ``error``),
        or None: the answer failed upstream after its first bytes (``overloaded_error``)."""
        self._sse = content_type.startswith("text/event-stream") and status < 400
        self._ended = False
        self._status = status
        self._decoder: Any = None
        coding = content_encoding.strip().lower()
        if coding in ("gzip", "x-gzip"):
            self._decoder = zlib.decompressobj(wbits=31)
        elif coding == "deflate":
            self._decoder = zlib.decompressobj(wbits=47)  # zlib or gzip header, auto-detected
        elif coding not in ("", "identity"):
            self.unreadable = f"content-encoding {coding}"
        self._buf = bytearray()

    def feed(self, chunk: bytes) -> None:
        """One raw chunk, as it was forwarded."""
        if self.unreadable is not None or not chunk:
            return
        if self._decoder is not None:
            try:
                chunk = self._decoder.decompress(chunk)
            except zlib.error:
                self.unreadable = "undecodable body"
                return
        self._buf += chunk
        if self._sse:
            self._events()
        elif len(self._buf) > MAX_JSON_BYTES:
            self.unreadable, self._buf = "body too large to read", bytearray()

    @property
    def complete(self) -> bool:
        """Whether the response read is whole: a stream's final event came (a JSON body that is
        cut does not parse, and has no usage)."""
        return not self._sse or self._ended

    def close(self) -> None:
        """The response ended: read what is left."""
        if self.unreadable is not None:
            return
        if self._sse:
            self._buf += b"\n\n"
            self._events()
            return
        try:
            body = orjson.loads(bytes(self._buf))
        except orjson.JSONDecodeError:
            body = bytes(self._buf).decode("utf-8", "replace")
        self._buf = bytearray()
        if self._status >= 400:
            self.error_body = body
        elif isinstance(body, dict) and isinstance(body.get("usage"), dict):
            self.usage = body["usage"]

    def _events(self) -> None:
        buf = self._buf
        if b"\r" in buf:  # SSE allows CRLF and CR line ends: one form to split on
            # A CR ending the buffer may be a CRLF's first half, its LF in the next chunk: kept
            # until then (as an LF now, the LF after it would end the event mid-way).
            held = b"\r" if buf.endswith(b"\r") else b""
            body = buf[: len(buf) - len(held)]
            buf[:] = body.replace(b"\r\n", b"\n").replace(b"\r", b"\n") + held
        start = 0
        while (end := buf.find(b"\n\n", start)) >= 0:
            event = buf[start:end]
            start = end + 2
            if _USAGE in event or _ERROR in event:
                self._event(bytes(event))
            if not self._ended and _FINAL.search(event) is not None:
                self._ended = True
        del buf[:start]
        if len(buf) > MAX_EVENT_BYTES:
            self.unreadable = "event too large to read"
            buf.clear()

    def _event(self, event: bytes) -> None:
        payload = _payload(event)
        if payload is None:
            return
        if self.stream_error is None:
            # Read whatever else the event holds: a chunk may hold a usage and an error.
            self.stream_error = _error_type(payload)
        if payload.get("type") in _FINAL_TYPES:
            self._ended = True
        usage = _usage_of(payload)
        if usage is not None:
            # Later events complete earlier ones (Anthropic's message_delta after message_start).
            merged = dict(self.usage or {})
            merged.update({k: v for k, v in usage.items() if v is not None})
            self.usage = merged


def _payload(event: bytes) -> dict[str, Any] | None:
    """The JSON object of one event's ``data:`` lines, or None."""
    data = b"\n".join(
        line[5:].removeprefix(b" ") for line in event.split(b"\n") if line.startswith(b"data:")
    )
    try:
        payload = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return payload if isinstance(payload, dict) else None


def _error_type(payload: dict[str, Any]) -> str | None:
    """The error an event reports, by its type (``"error"`` when it names none), or None."""
    kind_of, error = payload.get("type"), payload.get("error")
    if kind_of == "response.failed":
        # The Responses API's failed response: final, its error inside the response.
        response = payload.get("response")
        error = response.get("error") if isinstance(response, dict) else None
    elif kind_of != "error" and not isinstance(error, dict):
        # A chunk holding an error object is one whatever else it holds (OpenRouter's mid-stream
        # error comes with its choices, finish_reason "error"; the OpenAI SDK raises on it).
        return None
    # Anthropic and Chat name it in the error object; the Responses API's event by its code.
    kind = (
        (error.get("type") or error.get("code")) if isinstance(error, dict) else payload.get("code")
    )
    return kind if isinstance(kind, str) and kind else "error"


def _usage_of(payload: dict[str, Any]) -> dict[str, Any] | None:
    for holder in (payload, payload.get("message"), payload.get("response")):
        if isinstance(holder, dict) and isinstance(holder.get("usage"), dict):
            usage: dict[str, Any] = holder["usage"]
            return usage
    return None


def understood(usage: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """``usage`` if the session can read it (else ``prepare`` would refuse the next request)."""
    if usage is None:
        return None
    try:
        return usage if normalize_usage(usage) is not None else None
    except BudgetError:
        return None
