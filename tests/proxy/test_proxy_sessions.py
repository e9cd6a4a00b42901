"""Sessions: one per conversation, many at once, each making the library's copies; a proxy
killed mid-session and started again goes on with identical copies."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from budget.proxy import SESSION_HEADER, session_key
from tests.proxy._kit import BUDGET, Stack, anthropic_history, library_copies, run_proxy

_HEADERS = {"content-type": "application/json", "x-api-key": "k", "anthropic-version": "v"}
_SESSIONS = 20
_ROUNDS = 6


def _fixed() -> float:
    """One instant for every request: the sessions' copies do not depend on how their requests
    interleave on the proxy's clock."""
    return 1_700_000_000.0


def _body(history: list[Any]) -> bytes:
    return orjson.dumps({"model": "claude-sonnet-4-5", "max_tokens": 8, "messages": history})


def test_twenty_concurrent_sessions_with_parallel_requests_each_get_the_library_copies(
    kit: Any, tmp_path: Path
) -> None:
    """20 conversations run at once, each sending every round twice in parallel (an agent's
    retry racing its request): each is its own session, and every body the upstream receives
    is the copy the library makes of that conversation alone."""
    root = tmp_path / "sessions"
    histories = {
        f"s{n:02d}": anthropic_history(_ROUNDS, lines=60 + 7 * n, tag=f"s{n}")
        for n in range(_SESSIONS)
    }

    async def converse(client: httpx.AsyncClient, url: str, name: str) -> None:
        history = histories[name]
        for upto in range(3, len(history) + 1, 2):
            sent = [
                client.post(f"{url}/v1/messages", content=_body(history[:upto]), headers=_HEADERS)
                for _ in range(2)
            ]
            for answer in await asyncio.gather(*sent):
                assert answer.status_code == 200

    async def run(url: str) -> None:
        async with httpx.AsyncClient(timeout=60) as client:
            await asyncio.gather(*(converse(client, url, name) for name in histories))

    with Stack(root, usage_for=lambda api, body: None, clock=_fixed) as stack:
        asyncio.run(run(stack.url))
        received = stack.upstream.received
    by_first: dict[str, list[list[Any]]] = {}
    for got in received:
        messages = orjson.loads(got.body)["messages"]
        by_first.setdefault(messages[0]["content"], []).append(messages)
    assert len(by_first) == _SESSIONS
    assert len([p for p in root.iterdir() if p.is_dir()]) == _SESSIONS
    for name, history in histories.items():
        key = session_key("anthropic", {}, {"model": "claude-sonnet-4-5"}, history)
        steps = [history[:upto] for upto in range(3, len(history) + 1, 2)]
        expected = library_copies(
            tmp_path / "library" / key,
            steps,
            fmt="anthropic",
            model="claude-sonnet-4-5",
            clock=_fixed,
        )
        # The proxy's envelopes name its own directory: compare with the library's in place.
        mine = by_first[history[0]["content"]]
        shown = [
            orjson.loads(
                orjson.dumps(m).replace(
                    str(tmp_path / "sessions").encode(), str(tmp_path / "library").encode()
                )
            )
            for m in mine
        ]
        # Both requests of a round carry the one copy (the second is a retry of the first).
        assert sorted(orjson.dumps(m) for m in shown) == sorted(
            orjson.dumps(c) for c in expected for _ in range(2)
        ), name


def test_an_explicit_session_header_names_the_session(stack: Stack) -> None:
    """Two conversations sent with one ``x-toolbudget-session`` value share a session; the header
    is the proxy's own and never reaches the upstream."""
    for tag in ("a", "b"):
        headers = {**_HEADERS, SESSION_HEADER: "my-task-1"}
        httpx.post(
            f"{stack.url}/v1/messages",
            content=_body(anthropic_history(1, tag=tag)),
            headers=headers,
        )
    assert [p.name for p in stack.root.iterdir() if p.is_dir()] == ["anthropic-h-my-task-1"]
    assert all(r.header(SESSION_HEADER) is None for r in stack.upstream.received)


