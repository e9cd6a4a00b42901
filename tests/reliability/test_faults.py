"""Every filesystem call site of the store fails in turn, under a whole session (SQLite-style).

A 10-round session (spills by cap and aggregate, staleness batches, read-backs) is run once to
list the store's call sites: each (kind of call, function and line in the LocalStore's modules
``spill/_local.py``, ``spill/_sessiondir.py``, ``spill/_bodies.py`` and ``spill/_group.py``)
reached through the ``spill._fs`` seam, with how often. Then, for every site and every errno of
ENOSPC, EIO and EACCES, the session runs again with that site failing: at its first call, at its
last (later calls reach later phases), or from its first call until the session is closed (the
disk stays full until someone frees it). Each run checks the contract:

- ``Budget.open`` may fail only with a StoreError naming the cause; ``prepare`` never raises;
- nothing is lost: every result is shown whole, or its ref reads back exactly after the run;
- a failed spill keeps the text inline (``kept_unspillable``) on the request it failed on;
- the fault is reported (a StoreError or a warning/error event naming the errno), unless it
  changed nothing at all (every request copy equals the fault-free run's);
- afterwards the session reopens and shows exactly what the faulty run showed last.

The wrapper around ``spill._fs`` is the store's own fault-injection seam: the real store code
runs around it. It skips the fsync system call itself (counted and failable like the rest):
durability against power loss cannot be observed in one process, and fsyncs only cost time here.
"""

from __future__ import annotations

import errno
import functools
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from benchmarks.soak import partial_bodies, verify_session
from budget import Budget, StoreError
from budget._envelope import EMPTY_TEXT
from spill import _fs
from tests.conversations import CONFIG, Step, conversation, digest, result_texts

pytestmark = pytest.mark.slow  # replays a conversation once per failing store call site

SEED, ROUNDS = 6, 10
LOCAL = {
    str(Path(_fs.__file__).with_name(f"{m}.py"))
    for m in ("_local", "_sessiondir", "_bodies", "_group")
}
"""The modules LocalStore is written in: call sites elsewhere are lumped together."""
ERRNOS = {"ENOSPC": errno.ENOSPC, "EIO": errno.EIO, "EACCES": errno.EACCES}
Site = tuple[str, str]


