"""Security (issue 33, item 6): keys are forwarded, never logged or stored; session directories
are 0700; the proxy listens on loopback unless told otherwise."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import structlog
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from benchmarks.standin import Served
from budget.proxy import ProxySettings, create_app
from tests.proxy._kit import Stack, anthropic_history

_SECRETS = ("sk-ant-api03-SECRETSECRET", "sk-proj-OPENAISECRET", "sk-ant-oat01-OAUTHSECRET")


def test_keys_reach_the_upstream_but_no_file_or_event_of_the_proxy(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    """Requests on every API, budgeted, passed through, refused and failed, carry API keys and
    an OAuth token: the upstream gets each, and not one file under the session root nor one
    event (structlog or logging) holds any of them."""
    anthropic_key, openai_key, oauth = _SECRETS
    big = anthropic_history(2)
    cases: list[tuple[str, dict[str, str], dict[str, Any] | None]] = [
        ("/v1/messages", {"x-api-key": anthropic_key, "anthropic-version": "v"}, {"messages": big}),
        (
            "/v1/messages",
            {"authorization": f"Bearer {oauth}", "anthropic-version": "v"},
            {"messages": big},
        ),
        (
            "/v1/chat/completions",
            {"authorization": f"Bearer {openai_key}"},
            {"messages": [{"role": "user", "content": "x"}]},
        ),
        (
            "/v1/responses",
            {"authorization": f"Bearer {openai_key}"},
            {"input": [{"role": "user", "content": "x"}]},
        ),
        (
            "/v1/messages",
            {"x-api-key": anthropic_key, "x-standin-status": "400"},
            {"messages": big},
        ),
        ("/v1/messages", {"x-api-key": anthropic_key}, {"messages": "not a list"}),
        ("/v1/models", {"x-api-key": anthropic_key, "anthropic-version": "v"}, None),
    ]
    caplog.set_level(logging.DEBUG)
    with structlog.testing.capture_logs() as events, httpx.Client() as client:
        for url_path, headers, body in cases:
            if body is None:
                client.get(stack.url + url_path, headers=headers)
            else:
                content = orjson.dumps({"model": "claude-sonnet-4-5", **body})
                client.post(stack.url + url_path, content=content, headers=headers)
    upstream_headers = repr([r.headers for r in stack.upstream.received])
    assert all(s in upstream_headers for s in _SECRETS)
    written = [p for p in stack.root.rglob("*") if p.is_file()]
    assert written, "the proxy wrote no session file at all"
    for path in written:
        data = path.read_bytes()
        assert not any(s.encode() in data for s in _SECRETS), path
    logged = repr(events) + caplog.text
    assert events and not any(s in logged for s in _SECRETS)


def test_session_directories_and_their_root_are_private(stack: Stack) -> None:
    """The root and every session directory the proxy creates are mode 0700."""
    body = orjson.dumps({"model": "m", "messages": anthropic_history(1)})
    httpx.post(f"{stack.url}/v1/messages", content=body, headers={"x-api-key": "k"})
    sessions = [p for p in stack.root.iterdir() if p.is_dir()]
    assert sessions
    for path in [stack.root, *sessions]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path


def test_the_proxy_listens_on_loopback_unless_told_otherwise(tmp_path: object) -> None:
    """The default host is 127.0.0.1; loopback hosts are known as such, others are not."""
    assert ProxySettings(root=tmp_path).host == "127.0.0.1"  # type: ignore[arg-type]
    assert ProxySettings(root=tmp_path, host="::1").loopback  # type: ignore[arg-type]
    assert ProxySettings(root=tmp_path, host="localhost").loopback  # type: ignore[arg-type]
    assert not ProxySettings(root=tmp_path, host="0.0.0.0").loopback  # type: ignore[arg-type]


def test_the_command_says_its_loopback_default_and_refuses_a_bad_upstream(
    tmp_path: object, structlog_restored: None
) -> None:
    """``toolbudget proxy --help`` shows 127.0.0.1 as the host; an upstream that is no http(s)
    URL is refused before anything listens (exit 2, the option named as it is typed)."""
    from typer.testing import CliRunner

    from budget.cli import app

    shown = CliRunner().invoke(app, ["proxy", "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0 and "127.0.0.1" in shown.output and "--root" in shown.output
    bad = CliRunner().invoke(
        app, ["proxy", "--root", str(tmp_path), "--anthropic-upstream", "file:///etc/passwd"]
    )
    assert bad.exit_code == 2
    assert "--anthropic-upstream must be an http(s) URL" in bad.output
    port = CliRunner().invoke(app, ["proxy", "--root", str(tmp_path), "--port", "70000"])
    assert port.exit_code == 2 and "--port must be between 0 and 65535" in port.output


def test_an_upstream_cookie_never_goes_with_a_later_request(tmp_path: Path) -> None:
    """An upstream answering with ``Set-Cookie`` (Cloudflare's ``__cf_bm`` on the model APIs)
    gets no cookie back with the next request, another agent's: each request carries the
    headers its agent sent, nothing the proxy kept."""
    cookies: list[str | None] = []

    async def answer(request: Request) -> Response:
        cookies.append(request.headers.get("cookie"))
        response = Response(b"{}", media_type="application/json")
        response.set_cookie("__cf_bm", "agent-a")
        return response

    routes = [Route("/{path:path}", answer, methods=["GET", "POST"])]
    with Served(Starlette(routes=routes)) as up:
        settings = ProxySettings(
            root=tmp_path / "s", anthropic_upstream=up.url, openai_upstream=up.url
        )
        with Served(create_app(settings)) as proxy:
            for agent in ("a", "b"):
                with httpx.Client() as client:  # a client of its own: no jar of the agents'
                    got = client.get(f"{proxy.url}/v1/models", headers={"x-api-key": agent})
                    assert got.headers.get("set-cookie", "").startswith("__cf_bm=agent-a")
    assert cookies == [None, None]


@pytest.mark.parametrize("umask", [0o000, 0o277])
def test_the_root_and_its_missing_parents_are_created_0700_whatever_the_umask(
    tmp_path: Path, umask: int
) -> None:
    """A session root whose parents are missing is created 0700 with each parent, as
    ``Budget.open`` creates a session's parents, under a umask of 000 or 277."""
    root = tmp_path / "a" / "b" / "root"
    old = os.umask(umask)
    try:
        create_app(ProxySettings(root=root))
    finally:
        os.umask(old)
    for path in (tmp_path / "a", tmp_path / "a" / "b", root):
        assert oct(stat.S_IMODE(path.stat().st_mode)) == oct(0o700), path


def test_the_command_refuses_an_empty_root_as_gc_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, structlog_restored: None
) -> None:
    """``toolbudget proxy --root "$UNSET"`` is one ``error:`` line and exit 2, not sessions
    written into the current directory (``toolbudget gc`` refuses the same root)."""
    from typer.testing import CliRunner

    from budget.cli import app

    monkeypatch.chdir(tmp_path)
    got = CliRunner().invoke(app, ["proxy", "--root", "", "--port", "0"])
    assert got.exit_code == 2, got.output
    assert got.output.startswith("error: ") and "current directory" in got.output
    assert list(tmp_path.iterdir()) == []