def _start(root: Path, upstream: str) -> tuple[subprocess.Popen[str], str]:
    """``toolbudget proxy`` in a child process with default host, on a free port."""
    return run_proxy(root, upstream, {f"TOOLBUDGET_{k.upper()}": str(v) for k, v in _ENV.items()})


_ENV = {
    **{k: BUDGET[k] for k in ("result_cap", "preview_chars", "protect_rounds", "stale_floor")},
    **{k: BUDGET[k] for k in ("stub_chars", "min_reclaim_tokens")},
    "window": 1_500,
    "fsync": True,
}
"""The child's settings, by environment variable as a user would set them: tests.strategies.SMALL's
limits and a window the conversation outgrows, so results are spilled and old ones trimmed."""


def test_a_proxy_killed_mid_session_goes_on_with_identical_copies(kit: Any, tmp_path: Path) -> None:
    """SIGKILL while an answer streams, then a new proxy on the same root: the copies before the
    kill, the agent's retry of the interrupted request and every later request are those of
    one uninterrupted library session."""
    from benchmarks.standin import Served, StandIn

    root = tmp_path / "sessions"
    history = anthropic_history(8, lines=300)
    steps = [history[:upto] for upto in range(3, len(history) + 1, 2)]
    standin = StandIn(chunk_delay_s=0.3)
    with Served(standin.app()) as up:
        child, url = _start(root, up.url)
        try:
            with httpx.Client(timeout=30) as client:
                for step in steps[:4]:
                    client.post(
                        f"{url}/v1/messages", content=_body(step), headers=_HEADERS
                    ).raise_for_status()
                streamed = orjson.loads(_body(steps[4])) | {"stream": True}
                with client.stream(
                    "POST", f"{url}/v1/messages", content=orjson.dumps(streamed), headers=_HEADERS
                ) as answer:
                    next(answer.iter_raw())  # the first event is out: the answer is streaming
                    child.send_signal(signal.SIGKILL)
                    child.wait(10)
        finally:
            child.kill()
        before = [orjson.loads(b)["messages"] for b in standin.bodies("/v1/messages")]
        child, url = _start(root, up.url)
        try:
            with httpx.Client(timeout=30) as client:
                for step in steps[4:]:  # the interrupted request again, then the rest
                    client.post(
                        f"{url}/v1/messages", content=_body(step), headers=_HEADERS
                    ).raise_for_status()
        finally:
            child.terminate()
            child.wait(10)
    after = [orjson.loads(b)["messages"] for b in standin.bodies("/v1/messages")][len(before) :]
    assert len(before) == 5 and len(after) == len(steps) - 4
    key = session_key("anthropic", {}, {}, history)
    expected = library_copies(
        tmp_path / "library" / key,
        steps,
        fmt="anthropic",
        model="claude-sonnet-4-5",
        budget={**BUDGET, **_ENV},
        clock=time.time,
    )
    library = str(tmp_path / "library").encode()
    moved = [
        orjson.loads(orjson.dumps(m).replace(str(root).encode(), library)) for m in before + after
    ]
    # Before the kill, the retry after it, and every later request: one session's copies.
    assert moved == [*expected[:5], *expected[4:]]
    # Decisions a fresh session would make differently: old results trimmed before the kill.
    assert "[toolbudget] Old output" in orjson.dumps(before[-1]).decode()


_HEAVY = {"input_tokens": 1_250, "cache_read_input_tokens": 0, "output_tokens": 5}
"""A usage far above the estimate of these short histories: 83% of the 1,500-token window, so
a session that has it trims under pressure where one without it would not."""


