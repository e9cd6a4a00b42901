"""Concurrency: spills from threads and asyncio at once; processes sharing one session by its lock.

Lock behaviour (documented in docs/reliability.md): a session directory is open in one place at a time.
``Budget.open`` on a session another process (or another open session object) holds raises
``SessionLocked`` at once, naming the holder's pid; with ``lock_timeout=seconds`` it waits for
the holder to close, then opens the session with everything the holder logged.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from benchmarks.soak import partial_bodies, verify_session
from budget import Budget, SessionLocked
from spill import ref_for
from tests.conversations import CONFIG, conversation, digest, result_texts
from tests.strategies import assistant, results

REPO = Path(__file__).resolve().parents[2]
CAP = 2_000
# Staleness off and spills at the caps alone: nothing the session learns from the order its
# requests come in (usage, read-back evidence from kept results) can then change a decision.
NO_STALENESS = CONFIG.model_copy(update={"staleness": False, "fsync": False, "price_spills": False})


def output(i: int) -> str:
    """Tool output number ``i``: big or small; every fifth repeats another (same ref at once)."""
    i = i - i % 5 if i % 5 == 4 else i
    lines = 5 if i % 3 == 0 else 300
    return "".join(f"output {i} line {n}: 构建 🎉\n" for n in range(lines))


def test_wrapped_tools_spill_from_threads_and_asyncio_at_once(
    tmp_path: Path, record_property: Any
) -> None:
    """Eight threads and forty asyncio tasks run wrapped tools while another thread prepares
    and reads back: every envelope's ref reads back its exact output, every body on disk
    matches its hash, and the session resumes with the same bytes."""
    path = tmp_path / "s"
    session = Budget.open(path, {"result_cap": CAP, "preview_chars": 300, "fsync": False})

    @session.wrap_tool(name="bash")
    def bash(i: int) -> str:
        return output(i)

    @session.wrap_tool(name="fetch")
    async def fetch(i: int) -> str:
        await asyncio.sleep(random.random() / 1000)
        return output(i)

    start = threading.Barrier(3)
    got: dict[int, str] = {}
    errors: list[BaseException] = []

    def threads() -> None:
        start.wait()
        with ThreadPoolExecutor(8) as pool:
            for i, text in zip(range(80), pool.map(bash, range(80)), strict=True):
                got[i] = text

    def event_loop() -> None:
        async def main() -> list[str]:
            start.wait()
            return await asyncio.gather(*(fetch(i) for i in range(80, 120)))

        for i, text in enumerate(asyncio.run(main()), 80):
            got[i] = text

    def preparer() -> None:
        start.wait()
        msgs: list[Any] = [{"role": "user", "content": "go"}]
        for n in range(30):
            big = output(500 + n)
            msgs = [*msgs, assistant((f"p{n}", "bash")), results((f"p{n}", big))]
            req = session.prepare(msgs, now=n)
            for d in req.report.decisions:
                if d.ref is not None:
                    assert session.read(d.ref) == big

    def guarded(fn: Any) -> Any:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:
                errors.append(exc)

        return run

    workers = [threading.Thread(target=guarded(f)) for f in (threads, event_loop, preparer)]
    with capture_logs() as logs:
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    assert errors == []
    assert [e for e in logs if e["log_level"] in ("warning", "error")] == []
    spilled = 0
    for i, text in got.items():
        original = output(i)
        if len(original) <= CAP:
            assert text == original
        else:
            assert ref_for(original) in text and session.read(ref_for(original)) == original
            spilled += 1
    history: list[Any] = [{"role": "user", "content": "go"}]
    for i in range(120):
        history += [assistant((f"t{i}", "bash" if i < 80 else "fetch")), results((f"t{i}", got[i]))]
    first = session.prepare(history, now=100)
    assert {d.reason for d in first.report.decisions} <= {"wrapped", "fits"}
    session.close()
    assert partial_bodies(path) == (0, 0)
    with (
        capture_logs() as logs,
        Budget.open(path, {"result_cap": CAP, "preview_chars": 300}) as again,
    ):
        assert digest(again.prepare(history, now=100).messages) == digest(first.messages)
    assert not [e for e in logs if e["event"] == "toolbudget.log.line_skipped"]
    record_property("reliability.concurrency.spills_from_threads_and_tasks", spilled)


def test_prepare_from_threads_and_tasks_gives_the_sequential_copies(tmp_path: Path) -> None:
    """Threads and asyncio tasks preparing prefixes of one conversation in random order each get
    the copy a sequential session makes for that prefix (staleness off, caps only: order cannot
    matter)."""
    msgs, steps = conversation(9, 16)
    with Budget.open(tmp_path / "ref", NO_STALENESS) as ref:
        expected = [digest(ref.prepare(msgs[: s.length], now=s.now).messages) for s in steps]
    session = Budget.open(tmp_path / "s", NO_STALENESS)
    mismatches: list[tuple[int, str]] = []

    def one(j: int) -> None:
        copy = session.prepare(msgs[: steps[j].length], now=steps[j].now).messages
        if digest(copy) != expected[j]:
            mismatches.append((j, "differs"))

    order = [j for j in range(len(steps)) for _ in range(3)]
    random.Random(4).shuffle(order)

    async def tasks() -> None:
        await asyncio.gather(*(asyncio.to_thread(one, j) for j in order[::2]))

    with capture_logs(), ThreadPoolExecutor(6) as pool:
        loop = pool.submit(asyncio.run, tasks())
        list(pool.map(one, order[1::2]))
        loop.result()
    assert mismatches == []
    final = session.prepare(msgs, now=steps[-1].now)
    assert digest(final.messages) == expected[-1]
    session.close()
    assert verify_session(tmp_path / "s", msgs)[2] == 0


HELD = [{"role": "user", "content": "held"}]
HOLDER = """
import sys
from budget import Budget
session = Budget.open(sys.argv[1], {"fsync": False})
session.prepare([{"role": "user", "content": "held"}], now=0)
print("held", flush=True)
sys.stdin.readline()
session.close()
"""


def env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }


@pytest.mark.slow
def test_a_second_process_gets_session_locked_at_once_or_waits(tmp_path: Path) -> None:
    """While another process holds the session, Budget.open raises SessionLocked naming it
    without waiting; with lock_timeout it waits for the holder's close and sees its log."""
    path = tmp_path / "s"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env(),
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        with pytest.raises(SessionLocked, match=f"pid {holder.pid}"):
            Budget.open(path)
        assert time.monotonic() - started < 1
        assert holder.stdin is not None
        threading.Timer(0.3, lambda: (holder.stdin.write("\n"), holder.stdin.flush())).start()  # type: ignore[union-attr]
        started = time.monotonic()
        with Budget.open(path, lock_timeout=60) as session:
            assert time.monotonic() - started >= 0.2
            mine = [
                *HELD,
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "mine"},
            ]
            assert session.prepare(mine, now=1).report.request == 2
    finally:
        holder.kill()
        holder.wait()
        for pipe in (holder.stdin, holder.stdout):
            if pipe is not None:
                pipe.close()


