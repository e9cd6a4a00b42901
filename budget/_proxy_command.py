"""``toolbudget proxy``: the command, added to ``budget.cli``'s app by :func:`with_proxy`.

It lives apart from ``budget/cli.py`` (which keeps its size target) and from ``budget/proxy/``
(whose package imports the ``[proxy]`` extra's stack): the extra is imported only when the command
runs, so ``toolbudget --help`` works without it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from budget._errors import BudgetError
from budget._typer import fail
from spill._paths import refuse_current_dir

__all__ = ["proxy", "with_proxy"]


_OPTIONS = re.compile(r"^(anthropic_upstream|openai_upstream|port)\b")
"""The settings the command's options set, as :class:`budget.proxy.ProxySettings` names them in
its messages: on the command line they are the options (``--anthropic-upstream``)."""


def _as_option(message: str) -> str:
    """``message`` naming the command-line option where it names a setting one sets."""
    return _OPTIONS.sub(lambda m: "--" + m[1].replace("_", "-"), message)


def proxy(
    root: Annotated[Path, typer.Option(help="Where the session directories go.")] = Path(
        "~/.toolbudget/proxy"
    ),
    host: Annotated[str, typer.Option(help="Address to listen on (loopback by default).")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free one).")] = 8788,
    anthropic_upstream: Annotated[
        str | None, typer.Option(help="Where Anthropic requests go.")
    ] = None,
    openai_upstream: Annotated[str | None, typer.Option(help="Where OpenAI requests go.")] = None,
) -> None:
    """Run toolbudget between an agent and its model API (docs/proxy.md; the proxy extra)."""
    try:  # an unset variable would put the sessions in the current directory, as gc refuses
        refuse_current_dir(root, "session root", "for the sessions", "sessions")
    except BudgetError as exc:
        fail(str(exc))
    try:
        from budget.proxy._cli import run  # noqa: PLC0415
    except ImportError as exc:  # the extra is not installed
        fail(f"toolbudget proxy needs the proxy extra: pip install 'toolbudget[proxy]' ({exc})")
    try:
        run(root, host, port, anthropic_upstream, openai_upstream)
    except BudgetError as exc:
        fail(_as_option(str(exc)))


def with_proxy(app: typer.Typer) -> typer.Typer:
    """``app`` with the ``proxy`` command."""
    app.command("proxy")(proxy)
    return app
