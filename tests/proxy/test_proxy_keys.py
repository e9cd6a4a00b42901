"""Session directory names on a case-insensitive filesystem (macOS, Windows): ids that differ only
by case are distinct sessions, and no id names a path outside the sessions' root."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import orjson
from hypothesis import given
from hypothesis import strategies as st

from budget.proxy import SESSION_HEADER, session_key
from spill._readonly import ReadOnlyStore
from tests.proxy._kit import Stack, anthropic_history

_HEADERS = {"content-type": "application/json", "x-api-key": "k", "anthropic-version": "v"}
_IDS = st.text(min_size=1, max_size=120) | st.from_regex(
    r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}", fullmatch=True
)
"""Any text, and many names a directory could hold as they are."""


def _keys(ident: str) -> list[str]:
    """The directory names ``ident`` gets as a session header and as Claude Code's session id."""
    claude_code = {"metadata": {"user_id": json.dumps({"session_id": ident})}}
    first = [{"role": "user", "content": "hi"}]
    return [
        session_key("anthropic", {SESSION_HEADER: ident}, {}, first),
        session_key("anthropic", {}, claude_code, first),
    ]


@given(_IDS, st.sampled_from([str.lower, str.upper, str.swapcase, str.title]))
def test_ids_that_differ_only_by_case_get_names_that_differ_without_case(
    ident: str, recase: Any
) -> None:
    """``MyTask`` and ``mytask`` (as a header, or as Claude Code's id) name directories whose
    names differ case-insensitively too: on macOS they were one directory."""
    other = recase(ident)
    for mine, theirs in zip(_keys(ident), _keys(other), strict=True):
        if other != ident:
            assert mine.casefold() != theirs.casefold()
        else:
            assert mine == theirs


@given(_IDS)
def test_every_name_is_one_lowercase_component_inside_the_root(ident: str) -> None:
    """Whatever the id (``..``, slashes, NULs, capitals), its name is one path component of
    lowercase ASCII, so a case-insensitive filesystem sees two names as one only when they are
    equal; a lowercase plain id is kept as it is (the name earlier proxies gave it)."""
    for key in _keys(ident):
        assert re.fullmatch(r"[a-z0-9_]+-(h|cc)-[a-z0-9_-][a-z0-9._~-]*", key), key
        assert key not in (".", "..") and "/" not in key and key == key.lower()
    if re.fullmatch(r"[a-z0-9_-][a-z0-9._-]{0,99}", ident):
        assert _keys(ident)[0] == f"anthropic-h-{ident}"


def test_two_conversations_named_apart_by_case_only_get_a_session_each(stack: Stack) -> None:
    """``x-toolbudget-session: Proj`` and ``proj``: two directories, distinct without case, each
    holding only its own conversation's spilled results."""
    for name, tag in (("Proj", "a"), ("proj", "b")):
        body = orjson.dumps({"model": "m", "messages": anthropic_history(1, tag=tag)})
        answer = httpx.post(
            f"{stack.url}/v1/messages", content=body, headers={**_HEADERS, SESSION_HEADER: name}
        )
        assert answer.status_code == 200
    names = sorted(p.name for p in stack.root.iterdir() if p.is_dir())
    assert len(names) == 2 and len({n.casefold() for n in names}) == 2
    assert "anthropic-h-proj" in names
    decided = []
    for name in names:
        with ReadOnlyStore(stack.root / name) as store:
            decided.append(sorted(r["id"] for r in store.read_log() if r.get("t") == "d"))
    assert sorted(decided) == [["a0"], ["b0"]]