@dataclass
class Injector:
    """Wraps every ``spill._fs`` call: counts it by call site and fails the chosen one."""

    target: Site | None = None
    nth: int = 1
    """The target's first failing call (1: its first call in the session)."""
    err: int = errno.EIO
    persistent: bool = False
    active: bool = True
    seen: Counter[Site] = field(default_factory=Counter)
    fired: int = 0

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for op in _fs.OPS:
            monkeypatch.setattr(_fs, op, self._wrap(op, getattr(_fs, op)))

    def _fails(self, site: Site) -> bool:
        count = self.seen[site]
        if not self.active or site != self.target:
            return False
        return count == self.nth or (self.persistent and count > self.nth)

    def _wrap(self, op: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            caller = sys._getframe(1)
            code = caller.f_code
            where = code.co_name if code.co_filename in LOCAL else "elsewhere"
            site = (op, f"{where}:{caller.f_lineno}")
            self.seen[site] += 1
            if self._fails(site):
                self.fired += 1
                if op == "close":  # the kernel frees the descriptor even when close fails
                    real(*args, **kwargs)
                elif op == "write" and self.err == errno.ENOSPC:  # part written, then full
                    fd, data = args
                    os.write(fd, bytes(data)[: len(data) // 2])
                raise OSError(self.err, os.strerror(self.err))
            if op == "fsync":
                return None
            return real(*args, **kwargs)

        return call


@dataclass
class Run:
    """What one session under a fault did."""

    copies: list[list[Any]] = field(default_factory=list)
    raised: list[str] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    pages: list[str] = field(default_factory=list)


@functools.cache
def script() -> tuple[list[Any], list[Step]]:
    """The conversation every run replays (built once: prepare never changes it)."""
    return conversation(SEED, ROUNDS)


def run_session(path: Path, injector: Injector) -> Run:
    """Open, replay every request (with read-backs), close; the fault as ``injector`` says."""
    msgs, steps = script()
    originals = result_texts(msgs)
    run = Run()
    with capture_logs() as logs:
        try:
            session = Budget.open(path, CONFIG)
        except StoreError as exc:
            run.raised.append(str(exc))
            injector.active = False  # the agent opens again once the fault has passed
            session = Budget.open(path, CONFIG)
        for step in steps:
            before = len(logs)
            req = session.prepare(msgs[: step.length], usage=step.usage, now=step.now)
            run.copies.append(req.messages)
            shown = result_texts(req.messages)
            for event in logs[before:]:
                if event["event"] == "toolbudget.spill.failed":
                    cid = event["call_id"]
                    assert shown[cid] == originals[cid], f"{cid} not kept inline"
                    decision = session.decision(cid)
                    assert decision is not None and decision.kind == "kept_unspillable"
            refs = [d.ref for d in req.report.decisions if d.ref is not None]
            if step.read_back and refs:
                run.pages.append(session.handle_read_tool({"ref": refs[0], "limit": 3}))
        if injector.persistent:
            injector.active = False  # space freed (or the fault repaired) before closing
        try:
            session.close()
        except StoreError as exc:
            run.raised.append(str(exc))
    run.events = [dict(e) for e in logs]
    return run


def check_nothing_lost(path: Path, run: Run) -> list[Any]:
    """Reopen without faults: every result shown whole or read back exactly; the new copy."""
    msgs, steps = script()
    originals = result_texts(msgs)
    last = steps[-1]
    with capture_logs(), Budget.open(path, CONFIG) as session:
        again = session.prepare(msgs[: last.length], usage=last.usage, now=last.now)
        for copy in [*run.copies, again.messages]:
            for cid, text in result_texts(copy).items():
                if text == originals[cid] or (text == EMPTY_TEXT and not originals[cid]):
                    continue
                decision = session.decision(cid)
                assert decision is not None and decision.ref is not None, cid
                assert decision.ref in text
                assert session.read(decision.ref) == originals[cid], cid
    bad, _temps = partial_bodies(path)
    assert bad == 0
    _verified, _results, lost = verify_session(path, msgs)
    assert lost == 0
    return again.messages


@dataclass(frozen=True)
class Clean:
    """A fault-free session: how often it reaches each call site, and its copies' digests."""

    calls: dict[Site, int]
    digests: list[str]


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Clean:
    """The store's call sites a clean session reaches, and its request copies' digests."""
    injector = Injector()
    with pytest.MonkeyPatch.context() as patch:
        injector.install(patch)
        run = run_session(tmp_path_factory.mktemp("clean") / "s", injector)
    assert not [e for e in run.events if e["log_level"] in ("warning", "error")]
    return Clean(dict(injector.seen), [digest(c) for c in run.copies])


WHEN = ("first call", "last call", "until close")
VARIANTS = [(name, when) for name in ERRNOS for when in WHEN]


def faults(clean: Clean, when: str) -> Iterator[tuple[Site, int]]:
    """(site, first failing call) per site: its first call, its last (sites called more than
    once only), or from its first call on."""
    for site, count in sorted(clean.calls.items()):
        if when != "last call":
            yield site, 1
        elif count > 1:
            yield site, count


def test_a_clean_session_reaches_every_kind_of_store_call(clean: Clean) -> None:
    """The session reaches open, write, fsync, rename, mkdir, read, lock (and more) calls."""
    kinds = {op for op, _ in clean.calls}
    assert {"open_fd", "write", "fsync", "rename", "mkdir", "read", "lock", "close"} <= kinds
    assert len(clean.calls) >= 30


@pytest.mark.parametrize(("name", "when"), VARIANTS)
def test_each_store_call_site_failing_loses_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    clean: Clean,
    name: str,
    when: str,
    record_property: Any,
) -> None:
    """With any one call site failing (its first call, its last, or every call until close),
    the session never raises from prepare, keeps failed spills inline, reports the fault,
    loses nothing and resumes showing what it showed."""
    persistent = when == "until close"
    injected: Counter[str] = Counter()
    for n, (site, nth) in enumerate(faults(clean, when)):
        injector = Injector(target=site, nth=nth, err=ERRNOS[name], persistent=persistent)
        where = f"{site} failing with {name} from call {nth} ({when})"
        path = tmp_path / f"s{n}"
        with monkeypatch.context() as patch:
            injector.install(patch)
            try:
                run = run_session(path, injector)
            except BaseException as exc:
                raise AssertionError(f"{where}: {exc!r}") from exc
        if not injector.fired:
            assert persistent, where  # a site only close() reaches: its other runs cover it
            continue
        injected[site[0]] += injector.fired
        for message in run.raised:
            assert f"[{name}]" in message, (where, message)
        reported: list[Any] = run.raised or [
            e
            for e in run.events
            if e["log_level"] in ("warning", "error") and f"[{name}]" in str(e)
        ]
        changed = [digest(c) for c in run.copies] != clean.digests
        assert reported or not changed, f"{where}: the copies changed without any report"
        for page in run.pages:
            assert page.startswith("[toolbudget] ref ") or f"[{name}]" in page, (where, page)
        try:
            again = check_nothing_lost(path, run)
        except AssertionError as exc:
            raise AssertionError(f"{where}: {exc}") from exc
        assert digest(again) == digest(run.copies[-1]), f"{where}: the resumed copy differs"
    assert sum(injected.values()) >= len(clean.calls) // 2
    record_property(f"reliability.faults.{name}.{when.replace(' ', '_')}", dict(injected))