def test_a_restarted_proxy_feeds_the_next_request_the_usage_the_last_answer_reported(
    kit: Any, tmp_path: Path
) -> None:
    """SIGKILL between two requests, once the last answer's usage is saved: the first request
    after the restart is prepared with that usage, as in an uninterrupted library session (the
    usage decides here: it puts the context under pressure)."""
    from benchmarks.standin import Served, StandIn
    from budget.proxy._pool import _decode_usage
    from tests.proxy._kit import eventually

    root = tmp_path / "sessions"
    history = anthropic_history(6, lines=120)
    steps = [history[:upto] for upto in range(3, len(history) + 1, 2)]
    standin = StandIn(usage_for=lambda api, body: _HEAVY)

    def saved() -> bool:
        sessions = [p for p in root.iterdir() if p.is_dir()]
        path = sessions[0] / "proxy_usage.json"
        return path.exists() and _decode_usage(path.read_bytes()) == _HEAVY

    with Served(standin.app()) as up:
        for part in (steps[:3], steps[3:]):
            child, url = _start(root, up.url)
            try:
                with httpx.Client(timeout=30) as client:
                    for step in part:
                        client.post(
                            f"{url}/v1/messages", content=_body(step), headers=_HEADERS
                        ).raise_for_status()
                assert eventually(saved)
            finally:
                child.send_signal(signal.SIGKILL)
                child.wait(10)
    sent = [orjson.loads(b)["messages"] for b in standin.bodies("/v1/messages")]
    key = session_key("anthropic", {}, {}, history)
    library = tmp_path / "library"
    expected = library_copies(
        library / key,
        steps,
        fmt="anthropic",
        model="claude-sonnet-4-5",
        budget={**BUDGET, **_ENV},
        clock=time.time,
        usages=[None, *[_HEAVY] * (len(steps) - 1)],
    )
    moved = [
        orjson.loads(orjson.dumps(m).replace(str(root).encode(), str(library).encode()))
        for m in sent
    ]
    assert moved == expected
    without = library_copies(
        tmp_path / "blind" / key,
        steps,
        fmt="anthropic",
        model="claude-sonnet-4-5",
        budget={**BUDGET, **_ENV},
        clock=time.time,
    )
    blind = [
        orjson.loads(
            orjson.dumps(m).replace(str(tmp_path / "blind").encode(), str(library).encode())
        )
        for m in without
    ]
    assert blind != expected, "the usage decides nothing here: the test would not see it lost"


def test_toolbudget_gc_leaves_open_sessions_and_collects_them_once_closed(
    kit: Any, tmp_path: Path, structlog_restored: None
) -> None:
    """``toolbudget gc ROOT`` skips the session a running proxy holds, and removes it once the
    proxy has stopped (its sessions closed)."""
    from typer.testing import CliRunner

    from budget.cli import app

    root = tmp_path / "sessions"
    with Stack(root) as stack:
        body = _body(anthropic_history(1))
        httpx.post(f"{stack.url}/v1/messages", content=body, headers=_HEADERS).raise_for_status()
        time.sleep(1.1)  # older than the 1 s asked below
        held = CliRunner().invoke(app, ["gc", str(root), "--older-than", "1s"])
        assert "0 session(s) removed, 1 skipped" in held.output
    time.sleep(1.1)
    done = CliRunner().invoke(app, ["gc", str(root), "--older-than", "1s"])
    assert "1 session(s) removed" in done.output
    assert not any(p.is_dir() for p in root.iterdir())


