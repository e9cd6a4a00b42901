"""What the command line's parts share: help screens that show no type beside a flag, the
duration parser, the one-line error a command exits with, and output that cannot be written
turned into one.

typer 0.29's rich help prints every option's type, a flag's too (``--wide <bool>``, ``--help
<bool>``), where its plain help and click's print none: a flag takes no value, so a type there
reads as if it wanted one. :class:`FlagGroup` (and :class:`FlagCommand` for a one-command app)
give every flag an empty metavar, which the help shows as nothing.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator
from typing import Any, NoReturn

import typer
from typer.core import TyperCommand, TyperGroup, TyperOption

__all__ = ["FlagCommand", "FlagGroup", "duration", "fail", "writing_stdout"]


def _untyped_flags(command: Any, ctx: Any) -> None:
    for param in command.get_params(ctx):
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""


class FlagCommand(TyperCommand):
    """typer's command, whose help shows no type beside a flag."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """The help, each flag without a type."""
        _untyped_flags(self, ctx)
        super().format_help(ctx, formatter)


class FlagGroup(TyperGroup):
    """typer's group, whose help and whose commands' help show no type beside a flag."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """The help, each flag without a type."""
        _untyped_flags(self, ctx)
        super().format_help(ctx, formatter)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """The command named, its flags untyped (a nested group untypes its own commands')."""
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            _untyped_flags(command, ctx)
        return command


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# ASCII digits only: str.isdigit (and \d without re.ASCII) also accept "²", "③" or "٣", which
# float() then refuses or reads otherwise. A bare 0 needs no unit: zero is zero in any.
_DURATION = re.compile(
    r"(?:(?P<n>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?P<unit>[smhd])|0+(?:\.0*)?)", re.ASCII
)


def duration(text: str) -> float:
    """Seconds in ``text`` (``30m``, ``12h``, ``7d``, ``1.5h``, ``0``), else a usage error."""
    found = _DURATION.fullmatch(text)
    if found is None:
        raise typer.BadParameter(f"{text!r:.80} is not a duration like 30m, 12h or 7d")
    if found["unit"] is None:
        return 0.0
    return float(found["n"]) * _UNITS[found["unit"]]


def fail(message: str) -> NoReturn:
    """Exit 2 after ``error: message`` on standard error: one line, no traceback."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


@contextlib.contextmanager
def writing_stdout() -> Iterator[None]:
    """Run the block that prints a command's output, then flush it; a write that fails (a full
    disk, a closed stream) exits 2 with one line saying why, not a traceback."""
    try:
        yield
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:
        raise  # click's own handling: a reader that stopped early (``| head``) is no error
    except OSError as exc:
        _drop_stdout()
        fail(f"cannot write to standard output: {exc.strerror or exc}")


def _drop_stdout() -> None:
    """Descriptor 1 pointed at the null device: the output still buffered would fail again at
    exit, where Python prints a traceback of its own."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
