"""What the proxy's tests share: the running stand-in and proxy, conversations, the library's copy.

Imported by the ``kit`` fixture (tests/proxy/conftest.py) once the ``proxy`` extra is known to be
there.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from benchmarks.standin import Served, StandIn, UsageFor
from budget import Budget
from budget.proxy import ProxySettings, create_app
from tests.strategies import SMALL, big

__all__ = [
    "BUDGET",
    "Stack",
    "anthropic_history",
    "eventually",
    "library_copies",
    "run_proxy",
    "steady_clock",
]

BUDGET: Mapping[str, Any] = {**SMALL.model_dump(), "include_path": True}
"""The sessions' settings in these tests: tests.strategies.SMALL's small limits (a few hundred
lines spill), envelopes naming their file as the proxy's defaults do."""


def eventually(check: Callable[[], Any], timeout_s: float = 10.0) -> Any:
    """``check()`` once it is truthy (the proxy saves a usage after the answer went out), or the
    last value when ``timeout_s`` is over."""
    deadline = time.monotonic() + timeout_s
    while not (value := check()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return value


def steady_clock(start: float = 1_700_000_000.0, step: float = 10.0) -> Callable[[], float]:
    """A clock the proxy calls once a request: ``start``, then ``step`` seconds later each time."""
    ticks = itertools.count()
    return lambda: start + step * next(ticks)


class Stack:
    """A stand-in upstream and the proxy in front of it, each served on a loopback port."""

    def __init__(
        self,
        root: Path,
        *,
        usage_for: UsageFor | None = None,
        clock: Callable[[], float] | None = None,
        budget: Mapping[str, Any] = BUDGET,
    ) -> None:
        self.root = root
        self.upstream = StandIn() if usage_for is None else StandIn(usage_for=usage_for)
        self._up = Served(self.upstream.app())
        settings = ProxySettings(
            root=root,
            anthropic_upstream=self._up.url,
            openai_upstream=self._up.url,
            budget=dict(budget),
        )
        app = create_app(settings, clock=clock or steady_clock())
        try:
            self._proxy = Served(app)
        except BaseException:
            self._up.stop()
            raise
        self.url = self._proxy.url
        self.upstream_url = self._up.url

    def stop(self) -> None:
        """Stop the proxy (its sessions closed), then the stand-in."""
        try:
            self._proxy.stop()
        finally:
            self._up.stop()

    def __enter__(self) -> Stack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def sent(self, path: str) -> list[Any]:
        """The JSON bodies the upstream received on ``path``, in order."""
        return [orjson.loads(b) for b in self.upstream.bodies(path)]


def anthropic_history(rounds: int, *, lines: int = 150, tag: str = "r") -> list[dict[str, Any]]:
    """A user question, then ``rounds`` tool calls each answered by ``lines`` lines of output
    (over SMALL's cap from about 50 lines: each one spills)."""
    history: list[dict[str, Any]] = [{"role": "user", "content": f"Investigate {tag}."}]
    for i in range(rounds):
        call = {"type": "tool_use", "id": f"{tag}{i}", "name": "Bash", "input": {"command": "ls"}}
        history.append({"role": "assistant", "content": [call]})
        out = {
            "type": "tool_result",
            "tool_use_id": f"{tag}{i}",
            "content": big(lines, f"{tag}{i}"),
        }
        history.append({"role": "user", "content": [out]})
    return history


def library_copies(
    path: Path,
    histories: Iterator[list[Any]] | list[list[Any]],
    *,
    fmt: str,
    usages: list[Mapping[str, Any] | None] | None = None,
    clock: Callable[[], float] | None = None,
    budget: Mapping[str, Any] = BUDGET,
    model: str | None = None,
) -> list[list[Any]]:
    """The request copies the library makes of ``histories`` in one session at ``path``, each
    prepared with the usage before it (``usages[i]`` for request ``i``) at the clock's time."""
    tick = clock or steady_clock()
    settings = dict(budget)
    if model is not None:
        settings["model"] = model
    copies = []
    with Budget.open(path, settings, format=fmt) as session:
        for i, history in enumerate(histories):
            usage = usages[i] if usages is not None else None
            copies.append(session.prepare(history, usage=usage, now=tick()).messages)
    return copies


def run_proxy(
    root: Path, upstream: str, env: Mapping[str, str] | None = None
) -> tuple[subprocess.Popen[str], str]:
    """``toolbudget proxy`` in a child process (default host, a free port, both upstreams
    ``upstream``, ``env`` added to the environment), and the URL it says it listens on."""
    cmd = [sys.executable, "-c", "from budget.cli import main; main()", "proxy"]
    cmd += ["--root", str(root), "--port", "0"]
    cmd += ["--anthropic-upstream", upstream, "--openai-upstream", upstream]
    repo = str(Path(__file__).resolve().parents[2])
    child = subprocess.Popen(
        cmd,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": repo, **(env or {})},
    )
    assert child.stderr is not None
    line = child.stderr.readline()
    found = re.search(r"on (http://127\.0\.0\.1:\d+) ", line)
    if found is None:
        child.kill()
        raise AssertionError(f"the proxy did not start: {line}{child.stderr.read()}")
    # Its later events are drained, never read: a talkative proxy would fill the pipe and stall.
    threading.Thread(target=child.stderr.read, daemon=True).start()
    return child, found.group(1)
