"""Crash soak: kill a session with SIGKILL at random points, resume it, and compare every byte.

One conversation of ``--rounds`` rounds (parallel calls, spills by cap and by aggregate, errors,
images, empty outputs, a lone surrogate, the read-back tool, cold-cache pauses that run
staleness batches) is replayed request by request through ``Budget.open(dir)``. Every process
below is forked from this one, so Python and toolbudget are loaded once; each child is still a
separate process with its own memory that dies without any cleanup.

1. *Reference*: a child replays the whole conversation uninterrupted. It records the digest of
   every request copy, the final decisions, and the numbered sequence of filesystem calls the
   store made (each tagged with its kind, the store method it served, and the request).
2. *Trials*: per trial (deterministic per ``--seed``), one to ``--max-crashes`` children in a
   row replay the conversation, each resuming the session the previous one left, and each kills
   itself with SIGKILL at a numbered filesystem call drawn over the reference's calls: ``before``
   the call, ``after`` it, or (for a write) ``torn`` after writing part of its bytes. With
   ``--kill timer`` the parent sends the SIGKILL instead, after a random delay drawn from the
   reference's duration. A resumed child re-prepares the request that was in flight (the agent
   retrying it), then goes on.
3. After each kill, the directory is inspected as the crash left it: no body file under its final
   name may differ from its content hash (a partial file must never look valid).
4. A last child resumes and replays to the end without a kill. Every request copy any child
   produced is compared with the reference, byte for byte. It then checks every logged
   decision's body (present, content hash equal to its ref), that the final decisions equal the
   reference's, and that every tool result of the conversation is recoverable: shown whole, or
   read back exactly by its ref. Anything else counts as *lost*.

The store's filesystem calls are counted through the ``spill._fs`` seam, which the children wrap
(a hook of this harness, not of the library). ``fsync`` calls are counted as kill points but not
performed unless ``--real-fsync``: a killed process loses nothing the page cache holds, so they
only cost time here (power loss is outside what a process kill can test).

The conversation and its digests live with the tests that replay it too
(``tests/conversations.py``), so the soak runs from the repository root::

    python -m benchmarks soak --trials 500 [--seed 1] [--rounds 40] [--max-crashes 3]
                              [--kill ops|timer] [--phase put_many] [--workdir DIR]
                              [--json out.json]
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Final

import structlog
import typer
import xxhash

from budget import Budget
from spill import LocalStore, Store, _fs, ref_for
from spill._packs import PACK_RE, read_index
from tests.conversations import CONFIG, Message, Step, conversation, digest, result_texts

__all__ = [
    "Figures",
    "Kill",
    "command",
    "main",
    "partial_bodies",
    "run_soak",
    "verify_session",
    "verify_store",
]

MODES: Final = ("before", "after", "torn")
_STORE_METHODS: Final = (
    "__init__",
    "put",
    "put_many",
    "get",
    "has",
    "append_log",
    "read_log",
    "read_meta",
    "write_meta",
    "read_sidecar",
    "write_sidecar",
    "close",
)


@dataclass(slots=True)
class Figures:
    """What a soak run did and found. ``lost`` and ``mismatches`` must be zero."""

    trials: int = 0
    rounds: int = 0
    requests_per_run: int = 0
    reference_fs_calls: int = 0
    kills: int = 0
    survived: int = 0
    """Children that finished before their kill point (a later kill point than calls made)."""
    kills_by_op: dict[str, int] = field(default_factory=dict)
    kills_by_mode: dict[str, int] = field(default_factory=dict)
    kills_by_phase: dict[str, int] = field(default_factory=dict)
    kills_in_batch_requests: int = 0
    """Kills during a request whose reference run ran a staleness batch."""
    requests_compared: int = 0
    decisions_verified: int = 0
    """Logged decisions whose body was read back and matched its ref (summed over trials)."""
    results_verified: int = 0
    temp_files_after_kill: int = 0
    damaged_lines_skipped: int = 0
    """Log lines skipped with a warning (torn by a kill) as seen by the children that opened them."""
    partial_files_visible: int = 0
    mismatches: int = 0
    final_decision_mismatches: int = 0
    lost: int = 0
    errors: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0


# -- digests and checks -----------------------------------------------------------------------------


def _final_decisions(session: Budget, ids: list[str]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for cid in ids:
        d = session.decision(cid)
        if d is not None:
            out[cid] = [d.kind, d.reason, d.ref, None if d.text is None else ref_for(d.text)]
    return out


def partial_bodies(path: Path) -> tuple[int, int]:
    """(body files and packs under a final name whose content does not match it, temp files
    present)."""
    if not path.is_dir():
        return 0, 0
    bad = 0
    temps = sum(1 for _ in path.glob(".tmp-*"))
    bodies = path / "bodies"
    entries = sorted(bodies.iterdir()) if bodies.is_dir() else []
    for entry in entries:
        if entry.name.startswith(".tmp-"):
            temps += 1
        elif PACK_RE.match(entry.name):
            bad += not _pack_is_whole(entry)
    for shard in (e for e in entries if e.is_dir()):
        for body in shard.iterdir():
            if body.name.startswith(".tmp-"):
                temps += 1
            elif body.name.endswith(".txt") and (
                xxhash.xxh3_128_hexdigest(body.read_bytes()) != body.name.removesuffix(".txt")
            ):
                bad += 1
    return bad, temps


def _pack_is_whole(pack: Path) -> bool:
    """Whether a pack's index parses and every body it locates matches its ref."""
    data = pack.read_bytes()
    fd = os.open(pack, os.O_RDONLY)
    try:
        where = read_index(fd, pack.name)
    except ValueError:
        return False
    finally:
        os.close(fd)
    return all(
        xxhash.xxh3_128_hexdigest(data[w.offset : w.offset + w.length]) == ref
        for ref, w in where.items()
    )


