"""Session and tool names holding every glob and regex metacharacter, on the local store and the
object store alike (issue 31): a name is never a pattern.

A session so named spills, logs, reads back and resumes byte-identical through a Budget whose
tool is so named too; collecting it when expired leaves alone the live sessions its name
matches as a glob.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from budget import Budget, ConfigError, StoreError
from spill import FsspecStore, LocalStore, Store, gc_sessions
from tests._s3 import MotoS3

# Each name beside a live session its name matches read as a glob (or, for the last, a regex).
LOOKALIKES = {
    "run[1]": "run1",
    "a?": "ab",
    "x*": "xyz",
    "[!a]b": "bb",
    "{c,d}": "c",
    "all *?[]{}!^$.+()|\\~": "all x",
    "re.+(x)|y^$": "reZZx",
}
TOOL = "grep[.*]?(x)|{a,b}^$\\+!~"
BIG = "a line of a big tool output\n" * 4000

Opener = Callable[[str], Store]
Collector = Callable[[float], list[str]]


def _messages() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": TOOL, "input": {"q": ".*"}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": BIG}]},
    ]


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.slow)])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Opener, Collector]:
    """An opener of sessions by name under one fresh root, and that root's gc, on one store."""
    if request.param == "local":
        root = tmp_path / "sessions"
        root.mkdir()

        def open_local(name: str) -> Store:
            return LocalStore(root / name)

        def gc_local(older_than_s: float) -> list[str]:
            return [p.name for p in gc_sessions(root, older_than_s=older_than_s)]

        return open_local, gc_local
    s3: MotoS3 = request.getfixturevalue("moto_s3")
    s3.make_bucket("names")
    url = f"s3://names/{secrets.token_hex(8)}"

    def open_s3(name: str) -> Store:
        return FsspecStore(
            f"{url}/{name}", cache_dir=tmp_path / secrets.token_hex(4), **s3.options()
        )

    def gc_s3(older_than_s: float) -> list[str]:
        removed = FsspecStore.gc_sessions(url, older_than_s=older_than_s, **s3.options())
        return [u.rsplit("/", 1)[-1] for u in removed]

    return open_s3, gc_s3


@pytest.mark.parametrize("name", list(LOOKALIKES))
def test_a_session_and_tool_named_with_metacharacters_spill_read_back_and_resume(
    stores: tuple[Opener, Collector], name: str
) -> None:
    """A session named ``name`` beside its look-alike: the Budget spills the metacharacter-named
    tool's output, reads it back by its read tool, and a resume sends the same bytes; the
    look-alike's log is untouched."""
    open_store, _ = stores
    with Budget(open_store(LOOKALIKES[name])) as other:
        other.prepare([{"role": "user", "content": "other"}])
    with Budget(open_store(name)) as session:
        first = session.prepare(_messages())
        [decision] = first.report.decisions
        assert decision.kind == "spilled" and decision.ref is not None
        assert session.read(decision.ref) == BIG
        page = session.handle_read_tool({"ref": decision.ref, "limit": 1})
        assert "lines 1-1 of 4000" in page and "a line of a big tool output" in page
    with open_store(name) as store:  # its own log, not the look-alike's
        assert [r["id"] for r in store.read_log() if r.get("t") == "d"] == ["t1"]
    with Budget(open_store(name)) as again:
        assert again.prepare(_messages()).messages == first.messages
        assert again.read(decision.ref) == BIG
    with open_store(LOOKALIKES[name]) as store:
        assert all(r.get("id") != "t1" for r in store.read_log())


def test_collecting_metacharacter_named_sessions_spares_their_lookalikes(
    stores: tuple[Opener, Collector],
) -> None:
    """Every metacharacter-named session, expired, is collected; every live look-alike keeps
    its log, metadata and body."""
    open_store, collect = stores
    for name in LOOKALIKES:
        with open_store(name) as store:
            store.write_meta({"name": name})
            store.append_log([{"name": name, "ref": store.put(f"{name} body " * 40)}])
    time.sleep(3)  # whole-second modification times on S3: the live ones are clearly younger
    live_from = time.time()
    for name in LOOKALIKES.values():
        with open_store(name) as store:
            store.write_meta({"name": name})
            store.append_log([{"name": name, "ref": store.put(f"{name} body " * 40)}])
    # The threshold counts from the first live write, however long the writes took on a loaded
    # machine: a live object is at most a second older than that (whole-second times), an
    # expired one at least two.
    assert sorted(collect(time.time() - live_from + 1.5)) == sorted(LOOKALIKES)
    for name in LOOKALIKES.values():
        with open_store(name) as store:
            [record] = store.read_log()
            assert record["name"] == name and store.read_meta() == {"name": name}
            assert store.get(record["ref"]) == f"{name} body " * 40


@pytest.mark.parametrize("url", ["s3://", "memory://", "file://", "memory:///"])
def test_a_url_with_nothing_after_its_scheme_is_refused(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``s3://`` (a bucket variable left empty) is a ConfigError naming it, and leaves no local
    ``s3:`` directory behind (the stripped URL was a plain relative path)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="needs a location after the scheme"):
        Budget.open(url)
    assert list(tmp_path.iterdir()) == []


def test_a_url_fsspec_cannot_open_is_a_store_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``zip://x`` from a directory (fsspec opens the archive at once, and meets a directory) is
    a StoreError naming the URL, not a raw IsADirectoryError."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match="cannot open zip://x"):
        Budget.open("zip://x")


def test_gc_of_a_url_with_nothing_after_its_scheme_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``gc_sessions("s3://")`` is a ConfigError, not a collection of a local ``s3:`` directory
    that happens to hold sessions."""
    monkeypatch.chdir(tmp_path)
    session = tmp_path / "s3:" / "sess"
    (session / "log").mkdir(parents=True)
    (session / "session.json").write_text("{}")
    with pytest.raises(ConfigError, match="needs a location after the scheme"):
        FsspecStore.gc_sessions("s3://", older_than_s=0)
    assert (session / "session.json").exists()
