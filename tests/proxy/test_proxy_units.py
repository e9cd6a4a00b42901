"""The proxy's pure parts: which session a request belongs to, and reading usage on the side."""

from __future__ import annotations

import gzip
import itertools
import json
import re
from collections.abc import MutableMapping
from types import ModuleType
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from tests._ci import require_module


def _proxy() -> ModuleType:
    for name in ("starlette", "uvicorn", "httpx"):
        require_module(name, extra="proxy")
    import budget.proxy

    return budget.proxy


def test_the_proxy_package_exports_its_pinned_names() -> None:
    """``budget.proxy.__all__`` is the curated list (a new export updates this pin)."""
    assert _proxy().__all__ == [
        "DEFAULT_BUDGET",
        "SESSION_HEADER",
        "ProxySettings",
        "budgeted_api",
        "create_app",
        "serve",
        "session_key",
    ]


_FIRST = {
    "role": "user",
    "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
}


def test_claude_codes_session_id_is_read_in_both_shapes_and_qualified_by_the_first_message() -> (
    None
):
    """The legacy ``…_session_<id>`` string and the JSON string name one session; another first
    message (a subagent) is another session; a moved cache marker changes nothing."""
    key = _proxy().session_key
    legacy = {"metadata": {"user_id": "user_abc_account_def_session_5a1e-77"}}
    modern = {"metadata": {"user_id": json.dumps({"device_id": "d", "session_id": "5a1e-77"})}}
    unmarked = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    a = key("anthropic", {}, legacy, [_FIRST])
    assert a.startswith("anthropic-cc-5a1e-77-")
    assert key("anthropic", {}, modern, [unmarked, {"role": "assistant", "content": "x"}]) == a
    sub = {"role": "user", "content": "Search the repository for X."}
    assert key("anthropic", {}, modern, [sub]) != a


def test_without_an_id_the_session_is_the_hash_of_the_conversations_start() -> None:
    """System, tools and first message name the session; later messages do not."""
    key = _proxy().session_key
    body = {"system": "s", "tools": [{"name": "t"}]}
    one = key("anthropic", {}, body, [_FIRST])
    assert key("anthropic", {}, body, [_FIRST, {"role": "assistant", "content": "x"}]) == one
    assert key("anthropic", {}, {**body, "system": "other"}, [_FIRST]) != one
    assert key("openai_chat", {}, body, [_FIRST]) != one


def test_an_openai_prompt_cache_key_names_the_session_qualified_by_the_first_message() -> None:
    """Two Codex conversations opening with one instructions message are two sessions by their
    ``prompt_cache_key`` (the start alone names one), each request of one is its session; another
    first message under one key is another session; an Anthropic body's key is not read."""
    key = _proxy().session_key
    agents = {"role": "user", "content": [{"type": "input_text", "text": "# AGENTS.md"}]}
    body = {"instructions": "You are Codex.", "tools": [{"type": "function", "name": "shell"}]}
    one = key("openai_responses", {}, {**body, "prompt_cache_key": "0199-a"}, [agents])
    two = key("openai_responses", {}, {**body, "prompt_cache_key": "0199-b"}, [agents])
    assert one != two
    assert one.startswith("openai_responses-pk-0199-a-")
    later = [agents, {"type": "function_call", "call_id": "c", "name": "shell", "arguments": "{}"}]
    assert key("openai_responses", {}, {**body, "prompt_cache_key": "0199-a"}, later) == one
    other = {"role": "user", "content": "Something else."}
    assert key("openai_chat", {}, {"prompt_cache_key": "app"}, [other]) != key(
        "openai_chat", {}, {"prompt_cache_key": "app"}, [agents]
    )
    plain = key("anthropic", {}, {"system": "s"}, [agents])
    assert key("anthropic", {}, {"system": "s", "prompt_cache_key": "x"}, [agents]) == plain


@given(st.text(min_size=1, max_size=300))
def test_any_session_header_names_a_directory_inside_the_root(header: str) -> None:
    """Whatever the header says (``../..``, slashes, NULs), the key is one plain directory name;
    a plain lowercase name is kept as it is."""
    key = _proxy().session_key("anthropic", {"x-toolbudget-session": header}, {}, [])
    assert re.fullmatch(r"anthropic-h-[a-z0-9_-][a-z0-9._~-]*", key)
    assert key not in (".", "..") and "/" not in key
    if re.fullmatch(r"[a-z0-9_-][a-z0-9._-]{0,99}", header):
        assert key == f"anthropic-h-{header}"


def _tap(content_type: str, encoding: str = "", status: int = 200) -> Any:
    _proxy()
    from budget.proxy._tap import Tap

    return Tap(content_type, encoding, status)


def _anthropic_stream(newline: bytes) -> bytes:
    """Anthropic's usage events; the message_delta's JSON over two ``data:`` lines, as SSE allows
    (a reader joins them with a newline)."""
    start = {"type": "message_start", "message": {"usage": {"input_tokens": 9, "output_tokens": 1}}}
    delta = b'{"type": "message_delta",' + newline + b'data: "usage": {"output_tokens": 42}}'
    events = [
        (b"message_start", orjson.dumps(start)),
        (b"ping", orjson.dumps({"type": "ping"})),
        (b"message_delta", delta),
    ]
    return b"".join(
        b"event: " + name + newline + b"data: " + data + newline + newline for name, data in events
    )