def _block_fsync(
    monkeypatch: Any, suffix: str, what: str
) -> tuple[threading.Event, threading.Event, list[str]]:
    """Make the first fsync of a file ending with ``suffix`` wait for ``release`` (the first
    event returned); ``blocked`` (the second) is set once it waits; every path synced is
    appended to the list returned, in order."""
    from spill import _fs

    release, blocked = threading.Event(), threading.Event()
    synced: list[str] = []
    real = _fs.fsync

    def fsync(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if path.endswith(suffix) and not blocked.is_set():
            blocked.set()
            assert release.wait(20), f"the test never released the {what}'s fsync"
        synced.append(path)
        real(fd)

    monkeypatch.setattr(_fs, "fsync", fsync)
    return release, blocked, synced


def test_a_request_goes_upstream_before_its_log_fsync_and_the_next_waits_for_it(
    kit: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """The decision log's fsync never holds a request back: with it blocked, the request is
    forwarded and answered (its records already in the file, as a killed proxy would leave
    them); the session's next request is prepared only once that fsync is done."""
    release, blocked, _ = _block_fsync(monkeypatch, "decisions.jsonl", "log")
    history = anthropic_history(2, lines=120)
    with (
        kit.Stack(tmp_path / "sessions", budget={**BUDGET, "fsync": True}) as stack,
        httpx.Client(timeout=30) as client,
    ):
        first = client.post(
            f"{stack.url}/v1/messages", content=_body(history[:3]), headers=_HEADERS
        )
        assert first.status_code == 200
        assert blocked.wait(10) and not release.is_set()
        assert stack.sent("/v1/messages")[0]["messages"] != history[:3], "not the request copy"
        (session,) = [p for p in stack.root.iterdir() if p.is_dir()]
        assert (session / "decisions.jsonl").read_bytes().count(b"\n") >= 2  # decision, request
        answers: list[int] = []
        later = threading.Thread(
            target=lambda: answers.append(
                client.post(
                    f"{stack.url}/v1/messages", content=_body(history), headers=_HEADERS
                ).status_code
            )
        )
        later.start()
        time.sleep(0.5)
        assert len(stack.upstream.bodies("/v1/messages")) == 1, "prepared before the fsync"
        release.set()
        later.join(30)
        assert answers == [200]
        assert len(stack.upstream.bodies("/v1/messages")) == 2


def test_an_answers_usage_waits_for_its_requests_fsync_and_the_proxy_serves_on_meanwhile(
    kit: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """With a request's log fsync blocked (it holds the store's lock), the usage its answer
    reported is saved to the sidecar only once that fsync is done, and meanwhile the proxy
    answers other requests: the wait is never the event loop's."""
    from budget.proxy._pool import USAGE_SIDECAR

    release, blocked, _ = _block_fsync(monkeypatch, "decisions.jsonl", "log")
    history = anthropic_history(2, lines=120)
    with (
        kit.Stack(tmp_path / "sessions", budget={**BUDGET, "fsync": True}) as stack,
        httpx.Client(timeout=30) as client,
    ):
        try:
            first = client.post(
                f"{stack.url}/v1/messages", content=_body(history[:3]), headers=_HEADERS
            )
            assert first.status_code == 200
            assert blocked.wait(10) and not release.is_set()
            (session,) = [p for p in stack.root.iterdir() if p.is_dir()]
            other = client.get(f"{stack.url}/v1/models", headers=_HEADERS, timeout=5)
            assert other.status_code == 200, "another request waited for the fsync"
            assert not (session / USAGE_SIDECAR).exists(), "saved before the fsync was done"
        finally:
            release.set()
        assert kit.eventually((session / USAGE_SIDECAR).exists)


def test_a_spilled_bodys_fsync_waits_for_the_upstream_and_is_done_before_the_next_and_at_stop(
    kit: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """A request's spilled bodies are in place when it goes upstream, their fsyncs run after
    (with one blocked the request is answered); the session's next request is prepared only once
    they are done; stopping the proxy syncs what is left, every body before the log."""
    release, blocked, synced = _block_fsync(monkeypatch, ".txt", "body")
    history = anthropic_history(3, lines=300)
    with (
        kit.Stack(tmp_path / "sessions", budget={**BUDGET, "fsync": True}) as stack,
        httpx.Client(timeout=30) as client,
    ):
        first = client.post(
            f"{stack.url}/v1/messages", content=_body(history[:3]), headers=_HEADERS
        )
        assert first.status_code == 200
        assert blocked.wait(10) and not release.is_set()
        (session,) = [p for p in stack.root.iterdir() if p.is_dir()]
        assert list((session / "bodies").rglob("*.txt")), "the body is in place before its fsync"
        answers: list[int] = []
        later = threading.Thread(
            target=lambda: answers.append(
                client.post(
                    f"{stack.url}/v1/messages", content=_body(history[:5]), headers=_HEADERS
                ).status_code
            )
        )
        later.start()
        time.sleep(0.5)
        assert len(stack.upstream.bodies("/v1/messages")) == 1, "prepared before the sync"
        release.set()
        later.join(30)
        assert answers == [200]
        client.post(f"{stack.url}/v1/messages", content=_body(history), headers=_HEADERS)
    bodies = {str(p) for p in (session / "bodies").rglob("*.txt")}
    assert len(bodies) >= 2 and bodies <= set(synced), "a body left unsynced at stop"
    last_log = max(i for i, p in enumerate(synced) if p.endswith("decisions.jsonl"))
    assert all(synced.index(b) < last_log for b in bodies), "the log synced before a body"
