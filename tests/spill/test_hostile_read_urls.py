"""Findings of a hostile review: a session on object storage reads back as a directory does."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
from typer.testing import CliRunner

from budget import Budget, SessionReader, StoreError
from budget.cli import app

_OUT = "".join(f"row {i}: 😀 中文\r\n" for i in range(4_000))


def _session_at(url: str) -> str:
    """A session at ``url`` holding one spilled output; its ref."""
    messages = [
        {"role": "user", "content": "List the rows."},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t1", "name": "rows", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": _OUT},
            ],
        },
    ]
    with Budget.open(url) as session:
        ref = session.prepare(messages).report.decisions[0].ref
    assert ref is not None
    return ref


@pytest.mark.parametrize("scheme", ["memory", "file"])
def test_toolbudget_read_and_session_reader_take_the_url_budget_open_took(
    tmp_path: Path, scheme: str
) -> None:
    """`toolbudget read URL REF` prints the exact output and SessionReader(URL) reads it back,
    where both took the URL for a local path ('cannot open session directory .../s3:/...')."""
    where = f"/{secrets.token_hex(6)}/s" if scheme == "memory" else f"{tmp_path}/s"
    url = f"{scheme}://{where}"
    ref = _session_at(url)
    result = CliRunner().invoke(app, ["read", url, ref])
    assert result.exit_code == 0, result.output
    assert result.stdout_bytes == _OUT.encode()
    with SessionReader(url) as reader:
        assert reader.read(ref) == _OUT
        assert reader.path == url
        assert reader.log()
        with pytest.raises(StoreError, match="read-only"):
            reader.store.put("x")


def test_a_url_holding_no_session_is_one_error_line(tmp_path: Path) -> None:
    """`toolbudget read` on a URL where no session was written exits 2 with one error line."""
    (tmp_path / "empty").mkdir()
    url = f"file://{tmp_path}/empty"
    result = CliRunner().invoke(app, ["read", url, "0" * 32])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"error: {url} is not a toolbudget session (it has no log objects)"
    ]


def test_reading_a_local_url_with_no_session_creates_nothing(tmp_path: Path) -> None:
    """SessionReader of a file:// URL naming no directory refuses it and leaves no directory
    behind (the store it reads through makes a new local session's directory)."""
    url = f"file://{tmp_path}/absent/session"
    with pytest.raises(StoreError, match="not a toolbudget session"):
        SessionReader(url)
    assert not (tmp_path / "absent").exists()
