"""A child process of the object-store crash test: replay the conversation on an FsspecStore and
SIGKILL itself at a numbered object write.

Run as ``python -m tests._s3_crash_child '<json>'`` by ``tests/reliability/test_crash_s3.py``;
the JSON names the session URL, the storage options reaching the test's moto server, the local
cache directory (a fresh one per child: each child is another machine), the request to resume
at, and where to die: ``kill_at`` (the number of the object write, counted from 1 over the
child's PUTs: bodies, log objects, ``session.json``; 0 for never) and ``mode``: ``before`` (the
PUT is never sent) or ``after`` (the PUT was answered 200, nothing after it ran: for a body, the
kill falls between the body and the log object that records it).

It reports on stdout, one JSON object a line: ``start`` and ``done`` (with the request copy's
digest) per request, ``killed`` (the write's kind, the mode and the request), ``final`` (the
final decisions and, for a run without a kill, every write as ``[kind, request]``), ``error``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from benchmarks.soak import _final_decisions
from budget import Budget
from spill import FsspecStore
from tests.conversations import CONFIG, conversation, digest, result_texts

__all__ = ["main"]


def _say(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _kind(key: str) -> str:
    if "/bodies/" in key:
        return "body"
    if "/log/" in key:
        return "log"
    return "meta"


@dataclass
class _Hook:
    """Counts the store's object writes (PUTs) and kills the process at write ``kill_at``."""

    kill_at: int
    mode: str
    request: int = -1
    writes: list[tuple[str, int]] = field(default_factory=list)
    mutex: threading.Lock = field(default_factory=threading.Lock)
    """A group commit sends its bodies from several threads: each write is counted once."""

    def install(self, store: FsspecStore) -> None:
        fs = store._objects.fs
        real = fs.pipe_file

        def pipe_file(path: str, value: bytes, **kwargs: Any) -> Any:
            kind = _kind(str(path))
            with self.mutex:
                self.writes.append((kind, self.request))
                number = len(self.writes)
            if number != self.kill_at:
                return real(path, value, **kwargs)
            if self.mode == "after":
                real(path, value, **kwargs)
            _say({"killed": [kind, self.mode, self.request]})
            os.kill(os.getpid(), signal.SIGKILL)
            return None  # pragma: no cover - the process is gone

        # An attribute of this store's own filesystem instance (skip_instance_cache): the
        # seam of this test, not of the library.
        fs.pipe_file = pipe_file


def main(argv: list[str]) -> int:
    """Replay from ``start`` on the session at ``url``; see the module docstring."""
    args = json.loads(argv[1])
    msgs, steps = conversation(args["seed"], args["rounds"])
    hook = _Hook(kill_at=args["kill_at"], mode=args["mode"])
    store = FsspecStore(args["url"], cache_dir=args["cache"], **args["options"])
    hook.install(store)
    session = Budget(store, CONFIG)
    for i in range(args["start"], len(steps)):
        step = steps[i]
        hook.request = i
        _say({"start": i})
        req = session.prepare(msgs[: step.length], usage=step.usage, now=step.now)
        refs = [d.ref for d in req.report.decisions if d.ref is not None]
        if step.read_back and refs:
            session.handle_read_tool({"ref": refs[0], "grep": "error", "limit": 5})
        _say({"done": i, "digest": digest(req.messages)})
    hook.request = len(steps)
    final = _final_decisions(session, list(result_texts(msgs)))
    session.close()
    _say({"final": final, "writes": hook.writes})
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except Exception as exc:
        _say({"error": f"{type(exc).__name__}: {exc}"})
        sys.exit(1)