@given(st.sampled_from([b"\n", b"\r\n"]), st.lists(st.integers(0, 400), max_size=8))
def test_a_streams_usage_is_read_whatever_the_chunks(newline: bytes, cuts: list[int]) -> None:
    """Anthropic's message_start and message_delta usages merge in order, however the stream is
    cut into chunks (a CRLF too, between its CR and its LF) and whichever line ends it uses."""
    data = _anthropic_stream(newline)
    tap = _tap("text/event-stream")
    bounds = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    for a, b in itertools.pairwise(bounds):
        tap.feed(data[a:b])
    tap.close()
    assert tap.usage == {"input_tokens": 9, "output_tokens": 42}


def test_a_crlf_cut_between_its_cr_and_its_lf_is_one_line_end() -> None:
    """A chunk ending in the CR of a CRLF, the next starting with its LF, ends one line, not two
    (an empty line would end the event there, its JSON cut in half, its usage lost)."""
    data = _anthropic_stream(b"\r\n")
    cut = data.index(b'message_delta",\r\n') + len(b'message_delta",\r')
    tap = _tap("text/event-stream")
    tap.feed(data[:cut])
    tap.feed(data[cut:])
    tap.close()
    assert tap.usage == {"input_tokens": 9, "output_tokens": 42}


def test_a_gzipped_json_body_is_read_and_an_unknown_coding_is_not() -> None:
    """The usage of a gzip-encoded JSON answer is read from a decoded copy; a ``br`` one is
    left unread, with the reason."""
    body = gzip.compress(orjson.dumps({"id": "x", "usage": {"prompt_tokens": 3}}))
    tap = _tap("application/json", "gzip")
    for i in range(0, len(body), 7):
        tap.feed(body[i : i + 7])
    tap.close()
    assert tap.usage == {"prompt_tokens": 3}
    brotli = _tap("application/json", "br")
    brotli.feed(b"\x0b\x02\x80")
    brotli.close()
    assert brotli.usage is None and brotli.unreadable == "content-encoding br"


_USAGE = {"input_tokens": 123_456, "cache_read_input_tokens": 99_000, "output_tokens": 42}


