"""A benchmark's command run on its own, for ``python -m benchmarks.<module>``.

Each benchmark module defines its typer ``command`` beside its ``main``; the one command line
(``benchmarks/cli.py``) registers those commands by name, and a module run as a script hands its
own to :func:`run_alone`. So no benchmark module imports the command line back: the imports go
one way, ``benchmarks.cli`` -> the benchmark modules -> this module.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import typer

from budget._typer import FlagCommand

__all__ = ["run_alone"]


def run_alone(command: Callable[..., Any], module: str) -> None:
    """Run ``command`` alone on ``sys.argv``, its usage line naming ``python -m <module>``."""
    single = typer.Typer(add_completion=False)
    single.command(cls=FlagCommand)(command)
    single(args=sys.argv[1:], prog_name=f"python -m {module}")
