"""``python -m benchmarks perf|soak|store-perf|object-store|proxy|synthetic-shape|throughput|tokens``:
the benchmarks' one command line.

Each benchmark module owns its command (``command``, beside its ``main``); this module only
registers them by name, and loads a module when its command is looked up, so
``python -m benchmarks tokens`` does not import the soak or the perf suite. ``python -m
benchmarks.perf`` (and ``.soak``, ``.store_perf``, ``.object_store``, ``.tokens``,
``.throughput``, ``.proxy``) run the same command on its own (``benchmarks/_command.py``), without
importing this module back.
``toolbudget bench`` (the savings comparison users run) lives in ``budget/cli.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer
import typer.main

# typer (0.29) vendors click: its group's methods take and return the vendored click's types.
from typer import _click as click

from budget._typer import FlagCommand, FlagGroup

__all__ = ["COMMANDS", "app", "main"]


def _perf() -> Callable[..., Any]:
    from benchmarks import perf

    return perf.command


def _soak() -> Callable[..., Any]:
    from benchmarks import soak

    return soak.command


def _store_perf() -> Callable[..., Any]:
    from benchmarks import store_perf

    return store_perf.command


def _synthetic_shape() -> Callable[..., Any]:
    from benchmarks import synthetic

    return synthetic.command


def _throughput() -> Callable[..., Any]:
    from benchmarks import throughput

    return throughput.command


def _object_store() -> Callable[..., Any]:
    from benchmarks import object_store

    return object_store.command


def _proxy() -> Callable[..., Any]:
    from benchmarks import proxy

    return proxy.command


def _tokens() -> Callable[..., Any]:
    from benchmarks import tokens

    return tokens.command


COMMANDS: dict[str, Callable[[], Callable[..., Any]]] = {
    "perf": _perf,
    "soak": _soak,
    "store-perf": _store_perf,
    "synthetic-shape": _synthetic_shape,
    "throughput": _throughput,
    "object-store": _object_store,
    "proxy": _proxy,
    "tokens": _tokens,
}
"""The commands by name, as typed after ``python -m benchmarks``: each loads its module's
``command`` (imported only when looked up, not when this module is)."""


class _Commands(FlagGroup):
    """The app's group: its commands come from :data:`COMMANDS`, each loaded when looked up."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """The command names in :data:`COMMANDS`' order."""
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """Command ``cmd_name`` as typer builds it from its module's function (None if unknown)."""
        load = COMMANDS.get(cmd_name)
        if load is None:
            return None
        single = typer.Typer(add_completion=False)
        single.command(cmd_name, cls=FlagCommand)(load())
        command = typer.main.get_command(single)
        command.name = cmd_name
        return command


app = typer.Typer(
    name="python -m benchmarks",
    cls=_Commands,
    help="toolbudget's benchmarks: speed, crash soak, session and object stores, engines, tokens.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _group() -> None:
    """toolbudget's benchmarks: speed, crash soak, session and object stores, engines, tokens."""


def main() -> None:
    """Entry point of ``python -m benchmarks``."""
    app()
