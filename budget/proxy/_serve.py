"""Running the proxy: uvicorn on the settings' host and port."""

from __future__ import annotations

import asyncio
import gc
import os
import socket
from collections.abc import Callable
from pathlib import Path

import uvicorn
from starlette.applications import Starlette

from budget._errors import ConfigError, StoreError
from budget._log import get_logger
from budget.proxy._app import create_app
from budget.proxy._limits import raise_fd_limit
from budget.proxy._settings import ProxySettings
from spill import _fs

__all__ = ["serve"]


def serve(settings: ProxySettings, *, on_ready: Callable[[int], None] | None = None) -> None:
    """Serve until interrupted; ``on_ready`` gets the port once listening (useful with port 0).

    The soft limit on open files is raised to the hard one first (macOS starts processes at
    256): the app keeps as many sessions open as the limit then leaves room for."""
    raise_fd_limit()
    listening = _listen(settings.host, settings.port)
    if not settings.loopback:
        get_logger("toolbudget").warning(
            "toolbudget.proxy.not_loopback",
            host=settings.host,
            note="API keys pass through this proxy: anyone who can reach it can use them",
        )
    app = create_app(settings)  # makes the root
    held = _hold_root(settings.root)
    try:
        _run(settings, app, listening, on_ready)
    finally:
        os.close(held)


def _hold_root(root: Path) -> int:
    """A descriptor of the session root holding an exclusive flock while the proxy serves: a
    second proxy on the same root would find each conversation's session locked by the first and
    pass its requests through unbudgeted."""
    fd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        _fs.lock(fd)
    except BlockingIOError:
        os.close(fd)
        raise StoreError(
            f"another toolbudget proxy serves {root}: stop it, or give this one another --root"
        ) from None
    return fd


def _run(
    settings: ProxySettings,
    app: Starlette,
    listening: list[socket.socket],
    on_ready: Callable[[int], None] | None,
) -> None:
    """uvicorn serving ``app`` on ``listening`` until interrupted."""
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        # uvicorn's own access log would print every path; the proxy's events say what matters.
        access_log=False,
        log_level="warning",
        lifespan="on",
        # An agent's connection stays open between turns: keep it as long as the SDKs do.
        timeout_keep_alive=60,
        # An answer's headers are the upstream's: uvicorn would put its own server and date
        # before them (two of each, "server: cloudflare, uvicorn" to the agent).
        server_header=False,
        date_header=False,
    )
    config.load()
    # Everything loaded so far (the interpreter's, starlette's, httpx's and toolbudget's modules,
    # ~55,000 objects) lives as long as the process: kept out of every garbage collection. A
    # full collection over them took 30-80 ms and came every ~40 requests of a long conversation
    # (parsing a 2 MB body allocates thousands of containers), the proxy's p99 (measured with
    # cProfile and gc.callbacks, issue 33).
    gc.freeze()
    server = uvicorn.Server(config)
    if on_ready is None:
        server.run(sockets=listening)
        return

    async def run() -> None:
        task = asyncio.create_task(server.serve(sockets=listening))
        while not server.started:
            if task.done():
                await task
                return
            await asyncio.sleep(0.01)
        on_ready(server.servers[0].sockets[0].getsockname()[1])
        await task

    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        runner.run(run())


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (the proxy extra's, but on Windows), as uvicorn
    itself picks it: its sockets and callbacks cost less than asyncio's, which a 2 MB body
    crosses twice (the proxy bench, issue 33). None: asyncio's own."""
    try:
        import uvloop  # noqa: PLC0415  (no Windows build: absent there)
    except ImportError:
        return None
    return uvloop.new_event_loop


def _listen(host: str, port: int) -> list[socket.socket]:
    """Sockets listening on ``host``:``port``, one per address it resolves to (``localhost``:
    127.0.0.1 and ::1, as asyncio's own ``create_server`` binds), bound before uvicorn starts: a
    host that does not resolve or a port in use is one ConfigError (uvicorn's own bind exits
    with a traceback).

    Each is made from its address's own protocol (IPPROTO_TCP), as asyncio makes its listeners:
    asyncio sets TCP_NODELAY on an accepted connection only when its listener says TCP, and
    ``socket.create_server``'s says 0. Without it every answer sent in two writes waited for
    the client's delayed ACK: 40 ms a request (the proxy bench's hop alone)."""
    where = f"{host}:{port}"
    try:
        infos = dict.fromkeys(
            (family, kind, proto, address)
            for family, kind, proto, _, address in socket.getaddrinfo(
                host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )
        )
    except OSError as exc:  # socket.gaierror
        raise ConfigError(f"toolbudget proxy cannot listen on {where}: {exc}") from None
    made: list[socket.socket] = []
    try:
        for family, kind, proto, address in infos:
            sock = socket.socket(family, kind, proto)
            made.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:  # beside an IPv4 socket on the same port, as asyncio
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen()
    except OSError as exc:
        for sock in made:
            sock.close()
        raise ConfigError(f"toolbudget proxy cannot listen on {where}: {exc}") from None
    return made
