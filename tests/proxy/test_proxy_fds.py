"""Open files against a low ``ulimit -n`` (macOS's default is 256): what an idle session holds,
the soft limit raised at startup, and the open sessions capped where it cannot be."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from budget.proxy import SESSION_HEADER
from tests.proxy._kit import BUDGET, Stack, anthropic_history

_REPO = Path(__file__).resolve().parents[2]
_HEADERS = {"content-type": "application/json", "x-api-key": "k", "anthropic-version": "v"}


def _open_fds(under: Path) -> int:
    """Descriptors open in this process on ``under`` and what it holds, where /proc tells what
    each names (else every descriptor): another test's proxy closing its sessions meanwhile, or
    this proxy's pool opening one more upstream connection, is not what a session holds."""
    proc = Path("/proc/self/fd")
    if not proc.is_dir():
        return len(os.listdir("/dev/fd"))
    root, held = str(under.resolve()), 0
    for name in os.listdir(proc):
        try:
            target = os.readlink(proc / name)
        except OSError:  # closed meanwhile (the listing's own descriptor among them)
            continue
        held += target == root or target.startswith(root + os.sep)
    return held


def test_an_idle_session_holds_the_descriptors_the_proxy_counts_on(stack: Stack) -> None:
    """Ten sessions opened and left idle hold ``FDS_PER_SESSION`` descriptors each (the session
    directory, its lock, ``bodies/``, the decision log), as the open sessions' cap assumes."""
    from budget.proxy._limits import FDS_PER_SESSION

    with httpx.Client() as client:
        client.get(f"{stack.url}/v1/models", headers=_HEADERS)  # the connections, kept alive
        before = _open_fds(stack.root)
        for n in range(10):
            body = orjson.dumps({"model": "m", "messages": anthropic_history(1, tag=f"t{n}")})
            headers = {**_HEADERS, SESSION_HEADER: f"s{n}"}
            client.post(f"{stack.url}/v1/messages", content=body, headers=headers)
        assert len([p for p in stack.root.iterdir() if p.is_dir()]) == 10
        held = _held(stack.root) - before
    assert held == 10 * FDS_PER_SESSION


def _held(root: Path, samples: int = 20) -> int:
    """The descriptors held on ``root``, as the fewest of ``samples`` counts 10 ms apart: the
    deferred fsyncs hold a duplicate of a body's or a directory's descriptor until the sync
    thread runs them, after the request is answered (41 against 40 under load), which an idle
    session does not hold; a descriptor held stays in every count."""
    counts = []
    for _ in range(samples):
        counts.append(_open_fds(root))
        time.sleep(0.01)
    return min(counts)


_CHILD = """
import json, resource, sys, threading
from pathlib import Path

import httpx, orjson, structlog

soft, hard, root, sessions, budget = sys.argv[1:]
resource.setrlimit(resource.RLIMIT_NOFILE, (int(soft), int(hard)))

from benchmarks.standin import Served, StandIn
from budget.proxy import ProxySettings, serve

standin = StandIn()
up = Served(standin.app())
settings = ProxySettings(
    root=Path(root), port=0, anthropic_upstream=up.url, openai_upstream=up.url,
    budget=json.loads(budget),
)
ports = []
ready = threading.Event()
with structlog.testing.capture_logs() as events:
    threading.Thread(
        target=serve, args=(settings,), kwargs={"on_ready": lambda p: (ports.append(p), ready.set())},
        daemon=True,
    ).start()
    assert ready.wait(60)
    limits = resource.getrlimit(resource.RLIMIT_NOFILE)
    statuses = []
    with httpx.Client(timeout=60) as client:
        for n in range(int(sessions)):
            lines = "".join(f"line {i} of output {n}\\n" for i in range(150))
            history = [
                {"role": "user", "content": f"Investigate {n}."},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": f"t{n}", "content": lines},
                ]},
            ]
            answer = client.post(
                f"http://127.0.0.1:{ports[0]}/v1/messages",
                content=orjson.dumps({"model": "m", "messages": history}),
                headers={"content-type": "application/json", "x-api-key": "k",
                         "x-toolbudget-session": f"s{n}"},
            )
            statuses.append(answer.status_code)
sent = [orjson.loads(b)["messages"][2]["content"][0]["content"] for b in standin.bodies("/v1/messages")]
print(json.dumps({
    "limits": limits,
    "statuses": statuses,
    "budgeted": sum(s.startswith("[toolbudget]") for s in sent),
    "events": [
        {k: v for k, v in e.items() if k in ("event", "reason", "error", "soft", "hard", "max_open")}
        for e in events
        if e["event"] in ("toolbudget.proxy.passthrough", "toolbudget.proxy.fd_limit")
    ],
}), flush=True)
import os
os._exit(0)
"""


def _child(tmp_path: Path, soft: int, hard: int, sessions: int) -> dict[str, Any]:
    """``toolbudget proxy``'s ``serve`` in a child process whose open-file limit is
    ``soft``/``hard``, a stand-in upstream beside it, one request for each of ``sessions``
    conversations (each its own session); what it saw."""
    env = {**os.environ, "PYTHONPATH": str(_REPO)}
    args = [str(soft), str(hard), str(tmp_path / "sessions"), str(sessions), json.dumps(BUDGET)]
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, *args],
        capture_output=True,
        text=True,
        cwd=_REPO,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.skipif(sys.platform == "win32", reason="no RLIMIT_NOFILE")
def test_sixty_sessions_under_a_limit_of_192_that_cannot_be_raised_are_all_budgeted(
    kit: Any, tmp_path: Path
) -> None:
    """With soft and hard limits of 192 (room for ~40 sessions' descriptors), 60 conversations
    one after the other are each budgeted, none passed through for want of descriptors: the
    proxy keeps at most 16 sessions open, says so once, and reopens a closed one on demand."""
    got = _child(tmp_path, 192, 192, 60)
    assert got["limits"] == [192, 192]
    assert got["statuses"] == [200] * 60
    assert got["budgeted"] == 60
    assert got["events"] == [
        {"event": "toolbudget.proxy.fd_limit", "soft": 192, "hard": 192, "max_open": 16}
    ]


@pytest.mark.skipif(sys.platform == "win32", reason="no RLIMIT_NOFILE")
def test_the_soft_limit_is_raised_to_the_hard_one_at_startup(kit: Any, tmp_path: Path) -> None:
    """Started with a soft limit of 192 under a hard one of 4096, the proxy raises its soft
    limit to 4096 before serving, and caps nothing (no event)."""
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 4096:
        pytest.skip(f"the hard limit here is {hard}")
    got = _child(tmp_path, 192, 4096, 3)
    assert got["limits"] == [4096, 4096]
    assert got["statuses"] == [200] * 3 and got["budgeted"] == 3
    assert got["events"] == []