def verify_session(path: Path, msgs: list[Message]) -> tuple[int, int, int]:
    """Open the session directory's store and check it: see :func:`verify_store`."""
    with LocalStore(path) as store:
        return verify_store(store, msgs)


def verify_store(store: Store, msgs: list[Message]) -> tuple[int, int, int]:
    """Check an open session store: (decisions verified, results verified, lost).

    Every logged decision that points to a body must find it, with the content its ref names;
    every tool result of ``msgs`` must be recoverable: decided ``kept``/``kept_unspillable``
    (shown whole) or its body readable by ref and equal to the original text.
    """
    originals = result_texts(msgs)
    verified = lost = results = 0
    last: dict[str, dict[str, Any]] = {}
    for rec in store.read_log():
        if rec.get("t") != "d":
            continue
        ref = rec.get("ref")
        if ref is not None:
            try:
                body = store.get(ref)
            except Exception:  # a missing or corrupt body is a loss, whatever the error
                lost += 1
                continue
            if ref_for(body) != ref or originals.get(rec["id"]) not in (None, body):
                lost += 1
                continue
            verified += 1
        if last.get(rec["id"], {}).get("kind") != "trimmed":
            last[rec["id"]] = rec
    for cid, text in originals.items():
        final = last.get(cid)
        results += 1
        if final is None or final.get("ref") is None:
            continue  # shown whole in every request copy (checked by the byte comparison)
        try:
            if store.get(final["ref"]) != text:
                lost += 1
        except Exception:
            lost += 1
    return verified, results, lost