def test_the_usage_sidecar_reads_back_whole_and_a_torn_one_as_no_usage() -> None:
    """The usage as written (padded with spaces or not) reads back; bytes changed by a torn
    write fail the checksum, and a file cut short or created and not yet written is no JSON:
    each reads as no usage; an older proxy's sidecar (the usage alone, written by a rename)
    reads as that usage."""
    _proxy()
    from budget.proxy._pool import _decode_usage, _encode_usage

    data = _encode_usage(_USAGE)
    assert _decode_usage(data) == _USAGE
    assert _decode_usage(data.ljust(len(data) + 40)) == _USAGE
    torn = data.replace(b"123456", b"999999")
    assert orjson.loads(torn)["usage"]["input_tokens"] == 999_999
    assert _decode_usage(torn) is None
    assert _decode_usage(orjson.dumps({"input_tokens": 7})) == {"input_tokens": 7}
    assert _decode_usage(b"[1]") is None
    assert _decode_usage(b"") is None and _decode_usage(data[: len(data) // 2]) is None


def test_a_pools_usage_waits_for_its_fsync_and_a_shorter_one_covers_the_longer(
    tmp_path: Any,
) -> None:
    """An answer's usage is in memory at once and in the sidecar once its request's fsync task
    is done (or when the next request writes it first); a shorter usage after a longer one is
    padded over it; a reopened pool reads the last one, and a torn sidecar as no usage whose
    length the next write still covers."""
    import asyncio

    _proxy()
    from budget.proxy._pool import USAGE_SIDECAR, Pool

    async def run() -> None:
        pool = Pool(tmp_path, {})
        slot = await pool.get("s", "anthropic", "claude-sonnet-4-5")
        sidecar = tmp_path / "s" / USAGE_SIDECAR
        gate = asyncio.Event()
        slot.syncing = asyncio.create_task(gate.wait())  # type: ignore[arg-type]
        pool.note_usage(slot, _USAGE)
        assert slot.usage == _USAGE and not sidecar.exists()
        gate.set()
        await slot.syncing
        await asyncio.sleep(0)  # the task's done callbacks
        assert sidecar.exists()
        long = sidecar.stat().st_size
        pool.note_usage(slot, {"input_tokens": 1})
        assert sidecar.stat().st_size == long
        pool.release(slot)
        await pool.close()
        sidecar.write_bytes(b'{"usage":{"input_tokens":1},"xx' + b" " * 200)
        pool = Pool(tmp_path, {})
        slot = await pool.get("s", "anthropic", "claude-sonnet-4-5")
        assert slot.usage is None
        pool.note_usage(slot, {"input_tokens": 2})
        pool.release(slot)
        await pool.close()
        pool = Pool(tmp_path, {})
        slot = await pool.get("s", "anthropic", "claude-sonnet-4-5")
        assert slot.usage == {"input_tokens": 2}
        pool.release(slot)
        await pool.close()

    asyncio.run(run())


def test_a_requests_fsyncs_start_in_a_sync_thread_at_once_and_a_failure_is_an_event(
    tmp_path: Any,
) -> None:
    """``sync_soon`` hands the session's fsyncs to a sync thread before the event loop turns
    again (the session held busy); ``synced`` releases it, a failed sync a ``sync_failed``
    event; closing the pool stops its threads."""
    import asyncio
    import threading

    import structlog

    _proxy()
    from budget.proxy._pool import Pool
    from spill._errors import StoreError

    async def run() -> None:
        pool = Pool(tmp_path, {})
        slot = await pool.get("s", "anthropic", "claude-sonnet-4-5")
        ran, go = threading.Event(), threading.Event()
        where: list[str] = []

        def sync() -> None:
            where.append(threading.current_thread().name)
            ran.set()
            go.wait(10)
            raise StoreError("injected")

        slot.sync = sync  # type: ignore[method-assign]
        syncing = pool.sync_soon(slot)
        assert ran.wait(10), "the sync waited for the event loop"
        assert slot.busy == 2
        go.set()
        with structlog.testing.capture_logs() as events:
            await pool.synced(slot, syncing)
        assert where[0].startswith("toolbudget-sync")
        assert [e["event"] for e in events] == ["toolbudget.proxy.sync_failed"]
        assert slot.busy == 1
        pool.release(slot)
        await pool.close()

    asyncio.run(run())


def test_the_upstream_parses_each_url_once_and_keeps_a_bounded_number() -> None:
    """A URL sent to again is parsed once (the same request bytes), and the cache of parsed URLs
    never holds more than ``URLS_KEPT``."""
    _proxy()
    import httpx

    from budget.proxy import _upstream

    upstream = _upstream.Upstream(transport=httpx.MockTransport(lambda r: httpx.Response(200)))
    headers = [(b"content-type", b"application/json"), (b"x-api-key", b"k")]
    url = "http://127.0.0.1:9/v1/messages?beta=true"
    first = upstream.request("POST", url, headers, b'{"a":1}')
    again = upstream.request("POST", url, headers, b'{"a":1}')
    plain = httpx.Request("POST", url, headers=headers, content=b'{"a":1}')
    for made in (first, again):
        assert made.url == plain.url and made.headers.raw == plain.headers.raw
        assert made.content == plain.content
    assert upstream._url(url) is upstream._url(url)
    for n in range(_upstream.URLS_KEPT * 2):
        upstream.request("GET", f"http://127.0.0.1:9/v1/files/{n}", headers, b"")
    assert len(upstream._urls) <= _upstream.URLS_KEPT


def test_a_relayed_answer_ends_at_a_hang_up_and_its_request_ends_normally() -> None:
    """``Relayed`` streams every chunk then ends its listener; when the agent hangs up mid-stream
    its relay ends at the await it waits at (its cleanup runs) and the request's task returns
    normally, not left cancelled."""
    import asyncio

    _proxy()
    from budget.proxy._asgi import Relayed

    async def answer(cleaned: list[str], gate: asyncio.Event | None) -> Any:
        try:
            yield b"a"
            if gate is not None:
                await gate.wait()  # never set: the relay waits for the upstream here
            yield b"b"
        finally:
            cleaned.append("relay")

    async def run(hang_up: bool) -> tuple[list[Any], list[str], int, int]:
        sent: list[Any] = []
        cleaned: list[str] = []
        first = asyncio.Event()
        gone = asyncio.Event()

        async def receive() -> dict[str, Any]:
            await (gone.wait() if hang_up else asyncio.Event().wait())
            return {"type": "http.disconnect"}

        async def send(message: MutableMapping[str, Any]) -> None:
            sent.append(message)
            if message.get("body") == b"a":
                first.set()
                if hang_up:
                    gone.set()

        gate = asyncio.Event() if hang_up else None
        response = Relayed(answer(cleaned, gate), 200)
        before = len(asyncio.all_tasks())
        await response({"type": "http"}, receive, send)
        await asyncio.sleep(0)  # the listener's cancellation goes through
        task = asyncio.current_task()
        assert task is not None and first.is_set()
        return sent, cleaned, task.cancelling(), len(asyncio.all_tasks()) - before

    sent, cleaned, cancelling, left = asyncio.run(run(hang_up=False))
    assert [m.get("body") for m in sent] == [None, b"a", b"b", b""]
    assert sent[-1]["more_body"] is False and cleaned == ["relay"] and (cancelling, left) == (0, 0)
    sent, cleaned, cancelling, left = asyncio.run(run(hang_up=True))
    assert [m.get("body") for m in sent] == [None, b"a"]
    assert cleaned == ["relay"] and (cancelling, left) == (0, 0)