TURN_TAKER = """
import json, sys
from tests.conversations import CONFIG, conversation, digest
from budget import Budget
cfg = CONFIG.model_copy(update={"staleness": False, "fsync": False, "price_spills": False})
msgs, steps = conversation(9, 16)
for j in json.loads(sys.argv[2]):
    with Budget.open(sys.argv[1], cfg, lock_timeout=60) as session:
        copy = session.prepare(msgs[: steps[j].length], now=steps[j].now).messages
    print(json.dumps([j, digest(copy)]), flush=True)
"""


@pytest.mark.slow
def test_processes_taking_turns_on_one_session_keep_it_consistent(tmp_path: Path) -> None:
    """Three processes open, prepare and close one session in turns (waiting on its lock):
    each gets the sequential copy for its prefix, and the log they share has no damaged line."""
    msgs, steps = conversation(9, 16)
    with Budget.open(tmp_path / "ref", NO_STALENESS) as ref:
        expected = [digest(ref.prepare(msgs[: s.length], now=s.now).messages) for s in steps]
    path = tmp_path / "s"
    shares = [list(range(p, len(steps), 3)) * 2 for p in range(3)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", TURN_TAKER, str(path), json.dumps(share)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=env(),
        )
        for share in shares
    ]
    seen = 0
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
        for line in out.splitlines():
            j, got = json.loads(line)
            assert got == expected[j], j
            seen += 1
    assert seen == sum(map(len, shares))
    with capture_logs() as logs, Budget.open(path, NO_STALENESS) as session:
        final = session.prepare(msgs, now=steps[-1].now)
    assert not [e for e in logs if e["event"] == "toolbudget.log.line_skipped"]
    assert digest(final.messages) == expected[-1]
    assert verify_session(path, msgs)[2] == 0
    assert result_texts(final.messages)