# -- the children -------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Hook:
    """Counts the store's filesystem calls in a child; kills the child at call number ``kill_at``.

    Installed only in forked children (each its own process): it wraps the ``spill._fs`` seam,
    and the public LocalStore methods only to tag each call with the method it served.
    """

    kill_at: int
    mode: str
    real_fsync: bool
    record: bool
    out: int = -1
    calls: int = 0
    phase: str = "other"
    request: int = -1
    log: list[tuple[str, str, int]] = field(default_factory=list)
    mutex: threading.Lock = field(default_factory=threading.Lock)
    """A group commit makes its calls from several threads: each is counted once."""

    def install(self, out: int) -> None:
        self.out = out
        for name in _fs.OPS:
            setattr(_fs, name, self._wrap(name, getattr(_fs, name)))
        for method in _STORE_METHODS:
            setattr(LocalStore, method, self._tag(method, getattr(LocalStore, method)))

    def _tag(self, method: str, real: Callable[..., Any]) -> Callable[..., Any]:
        phase = "open" if method == "__init__" else method

        def tagged(*args: Any, **kwargs: Any) -> Any:
            outer, self.phase = self.phase, phase
            try:
                return real(*args, **kwargs)
            finally:
                self.phase = outer

        return tagged

    def _wrap(self, name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with self.mutex:
                self.calls += 1
                number = self.calls
                if self.record:
                    self.log.append((name, self.phase, self.request))
            if number == self.kill_at:
                self._die(name, real, args, kwargs)
            if name == "fsync" and not self.real_fsync:
                return None
            return real(*args, **kwargs)

        return wrapped

    def _die(
        self, name: str, real: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        mode = self.mode
        if mode == "torn" and name != "write":
            mode = "after" if self.kill_at % 2 else "before"
        if mode == "torn":
            fd, data = args
            os.write(fd, bytes(data)[: max(1, len(data) // 3)])
        elif mode == "after" and (name != "fsync" or self.real_fsync):
            real(*args, **kwargs)
        _say(self.out, {"killed": [name, self.phase, mode, self.request]})
        os.kill(os.getpid(), signal.SIGKILL)


def _say(fd: int, obj: Any) -> None:
    data = (json.dumps(obj) + "\n").encode()
    while data:
        data = data[os.write(fd, data) :]


def _count_events() -> Counter[str]:
    """Route structlog events to a counter (children only: each is its own process)."""
    counts: Counter[str] = Counter()

    def count(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> Any:
        counts[str(event.get("event"))] += 1
        raise structlog.DropEvent

    structlog.configure(
        processors=[count],
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),  # not the parent's
        cache_logger_on_first_use=False,
    )
    return counts


@dataclass(frozen=True, slots=True)
class _Replay:
    """A child's work: resume the session at ``path`` and replay the requests from ``start``."""

    path: Path
    msgs: list[Message]
    steps: list[Step]
    start: int
    hook: _Hook
    reference: list[str] | None

    def __call__(self, out: int) -> None:
        counts = _count_events()
        hook = self.hook
        hook.install(out)
        session = Budget.open(self.path, CONFIG)
        _say(out, {"opened": dict(counts)})  # the log was read: damaged lines were reported
        for i in range(self.start, len(self.steps)):
            step = self.steps[i]
            hook.request = i
            _say(out, {"start": i})
            req = session.prepare(self.msgs[: step.length], usage=step.usage, now=step.now)
            got = digest(req.messages)
            if self.reference is not None and got != self.reference[i]:
                _say(out, {"mismatch": i})
            refs = [d.ref for d in req.report.decisions if d.ref is not None]
            if step.read_back and refs:
                session.handle_read_tool({"ref": refs[0], "grep": "error", "limit": 5})
            _say(out, {"done": i, "digest": got, "batch": req.report.staleness_ran})
        hook.request = len(self.steps)
        final = _final_decisions(session, list(result_texts(self.msgs)))
        session.close()
        _say(out, {"final": final, "fs": hook.log if hook.record else None})


def _fork(work: Callable[[int], None]) -> tuple[int, int]:
    """Fork a child running ``work(write_fd)``; return (pid, read_fd)."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(rfd)
        code = 0
        try:
            work(wfd)
        except BaseException as exc:
            code = 1
            _say(wfd, {"error": f"{type(exc).__name__}: {exc}"})
        finally:
            os._exit(code)
    os.close(wfd)
    return pid, rfd


def _collect(pid: int, rfd: int, kill_after: float | None = None) -> tuple[list[Any], int]:
    """Messages a child wrote, and its wait status; SIGKILL it after ``kill_after`` seconds."""
    if kill_after is not None:
        time.sleep(kill_after)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    chunks = []
    with os.fdopen(rfd, "rb") as pipe:
        while chunk := pipe.read(65536):
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    lines = b"".join(chunks).decode().splitlines()
    return [json.loads(line) for line in lines if line.strip()], status


def _run(work: Callable[[int], None], kill_after: float | None = None) -> tuple[list[Any], int]:
    pid, rfd = _fork(work)
    return _collect(pid, rfd, kill_after)


def _killed(status: int) -> bool:
    return os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


# -- the soak -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Reference:
    digests: list[str]
    batches: frozenset[int]
    final: dict[str, list[Any]]
    fs_log: list[tuple[str, str, int]]
    duration_s: float

    def kill_point(
        self, rng: random.Random, trial: int, start: int, only: str | None = None
    ) -> tuple[int, str]:
        """A call number to die at and a mode: a first kill stratified by store phase (or in
        phase ``only``), later ones uniform over the calls a child resuming at ``start`` makes."""
        if start == 0:
            phases = sorted({phase for _, phase, _ in self.fs_log})
            phase = phases[trial % len(phases)] if only is None else only
            calls = [i + 1 for i, e in enumerate(self.fs_log) if e[1] == phase]
            in_batches = [i for i in calls if self.fs_log[i - 1][2] in self.batches]
            if in_batches and trial % 3 == 0:
                # Batches are a few requests of many: a third of the first kills land in one,
                # whatever the seed, so the group commit's crash points are always met.
                calls = in_batches
            writes = [i for i in calls if self.fs_log[i - 1][0] == "write"]
            fsyncs = [i for i in calls if self.fs_log[i - 1][0] == "fsync"]
            if only is not None and fsyncs and trial % 4 == 1:
                # A phase's own soak meets its durability points whatever the seed.
                return rng.choice(fsyncs), rng.choice(MODES[:2])
            if writes and rng.random() < 0.6:
                # Torn writes are what a checksummed log is for: make them common.
                return rng.choice(writes), rng.choice(("torn", "torn", "torn", "after"))
            return rng.choice(calls), rng.choice(MODES[:2])
        remaining = sum(1 for _, _, req in self.fs_log if req < 0 or req >= start)
        return rng.randint(1, remaining), rng.choice(MODES)


def _reference(
    workdir: Path, msgs: list[Message], steps: list[Step], real_fsync: bool
) -> _Reference:
    hook = _Hook(kill_at=0, mode="before", real_fsync=real_fsync, record=True)
    started = time.perf_counter()
    said, status = _run(_Replay(workdir / "reference", msgs, steps, 0, hook, None))
    duration = time.perf_counter() - started
    errors = [m["error"] for m in said if "error" in m]
    if status != 0 or errors:
        raise RuntimeError(f"the reference run failed: {errors or status}")
    [final] = [m for m in said if "final" in m]
    batches = frozenset(m["done"] for m in said if m.get("batch"))
    if not batches:
        raise RuntimeError("the reference run ran no staleness batch: the soak would miss them")
    return _Reference(
        digests=[m["digest"] for m in said if "done" in m],
        batches=batches,
        final=final["final"],
        fs_log=[(str(op), str(phase), int(req)) for op, phase, req in final["fs"]],
        duration_s=duration,
    )


@dataclass(slots=True)
class _Tally:
    by_op: Counter[str] = field(default_factory=Counter)
    by_mode: Counter[str] = field(default_factory=Counter)
    by_phase: Counter[str] = field(default_factory=Counter)


def _account(
    figures: Figures, said: list[Any], label: str, start: int, ref: _Reference
) -> list[int]:
    """Add a child's reports to the figures; return the requests it started."""
    figures.errors += [f"{label}: {m['error']}" for m in said if "error" in m]
    for m in said:
        if "mismatch" in m:
            figures.mismatches += 1
            figures.errors.append(f"{label}: request {m['mismatch']} differs (resumed at {start})")
        elif "done" in m:
            figures.requests_compared += 1
        elif "final" in m:
            figures.final_decision_mismatches += m["final"] != ref.final
        elif "opened" in m:
            figures.damaged_lines_skipped += m["opened"].get("toolbudget.log.line_skipped", 0)
    return [m["start"] for m in said if "start" in m]


def run_soak(
    *,
    trials: int,
    seed: int = 1,
    rounds: int = 40,
    max_crashes: int = 2,
    kill: str = "ops",
    workdir: Path,
    real_fsync: bool = False,
    keep: bool = False,
    phase: str | None = None,
    progress: Callable[[int, Figures], None] | None = None,
) -> Figures:
    """Run ``trials`` crash trials under ``workdir`` and return the figures.

    ``phase`` (a store method, e.g. ``put_many``) draws every first kill among that method's
    calls instead of stratifying over all of them.
    """
    started = time.perf_counter()
    msgs, steps = conversation(seed, rounds)
    figures = Figures(rounds=rounds, requests_per_run=len(steps))
    ref = _reference(workdir, msgs, steps, real_fsync)
    figures.reference_fs_calls = len(ref.fs_log)
    if phase is not None and not any(p == phase for _, p, _ in ref.fs_log):
        raise ValueError(f"the reference run made no filesystem call in phase {phase!r}")
    tally = _Tally()
    for trial in range(trials):
        rng = random.Random(seed * 1_000_003 + trial)
        path = workdir / f"trial-{trial:05d}"
        start = 0
        for crash in range(rng.randint(1, max_crashes)):
            kill_at, mode = ref.kill_point(rng, trial, start, phase)
            if kill == "timer":
                kill_at = 0
            hook = _Hook(kill_at=kill_at, mode=mode, real_fsync=real_fsync, record=False)
            delay = rng.uniform(0, ref.duration_s) if kill == "timer" else None
            said, status = _run(_Replay(path, msgs, steps, start, hook, ref.digests), delay)
            label = f"trial {trial} crash {crash + 1}"
            started_reqs = _account(figures, said, label, start, ref)
            if _killed(status):
                figures.kills += 1
                where = next((m["killed"] for m in said if "killed" in m), None)
                if where is None:  # killed by the parent's timer
                    tally.by_mode["timer"] += 1
                    in_flight = started_reqs[-1] if started_reqs else -1
                else:
                    tally.by_op[where[0]] += 1
                    tally.by_phase[where[1]] += 1
                    tally.by_mode[where[2]] += 1
                    in_flight = where[3]
                figures.kills_in_batch_requests += in_flight in ref.batches
            elif status == 0:
                figures.survived += 1
            else:
                figures.errors.append(f"{label}: the child exited with status {status}")
            if started_reqs:
                start = started_reqs[-1]  # the agent retries the request that was in flight
            bad, temps = partial_bodies(path)
            figures.partial_files_visible += bad
            figures.temp_files_after_kill += temps

        resume = _Hook(kill_at=0, mode="before", real_fsync=real_fsync, record=False)
        said, status = _run(_Replay(path, msgs, steps, start, resume, ref.digests))
        _account(figures, said, f"trial {trial} resume", start, ref)
        if status != 0:
            figures.errors.append(f"trial {trial}: the resuming child exited with status {status}")
        verified, results, lost = verify_session(path, msgs)
        figures.decisions_verified += verified
        figures.results_verified += results
        figures.lost += lost
        figures.trials += 1
        if not keep:
            shutil.rmtree(path, ignore_errors=True)
        if progress is not None:
            progress(trial, figures)

    figures.kills_by_op = dict(tally.by_op.most_common())
    figures.kills_by_mode = dict(tally.by_mode.most_common())
    figures.kills_by_phase = dict(tally.by_phase.most_common())
    figures.elapsed_s = round(time.perf_counter() - started, 3)
    return figures


def _print(figures: Figures) -> None:
    rows = asdict(figures)
    errors = rows.pop("errors")
    width = max(len(k) for k in rows)
    for key, value in rows.items():
        print(f"{key:<{width}}  {value}")
    for line in errors[:20]:
        print("error:", line)


@contextlib.contextmanager
def _workdir(given: str | None) -> Iterator[Path]:
    if given is not None:
        path = Path(given)
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="toolbudget-soak-") as tmp:
        yield Path(tmp)


def main(
    *,
    trials: int = 200,
    seed: int = 1,
    rounds: int = 40,
    max_crashes: int = 3,
    kill: str = "ops",
    workdir: str | None = None,
    real_fsync: bool = False,
    keep: bool = False,
    phase: str | None = None,
    json_path: str | None = None,
    quiet: bool = False,
) -> int:
    """Run the soak and print its figures; 1 if anything was lost or differed, else 0.

    The command line is ``python -m benchmarks soak`` (see ``benchmarks/cli.py``), which checks
    the bounds (``trials``, ``max_crashes`` >= 1, ``rounds`` >= 8) and the ``kill`` mode.
    """
    # The parent's own checks reopen damaged logs: their warnings are counted, not printed.
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR),
        cache_logger_on_first_use=False,
    )

    def progress(trial: int, figures: Figures) -> None:
        if not quiet and (trial + 1) % 25 == 0:
            print(
                f"{trial + 1}/{trials} trials, {figures.kills} kills, "
                f"{figures.mismatches} mismatches, {figures.lost} lost",
                file=sys.stderr,
                flush=True,
            )

    with _workdir(workdir) as directory:
        figures = run_soak(
            trials=trials,
            seed=seed,
            rounds=rounds,
            max_crashes=max_crashes,
            kill=kill,
            workdir=directory,
            real_fsync=real_fsync,
            keep=keep,
            phase=phase,
            progress=progress,
        )
    if json_path is not None:
        Path(json_path).write_text(json.dumps(asdict(figures), indent=2) + "\n")
    if not quiet:
        _print(figures)
    bad = figures.lost + figures.mismatches + figures.final_decision_mismatches
    return 1 if bad or figures.partial_files_visible or figures.errors else 0


class Kill(StrEnum):
    """How the soak kills a session: at a numbered store call, or after a random delay."""

    ops = "ops"
    timer = "timer"


def command(
    trials: Annotated[int, typer.Option(min=1)] = 200,
    seed: Annotated[int, typer.Option()] = 1,
    rounds: Annotated[int, typer.Option(min=8)] = 40,
    max_crashes: Annotated[int, typer.Option(min=1)] = 3,
    kill: Annotated[Kill, typer.Option()] = Kill.ops,
    workdir: Annotated[
        str | None, typer.Option(help="Where sessions go (default: a temp dir).")
    ] = None,
    real_fsync: Annotated[bool, typer.Option(help="Perform fsync calls too.")] = False,
    keep: Annotated[bool, typer.Option(help="Keep each trial's session directory.")] = False,
    phase: Annotated[
        str | None,
        typer.Option(help="Draw each first kill among this store method's calls (e.g. put_many)."),
    ] = None,
    json_path: Annotated[
        str | None, typer.Option("--json", help="Also write the figures to this JSON file.")
    ] = None,
    quiet: Annotated[bool, typer.Option()] = False,
) -> None:
    """Crash soak: SIGKILL a session at random points, resume, compare every byte."""
    code = main(
        trials=trials,
        seed=seed,
        rounds=rounds,
        max_crashes=max_crashes,
        kill=kill.value,
        workdir=workdir,
        real_fsync=real_fsync,
        keep=keep,
        phase=phase,
        json_path=json_path,
        quiet=quiet,
    )
    raise typer.Exit(code)


if __name__ == "__main__":
    from benchmarks._command import run_alone

    run_alone(command, "benchmarks.soak")
