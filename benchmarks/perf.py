"""Performance of toolbudget against the targets of docs/performance.md, side by side with LangChain.

Each benchmark returns :class:`Figure` rows (ours, the peer where there is one, their ratio, the
target and whether it is met); :func:`run` runs them all and :func:`main` prints the table and
writes JSON. It reports; it never fails on a missed target.

How things are timed, so the figures can be read on a shared machine:

* CPU-bound figures (``prepare``, LangChain's middleware, hashing and previews) are the CPU time
  of the calling thread (``time.thread_time_ns``), so other processes on the machine do not
  count; the cyclic garbage collector is paused while they are timed (as ``timeit`` does), for
  ours and the peer alike. Wall-clock medians are in the JSON too.
* Figures that wait on the disk (spills, resume) are wall-clock time.
* Ratios are taken within one run, with the two sides interleaved, so machine load drifts
  affect both.

Run from the repository root::

    python -m benchmarks perf [--quick] [--json FILE] [--traces DIR] [--dir DIR] [--base DIR]

``--quick`` runs every benchmark at reduced sizes (under a minute) for smoke use; its figures are
noisier and some are below the sizes the targets name. ``--dir`` picks the filesystem the disk
benchmarks use (default: the system temporary directory). ``--base`` names another checkout (a
base commit's ``git worktree``) to time ``prepare`` +1 round against, interleaved
(:mod:`benchmarks.perf_base`).
"""

from __future__ import annotations

import gc
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from benchmarks import perf_base
from budget import Budget, Prepared
from budget._envelope import envelope
from budget.previews import PREVIEW_VERSION
from budget.tokens._estimates_cache import SIDECAR
from spill import LocalStore, ref_for

__all__ = [
    "Figure",
    "Sizes",
    "bench_against_base",
    "bench_batch_spill",
    "bench_langchain",
    "bench_memory",
    "bench_new_output",
    "bench_prepare_scaling",
    "bench_resume",
    "bench_spill",
    "bench_trace_replay",
    "command",
    "format_table",
    "main",
    "run",
]

Message = dict[str, Any]
_T = TypeVar("_T")
_MB = 1_000_000
_BODY_SUFFIX = ".txt"
_PACK_SUFFIX = ".pack"
"""How the local store names body files (``spill._sessiondir``): what the resume check watches for."""


@dataclass(frozen=True, slots=True)
class Figure:
    """One row of the table: our figure, the peer's, their ratio, the target and the verdict."""

    name: str
    ours: float
    unit: str
    peer: float | None = None
    peer_name: str | None = None
    ratio: float | None = None
    """How many times better ours is than the peer (or than the reference in ``note``)."""
    target: str = ""
    met: bool | None = None
    """None where there is no target (a figure reported for context)."""
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    """Everything else measured (wall-clock medians, counts), for the JSON."""


@dataclass(frozen=True, slots=True)
class Sizes:
    """How big each benchmark runs: :meth:`full` for the targets, :meth:`quick` for smoke runs."""

    rounds: tuple[int, ...] = (50, 200, 800, 3200)
    requests: int = 300
    result_chars: int = 8_000
    langchain_rounds: int = 800
    langchain_calls: int = 7
    output_bytes: int = 10 * _MB
    output_repeats: int = 5
    spill_repeats: int = 5
    batch_rounds: int = 800
    batch_chars: int = 8_000
    """Results this long are trimmed by a staleness batch (shorter ones may be kept)."""
    batch_repeats: int = 7
    resume_decisions: int = 10_000
    resume_repeats: int = 7
    memory_bytes: int = 100 * _MB
    trace_limit: int | None = None
    """Replay at most this many traces (None: every trace in the directory)."""

    @classmethod
    def full(cls) -> Sizes:
        """The sizes the targets name (docs/performance.md)."""
        return cls()

    @classmethod
    def quick(cls) -> Sizes:
        """Smaller sizes and fewer repeats: every benchmark in well under a minute."""
        return cls(
            rounds=(50, 200, 800, 3200),
            requests=40,
            langchain_calls=3,
            output_repeats=3,
            spill_repeats=3,
            batch_rounds=200,
            batch_repeats=3,
            resume_decisions=4_000,
            resume_repeats=3,
            memory_bytes=20 * _MB,
            trace_limit=8,
        )


# -- synthetic conversations ----------------------------------------------------------------------

_WORDS = (
    "collected", "passed", "failed", "warning:", "error", "src/app/models.py", "line", "def",
    "return", "self.assertEqual(", "TypeError", "None", "{", "}", "[", "]", "==", "0.25s",
)  # fmt: skip


_WORD_LINES = tuple(
    " ".join(_WORDS[(start + j) % len(_WORDS)] for j in range(9)) for start in range(len(_WORDS))
)
"""The nine words a line of :func:`_result_text` holds, by the index of its first word."""


def _result_text(seed: int, chars: int) -> str:
    """A deterministic log-like tool output of exactly ``chars`` characters."""
    parts: list[str] = []
    size, i = 0, 0
    while size < chars:
        words = _WORD_LINES[(seed * 7 + i * 3) % len(_WORDS)]
        line = f"{i + 1:5d} {words} ({seed}:{i})\n"
        parts.append(line)
        size += len(line)
        i += 1
    return "".join(parts)[:chars]


def _round(r: int, text: str, tool: str = "bash") -> tuple[Message, Message]:
    """One round: an assistant message calling a tool, and the user message with its result."""
    call_id = f"toolu_{r:08d}"
    call: Message = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": f"Step {r}: running the next command."},
            {"type": "tool_use", "id": call_id, "name": tool, "input": {"command": f"run {r}"}},
        ],
    }
    result: Message = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": call_id, "content": text}],
    }
    return call, result


def _conversation(rounds: int, result_chars: int, first: int = 0) -> list[Message]:
    """A task prompt and ``rounds`` rounds whose results are ``result_chars`` characters each."""
    out: list[Message] = [{"role": "user", "content": "Please fix the failing test suite."}]
    for r in range(first, first + rounds):
        out.extend(_round(r, _result_text(r, result_chars)))
    return out


# -- timing helpers -------------------------------------------------------------------------------


class _Clock:
    """CPU time of this thread and wall time of one call, in nanoseconds."""

    __slots__ = ("cpu", "wall")

    def __init__(self) -> None:
        self.cpu: list[int] = []
        self.wall: list[int] = []

    def time(self, call: Callable[[], _T]) -> _T:
        c, w = time.thread_time_ns(), time.perf_counter_ns()
        out = call()
        self.wall.append(time.perf_counter_ns() - w)
        self.cpu.append(time.thread_time_ns() - c)
        return out

    def median_cpu_us(self) -> float:
        return statistics.median(self.cpu) / 1e3

    def median_wall_us(self) -> float:
        return statistics.median(self.wall) / 1e3


class _NoGC:
    """Pause the cyclic collector (after a full collection) while a timed loop runs."""

    def __enter__(self) -> None:
        gc.collect()
        self._was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self._was:
            gc.enable()


def _spread(ns: Sequence[int]) -> float:
    """Interquartile range over the median: how noisy a set of timings is."""
    if len(ns) < 4:
        return 0.0
    q = statistics.quantiles(ns, n=4)
    return (q[2] - q[0]) / statistics.median(ns)


# -- 1. prepare() cost against history length ----------------------------------------------------


@dataclass(slots=True)
class _Slot:
    """A warm session on one growing history (an agent's list), and the rounds still to add."""

    session: Budget
    live: list[Message]
    pending: Iterator[tuple[Message, Message]]
    fresh_list: bool = False

    def step(self) -> Callable[[], Prepared]:
        call, result = next(self.pending)
        self.live.append(call)
        self.live.append(result)
        history = list(self.live) if self.fresh_list else self.live
        return lambda: self.session.prepare(history, now=0.0)


def _warm_slot(rounds: int, requests: int, result_chars: int, *, fresh_list: bool) -> _Slot:
    """A session that has budgeted ``rounds`` rounds, then a few more (its first trim batch)."""
    warm = 3
    live = _conversation(rounds, result_chars)
    session = Budget.in_memory()
    session.prepare(live, now=0.0)
    extra = (
        _round(r, _result_text(r, result_chars)) for r in range(rounds, rounds + warm + requests)
    )
    for _ in range(warm):
        call, result = next(extra)
        live += [call, result]
        session.prepare(live, now=0.0)
    return _Slot(session, live, extra, fresh_list)


def bench_prepare_scaling(
    rounds: Sequence[int] = (50, 200, 800, 3200),
    requests: int = 120,
    result_chars: int = 8_000,
    *,
    fresh_list_at: int | None = None,
) -> list[Figure]:
    """``prepare()`` for a request adding one round to a warm history, at several lengths.

    Each history is the agent's one list, appended to between requests (the O(1) prefix check
    applies). A history of N rounds is measured over at most N/4 requests per session (more
    sessions for short histories), so it stays within 25% of N while measured. Sizes are
    interleaved request by request. The figure is the median over requests that ran no
    staleness batch (the batch's cost depends on how much it trims, and long histories are
    under pressure more often); batch requests are counted and timed apart in ``extra``.
    ``fresh_list_at`` adds a row where a new list is passed on each request (the full prefix
    comparison, by identity at C speed). The last row times copying the request list at the
    longest history: the one step proportional to the history (the request copy is a new list).
    """
    plan: list[tuple[str, int, bool]] = [(f"{n:,} rounds", n, False) for n in rounds]
    if fresh_list_at is not None:
        plan.append((f"{fresh_list_at:,} rounds, new list each request", fresh_list_at, True))
    slots: dict[str, list[_Slot]] = {}
    for label, n, fresh in plan:
        per = max(1, min(requests, n // 4))
        slots[label] = [
            _warm_slot(n, per, result_chars, fresh_list=fresh)
            for _ in range(math.ceil(requests / per))
        ]
    plain = {label: _Clock() for label, _, _ in plan}
    batch = {label: _Clock() for label, _, _ in plan}
    longest = slots[plan[len(rounds) - 1][0]][0]
    copy = _Clock()
    with _NoGC():
        for i in range(requests):
            for label, n, _ in plan:
                per = max(1, min(requests, n // 4))
                slot = slots[label][i // per]
                call = slot.step()
                c, w = time.thread_time_ns(), time.perf_counter_ns()
                prepared = call()
                wall, cpu = time.perf_counter_ns() - w, time.thread_time_ns() - c
                clock = batch[label] if prepared.report.staleness_ran else plain[label]
                clock.cpu.append(cpu)
                clock.wall.append(wall)
            copy.time(partial(list, longest.live))
    for group in slots.values():
        for slot in group:
            slot.session.close()
    for label, _, _ in plan:
        if not plain[label].cpu:
            # Every request ran a batch (a history over the window even when trimmed: each
            # new result is trimmed as it ages): the figure is then over all of them.
            plain[label] = batch[label]
    first = plan[0][0]
    base = plain[first].median_cpu_us()
    noise = _spread(plain[first].cpu)
    figures = []
    for label, n, fresh in plan:
        ours = plain[label].median_cpu_us()
        rel = ours / base
        is_first = label == first
        figures.append(
            Figure(
                name=f"prepare +1 round, {label} (median)",
                ours=ours,
                unit="µs",
                ratio=None if is_first else rel,
                target="" if fresh else f"same as at {rounds[0]} rounds (≤ 1.25×)",
                met=None if fresh or is_first else rel <= 1.25,
                note=(
                    f"IQR/median {noise:.0%}"
                    if is_first
                    else f"{rel:.2f}× the {rounds[0]}-round time"
                ),
                extra={
                    "rounds": n,
                    "requests": len(plain[label].cpu),
                    "result_chars": result_chars,
                    "new_list_each_request": fresh,
                    "median_wall_us": plain[label].median_wall_us(),
                    "batch_requests": len(batch[label].cpu),
                    "batch_median_cpu_us": batch[label].median_cpu_us()
                    if batch[label].cpu
                    else None,
                    "relative_to_first": rel,
                },
            )
        )
    n_msgs = len(longest.live)
    figures.append(
        Figure(
            name=f"reference: copying a {n_msgs:,}-message request list (median)",
            ours=copy.median_cpu_us(),
            unit="µs",
            note="what a new request list costs at the longest history",
            extra={"messages": n_msgs},
        )
    )
    return figures


def bench_against_base(
    base: Path, rounds: int = 800, requests: int = 120, result_chars: int = 8_000
) -> Figure:
    """``prepare()`` +1 round of this checkout against another (``base``), each in a worker
    process, interleaved: the figure is issue 30's (within 1.2x of the base commit)."""
    t = perf_base.measure(base, rounds, requests, result_chars)
    return Figure(
        name=f"prepare +1 round at {rounds:,} rounds vs the base checkout (median)",
        ours=t.ours_us,
        unit="µs",
        peer=t.base_us,
        peer_name=f"base {base.name}",
        ratio=t.base_us / t.ours_us,
        target=f"≤ {perf_base.TARGET}× the base's time",
        met=t.times_base <= perf_base.TARGET,
        note=f"{t.times_base:.2f}× the base's time "
        f"(all requests: {t.ours_all_us / t.base_all_us:.2f}×)",
        extra={
            "base": str(base),
            "rounds": rounds,
            "requests": requests,
            "result_chars": result_chars,
            "times_base": t.times_base,
            "all_requests_median_us": t.ours_all_us,
            "base_all_requests_median_us": t.base_all_us,
            "batch_requests": t.ours_batches,
            "base_batch_requests": t.base_batches,
        },
    )


# -- 2. against LangChain's ContextEditingMiddleware --------------------------------------------


def _langchain_call(messages: list[Message]) -> Callable[[], object]:
    """One ``wrap_model_call`` of the real middleware on ``messages``, as an agent makes it."""
    from langchain.agents.middleware.context_editing import (
        ClearToolUsesEdit,
        ContextEditingMiddleware,
    )
    from langchain.agents.middleware.types import ModelRequest, ModelResponse
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.messages import AIMessage

    from benchmarks.strategies.langchain_editing import _to_lc

    lc_messages = [m for message in messages for m in _to_lc(message)]
    middleware: Any = ContextEditingMiddleware(edits=[ClearToolUsesEdit()])
    model = FakeListChatModel(responses=[""])
    captured: list[Any] = []

    def handler(request: Any) -> Any:
        captured.append(request)
        return ModelResponse(result=[AIMessage(content="")])

    def call() -> object:
        request = ModelRequest(model=model, messages=lc_messages)
        return middleware.wrap_model_call(request, handler)

    return call


def bench_langchain(
    rounds: int = 800, calls: int = 7, requests: int = 120, result_chars: int = 8_000
) -> Figure:
    """``prepare()`` against LangChain's ``ContextEditingMiddleware`` (default ``ClearToolUsesEdit``).

    Same history contents: ours in the Anthropic format, LangChain's as its messages. LangChain
    is driven as its agent does: ``wrap_model_call`` with a ``ModelRequest`` holding the history
    and a handler capturing the edited request; only that call is timed (the conversion to its
    messages is not). Its middleware keeps no state, so every call redoes the whole history
    (a deep copy and a token count), so warming it only loads its code; ours adds one round to
    a session that budgeted the history up to the previous turn. The two are interleaved: one
    LangChain call, then a share of our requests.
    """
    history = _conversation(rounds + 1, result_chars)
    peer_call = _langchain_call(history)
    peer_call()  # warm: imports, caches
    per = max(1, min(requests, rounds // 4))
    slots = [
        _warm_slot(rounds, per, result_chars, fresh_list=False)
        for _ in range(math.ceil(requests / per))
    ]
    ours, peer = _Clock(), _Clock()
    share = math.ceil(requests / calls)
    done = 0
    with _NoGC():
        for _ in range(calls):
            peer.time(peer_call)
            for _ in range(share):
                if done < requests:
                    ours.time(slots[done // per].step())
                    done += 1
    for slot in slots:
        slot.session.close()
    o, p = ours.median_cpu_us(), peer.median_cpu_us()
    return Figure(
        name=f"prepare +1 round at {rounds:,} rounds vs LangChain (median)",
        ours=o,
        unit="µs",
        peer=p,
        peer_name="LangChain ContextEditingMiddleware",
        ratio=p / o,
        target="≥ 100× faster",
        met=p / o >= 100,
        extra={
            "rounds": rounds,
            "result_chars": result_chars,
            "langchain_calls": calls,
            "our_requests": requests,
            "median_wall_us": ours.median_wall_us(),
            "peer_median_wall_us": peer.median_wall_us(),
        },
    )


# -- 3. new output: hashing, preview, envelope ----------------------------------------------------


def _big_output(seed: int, size: int) -> str:
    line = "Building wheel for package-{} (pyproject.toml) ... done: {} files in src/mod_{}.py\n"
    out = "".join(line.format(seed, i * 37 % 1000, i) for i in range(size // len(line) + 1))
    return out[:size]


def bench_new_output(size: int = 10 * _MB, repeats: int = 5) -> list[Figure]:
    """A new large output: its hash and its envelope (preview), then the whole ``prepare()``.

    The first row is what the targets name (hashing and preview, ``ref_for`` + ``envelope``); the
    second is a whole ``prepare()`` adding a round with that output to a short history, in an
    in-memory store (which hashes the body again, as every store does). The third is the one
    full pass the envelope cannot avoid, counting the output's lines (``str.count``), as a
    reference: it bounds the first row. Best of ``repeats`` runs, CPU time.
    """
    texts = [_big_output(i, size) for i in range(repeats)]
    nbytes = len(texts[0].encode("utf-8"))

    def process(text: str) -> object:
        ref = ref_for(text)
        return envelope(
            text,
            ref=ref,
            tool="bash",
            preview_chars=2_000,
            tail_share=0.3,
            read_tool="read_output",
            # As a new session builds it: the current preview version, shaped by content.
            version=PREVIEW_VERSION,
        )

    hashing, counting, whole = _Clock(), _Clock(), _Clock()
    session = Budget.in_memory()
    history = _conversation(20, 500)
    session.prepare(history, now=0.0)
    with _NoGC():
        for i, text in enumerate(texts):
            hashing.time(partial(process, text))
            counting.time(partial(text.count, "\n"))
            history += _round(10_000 + i, text)
            whole.time(partial(session.prepare, history, now=0.0))
    report = session.prepare(history, now=0.0).report
    session.close()

    def rate(clock: _Clock) -> float:
        return nbytes / (min(clock.cpu) / 1e9) / 1e9

    mb = nbytes / _MB
    bound = rate(counting)
    return [
        Figure(
            name=f"new {mb:.0f} MB output: hash + preview + envelope (best)",
            ours=rate(hashing),
            unit="GB/s",
            target="≥ 1 GB/s",
            met=rate(hashing) >= 1.0,
            note=f"line count alone (str.count) runs at {bound:.2f} GB/s here",
            extra={"bytes": nbytes, "repeats": repeats, "cpu_ns": hashing.cpu},
        ),
        Figure(
            name=f"new {mb:.0f} MB output: whole prepare(), in-memory store (best)",
            ours=rate(whole),
            unit="GB/s",
            note="adds the store's own hash of the body",
            extra={"bytes": nbytes, "spilled": report.spilled, "cpu_ns": whole.cpu},
        ),
        Figure(
            name=f"reference: str.count('\\n') over {mb:.0f} MB (best)",
            ours=bound,
            unit="GB/s",
            extra={"cpu_ns": counting.cpu},
        ),
    ]


# -- 4. spilling to a local disk ------------------------------------------------------------------


def _raw_write(path: Path, data: bytes, fsync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def bench_spill(root: Path, size: int = 10 * _MB, repeats: int = 5, *, fsync: bool) -> Figure:
    """Spilling new outputs through ``prepare()`` into a session directory on a local disk.

    Each request adds a round whose ``size``-byte output is over the cap: it is hashed, stored
    (temp file, write, fsync if on, rename, directory fsync if on), its envelope built and the
    decision logged (flushed, fsync'd if on). The reference is the same bytes written to a file
    on the same disk by one ``os.write`` (and one ``os.fsync`` if on), interleaved: what the
    disk itself allows. Median of ``repeats``, wall time.
    """
    texts = [_big_output(100 + i, size) for i in range(repeats)]
    nbytes = len(texts[0].encode("utf-8"))
    session = Budget.open(root / f"spill-{fsync}", {"fsync": fsync})
    history = _conversation(20, 500)
    session.prepare(history, now=0.0)
    ours, raw = _Clock(), _Clock()
    for i, text in enumerate(texts):
        data = text.encode("utf-8")
        raw.time(partial(_raw_write, root / f"raw-{fsync}-{i}", data, fsync))
        history += _round(20_000 + i, text)
        ours.time(partial(session.prepare, history, now=0.0))
    spilled = session.prepare(history, now=0.0).report.spilled
    session.close()
    o = nbytes / (statistics.median(ours.wall) / 1e9) / _MB
    r = nbytes / (statistics.median(raw.wall) / 1e9) / _MB
    state = "on" if fsync else "off"
    return Figure(
        name=f"spill {nbytes / _MB:.0f} MB outputs to local disk, fsync {state} (median)",
        ours=o,
        unit="MB/s",
        peer=r,
        peer_name=f"raw os.write{' + fsync' if fsync else ''} of the same bytes",
        ratio=o / r,
        target="≥ 300 MB/s",
        met=o >= 300,
        note=f"the disk alone: {r:.0f} MB/s",
        extra={"bytes": nbytes, "repeats": repeats, "fsync": fsync, "spilled": spilled},
    )


def _stored_bytes(path: Path, refs: list[str]) -> bytes:
    """The bytes of the bodies ``refs`` as session ``path`` stores them (in packs or files)."""
    with LocalStore(path) as store:
        return b"".join(store.get(ref).encode("utf-8", "surrogatepass") for ref in refs)


def bench_batch_spill(
    root: Path, rounds: int = 800, result_chars: int = 8_000, repeats: int = 7
) -> Figure:
    """The request whose staleness batch trims (and durably spills) a whole adopted history.

    A session opened with fsync on adopts ``rounds`` rounds of ``result_chars``-character
    results in one request (an agent wrapped mid-session); the next request, a cold cache later,
    runs a batch that trims nearly all of them, storing each body before the decision is
    logged (the batch's bodies in one pack: ``spill/_packs.py``). That request is timed (wall). The floor is the same bodies' bytes written to one
    file on the same disk by one ``os.write`` and one ``os.fsync``, right after it: what the
    disk allows for those bytes with nothing else. Median of ``repeats``, each on a new session.
    """
    history = _conversation(rounds, result_chars)
    nxt = list(_round(rounds, _result_text(rounds, result_chars)))
    ours, floor = _Clock(), _Clock()
    trimmed = nbytes = 0
    for i in range(repeats):
        path = root / f"batch-{i}"
        session = Budget.open(path)
        session.prepare(history, now=0.0)
        prepared = ours.time(partial(session.prepare, history + nxt, now=100_000.0))
        session.close()
        refs = [d.ref for d in prepared.report.decisions if d.kind == "trimmed" and d.ref]
        trimmed = len(refs)
        data = _stored_bytes(path, refs)
        nbytes = len(data)
        floor.time(partial(_raw_write, root / f"batch-floor-{i}", data, True))
        shutil.rmtree(path, ignore_errors=True)
    ms, floor_ms = ours.median_wall_us() / 1e3, floor.median_wall_us() / 1e3
    return Figure(
        name=f"batch request trimming {trimmed:,} spilled results, fsync on (median)",
        ours=ms,
        unit="ms",
        peer=floor_ms,
        peer_name=f"one os.write + os.fsync of the same {nbytes / _MB:.1f} MB",
        ratio=floor_ms / ms,
        target="≤ 250 ms",
        met=ms <= 250,
        note=f"{ms / floor_ms:.1f}× the floor: one write + fsync of the bodies, {floor_ms:.0f} ms",
        extra={
            "rounds": rounds,
            "result_chars": result_chars,
            "repeats": repeats,
            "trimmed": trimmed,
            "bytes": nbytes,
            "wall_ms": [w / 1e6 for w in ours.wall],
            "floor_ms": [w / 1e6 for w in floor.wall],
        },
    )


# -- 5. resume ------------------------------------------------------------------------------------


class _BodyOpens:
    """Counts files opened whose name is a spilled body's or a pack's, through an audit hook.

    Audit hooks cannot be removed: the hook stays installed but counts only while ``active``.
    """

    def __init__(self) -> None:
        self.active = False
        self.count = 0
        sys.addaudithook(self._hook)

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if self.active and event == "open" and args:
            path = args[0]
            if isinstance(path, str | bytes | os.PathLike):
                name = os.fsdecode(path)
                if name.endswith((_BODY_SUFFIX, _PACK_SUFFIX)):
                    self.count += 1


def _resume_round(r: int) -> list[Message]:
    """A round of two parallel results: small ones kept, every 10th over the cap (spilled)."""
    ids = [f"toolu_{r:06d}_{j}" for j in range(2)]
    call: Message = {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": cid, "name": "bash", "input": {"n": r}} for cid in ids
        ],
    }
    blocks = []
    for j, cid in enumerate(ids):
        big = (2 * r + j) % 10 == 0
        text = _result_text(2 * r + j, 51_000 if big else 3_000)
        blocks.append({"type": "tool_result", "tool_use_id": cid, "content": text})
    return [call, {"role": "user", "content": blocks}]


def _session_copy(src: Path, dst: Path) -> None:
    """A copy of session ``src`` at ``dst``: bodies hard-linked (immutable once in place),
    everything else copied, since a resumed session appends to its log."""

    def copy(a: str, b: str) -> None:
        if a.endswith((_BODY_SUFFIX, _PACK_SUFFIX)):
            os.link(a, b)
        else:
            shutil.copy2(a, b)

    shutil.copytree(src, dst, copy_function=copy)


def bench_resume(root: Path, decisions: int = 10_000, repeats: int = 7) -> list[Figure]:
    """Reopening a session whose log holds ``decisions`` decisions, reading no spilled body.

    The session is built by ``prepare()``, 100 rounds a request (fsync off to build it fast),
    until its log holds ``decisions`` decision records: a tenth of the results are spilled by
    the cap and older ones trimmed by staleness, so the log holds decisions of every kind and
    the directory their bodies. Then ``Budget.open`` is timed (median of ``repeats``, wall
    time), and so is the first ``prepare()`` after a resume, which rebuilds the caches from the
    log for the whole history. It must give the request copy the session would have given had
    it gone on: the directory is copied before the last request, which the original session
    then makes.

    The first ``prepare()`` is timed on two copies of that directory, alternately: as a closed
    session leaves it (with the token estimates it saved, ``budget/tokens/_estimates_cache.py``: the
    sidecar the session wrote at close, which holds the estimates of the same history), and as
    a crash before any save leaves it (no sidecar: every text estimated again, the rebuild of
    ee5f395). The second is the floor's counterpart: the same rebuild without the cache. Body
    files opened are counted by an audit hook on one more resume and first ``prepare()`` after
    the timings (the hook would be timed with them).
    """
    path, snapshot = root / "resume", root / "resume-snapshot"
    history: list[Message] = [{"role": "user", "content": "Investigate the regression."}]
    logged = 0
    with Budget.open(path, {"fsync": False}) as session:
        while logged < decisions:
            for r in range(len(history) // 2, len(history) // 2 + 100):
                history += _resume_round(r)
            logged += len(session.prepare(history, now=0.0).report.decisions)
        # The log is flushed after every request: a copy now is the session as a restart sees it.
        _session_copy(path, snapshot)
        expected = session.prepare(history, now=1.0)
    sidecar = path / SIDECAR
    (snapshot / SIDECAR).unlink(missing_ok=True)  # a periodic save may have written one
    with LocalStore(path) as store:  # every body, whether a file or in a pack
        bodies = len({r["ref"] for r in store.read_log() if r.get("ref") and store.has(r["ref"])})
    clock = _Clock()
    for _ in range(repeats):
        clock.time(lambda: Budget.open(path).close())
    first: dict[bool, _Clock] = {True: _Clock(), False: _Clock()}
    same = True

    def first_prepare(i: int, cached: bool, clock: _Clock | None) -> bool:
        copy = root / f"resume-first-{i}-{cached}"
        _session_copy(snapshot, copy)
        if cached and sidecar.exists():
            shutil.copy2(sidecar, copy / SIDECAR)
        with Budget.open(copy) as session:
            gc.collect()
            call = partial(session.prepare, history, now=1.0)
            resumed = call() if clock is None else clock.time(call)
        shutil.rmtree(copy, ignore_errors=True)
        return resumed.messages == expected.messages

    for i in range(max(1, min(repeats, 3))):
        for cached in (True, False):
            same = first_prepare(i, cached, first[cached]) and same
    # Counted after the timings, on one more resume and first prepare: an audit hook cannot be
    # removed, and it is called on every audited event of the process, which includes each
    # ``__class__`` assignment (``object.__setattr__``) the rebuild's fast constructors make
    # (budget._view.builder): installed before the timings, it would be timed with them.
    opens = _BodyOpens()
    opens.active = True
    Budget.open(path).close()
    same = first_prepare(-1, True, None) and same
    opens.active = False
    ms = statistics.median(clock.wall) / 1e6
    first_ms = statistics.median(first[True].wall) / 1e6
    rebuild_ms = statistics.median(first[False].wall) / 1e6
    return [
        Figure(
            name=f"resume a session of {logged:,} decisions (median)",
            ours=ms,
            unit="ms",
            target="< 100 ms",
            met=ms < 100,
            note=f"{bodies:,} bodies on disk; CPU {statistics.median(clock.cpu) / 1e6:.0f} ms",
            extra={"decisions": logged, "bodies": bodies, "wall_ns": clock.wall},
        ),
        Figure(
            name="spilled bodies opened by resume and the first prepare()",
            ours=float(opens.count),
            unit="files",
            target="0",
            met=opens.count == 0,
            note="counted by an audit hook on open()",
        ),
        Figure(
            name=f"first prepare() after resume, {len(history):,} messages (median)",
            ours=first_ms,
            unit="ms",
            peer=rebuild_ms,
            peer_name="the same without the saved estimates (a crash before any save)",
            ratio=rebuild_ms / first_ms,
            target="≤ 200 ms",
            met=first_ms <= 200,
            note=(
                f"saved estimates reused; without them {rebuild_ms:,.0f} ms; CPU "
                f"{statistics.median(first[True].cpu) / 1e6:.0f} ms vs "
                f"{statistics.median(first[False].cpu) / 1e6:.0f} ms; request copy identical"
                if same
                else "REQUEST COPY DIFFERS after resume"
            ),
            extra={
                "identical": same,
                "wall_ms": [w / 1e6 for w in first[True].wall],
                "rebuild_wall_ms": [w / 1e6 for w in first[False].wall],
                "cpu_ms": [c / 1e6 for c in first[True].cpu],
                "rebuild_cpu_ms": [c / 1e6 for c in first[False].cpu],
            },
        ),
    ]


# -- 6. memory ------------------------------------------------------------------------------------


def bench_memory(history_bytes: int = 100 * _MB, result_chars: int = 50_000) -> list[Figure]:
    """Extra memory of one ``prepare()`` on a large history, measured with ``tracemalloc``.

    The history holds ``history_bytes`` of tool output in results of ``result_chars`` (at the
    cap: kept, then trimmed by staleness as they age). The session is warm; one request adds a
    round. Its extra memory is the peak traced allocation during the call above what was
    allocated before it; the request copy shares every unchanged message, so it should come to
    what changed (the new round's bookkeeping and a batch's stubs) plus one pointer per message
    for the new list. The cold first ``prepare()`` of the whole history is reported too, and
    LangChain's ``wrap_model_call`` on the same history as the peer of the warm figure.
    """
    rounds = max(4, history_bytes // result_chars)
    history = _conversation(rounds, result_chars)
    size = sum(len(m["content"][0]["content"]) for m in history[2::2])
    session = Budget.in_memory()

    def traced(call: Callable[[], object]) -> tuple[int, object]:
        gc.collect()
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            out = call()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        return peak - base, out

    cold, _ = traced(lambda: session.prepare(history, now=0.0))
    for r in range(rounds, rounds + 3):
        history += _round(r, _result_text(r, result_chars))
        session.prepare(history, now=0.0)
    new = _round(rounds + 3, _result_text(rounds + 3, result_chars))
    history += new
    warm, _ = traced(lambda: session.prepare(history, now=0.0))
    session.close()
    pointer_bytes = 8 * len(history)
    peer_call = _langchain_call(history)
    peer, _ = traced(peer_call)
    return [
        Figure(
            name=f"extra memory of one warm prepare(), {size / _MB:.0f} MB history",
            ours=warm / 1e3,
            unit="KB",
            peer=peer / 1e3,
            peer_name="LangChain wrap_model_call",
            ratio=peer / warm,
            target="≤ 1% of the history",
            met=warm <= size / 100,
            note=(
                f"{warm / size:.3%} of the history; the round added holds "
                f"{result_chars / 1e3:.0f} KB; new list: {pointer_bytes / 1e3:.0f} KB"
            ),
            extra={"history_bytes": size, "messages": len(history), "pointer_bytes": pointer_bytes},
        ),
        Figure(
            name=f"extra memory of the cold first prepare(), {size / _MB:.0f} MB history",
            ours=cold / 1e6,
            unit="MB",
            note=f"{cold / size:.1%} of the history (estimates, decisions, stubs)",
            extra={"history_bytes": size},
        ),
    ]


# -- 7. whole-trace replay ------------------------------------------------------------------------


def bench_trace_replay(traces_dir: Path, limit: int | None = None) -> list[Figure]:
    """Every recorded trace replayed request by request under toolbudget (in-memory store).

    The agent's list grows by the messages each request adds; the previous request's recorded
    usage and the request's time (recorded, else 30 s after the previous one, as
    ``benchmarks.replay`` does) are passed as an agent would. Total wall time over all traces
    (loading excluded), and the CPU time of each ``prepare()``: median and p99. (``toolbudget
    bench`` times the same calls inside its cache simulation, with a new list per request.)
    """
    from benchmarks.importers import load_dir
    from benchmarks.replay import clock
    from benchmarks.strategies.toolbudget import usage_dict

    traces, skipped = load_dir(traces_dir)
    traces = sorted(traces, key=lambda t: t.name)[:limit]
    per_request: list[int] = []
    started = time.perf_counter()
    results = 0
    for trace in traces:
        session = Budget.in_memory({"model": trace.model} if trace.model else None)
        live: list[Message] = []
        last_usage: dict[str, int] | None = None
        for request, now in zip(trace.requests, clock(trace), strict=True):
            if request.n_messages < len(live):
                del live[request.n_messages :]  # the recording dropped messages: rebuilt
            live.extend(trace.messages[len(live) : request.n_messages])
            c = time.thread_time_ns()
            prepared = session.prepare(live, usage=last_usage, now=now)
            per_request.append(time.thread_time_ns() - c)
            last_usage = None if request.usage is None else usage_dict(request.usage)
        results += prepared.report.results if trace.requests else 0
        session.close()
    total = time.perf_counter() - started
    ms = sorted(x / 1e6 for x in per_request)
    p99 = ms[min(len(ms) - 1, math.ceil(0.99 * len(ms)) - 1)] if ms else 0.0
    return [
        Figure(
            name=f"replay {len(traces)} traces, {len(per_request):,} requests: total",
            ours=total,
            unit="s",
            note=f"{results:,} tool results; {len(skipped)} files skipped",
            extra={"traces": [t.name for t in traces], "requests": len(per_request)},
        ),
        Figure(
            name="replay: prepare() per request, median",
            ours=statistics.median(ms) if ms else 0.0,
            unit="ms",
        ),
        Figure(name="replay: prepare() per request, p99", ours=p99, unit="ms"),
    ]


# -- running and reporting ------------------------------------------------------------------------


def run(
    sizes: Sizes,
    *,
    traces: Path | None,
    workdir: Path,
    progress: Callable[[str], None] = lambda _: None,
) -> list[Figure]:
    """Every benchmark at ``sizes``; the trace replay only when ``traces`` is a directory."""
    figures: list[Figure] = []
    progress("prepare() against history length")
    figures += bench_prepare_scaling(
        sizes.rounds, sizes.requests, sizes.result_chars, fresh_list_at=sizes.rounds[-1]
    )
    progress("against LangChain")
    figures.append(
        bench_langchain(
            sizes.langchain_rounds, sizes.langchain_calls, sizes.requests, sizes.result_chars
        )
    )
    progress("new output")
    figures += bench_new_output(sizes.output_bytes, sizes.output_repeats)
    progress("spill to disk")
    for fsync in (True, False):
        figures.append(bench_spill(workdir, sizes.output_bytes, sizes.spill_repeats, fsync=fsync))
    progress("batch spill")
    figures.append(
        bench_batch_spill(workdir, sizes.batch_rounds, sizes.batch_chars, sizes.batch_repeats)
    )
    progress("resume")
    figures += bench_resume(workdir, sizes.resume_decisions, sizes.resume_repeats)
    progress("memory")
    figures += bench_memory(sizes.memory_bytes)
    if traces is not None and traces.is_dir():
        progress("trace replay")
        figures += bench_trace_replay(traces, sizes.trace_limit)
    return figures


def _num(x: float | None) -> str:
    if x is None:
        return "—"
    if x >= 1000:
        return f"{x:,.0f}"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def format_table(figures: Sequence[Figure]) -> str:
    """The figures as a Markdown table: one row per figure."""
    rows = ["| figure | ours | peer | ratio | target | met |", "|---|---:|---:|---:|---|---|"]
    for f in figures:
        peer = f"{_num(f.peer)} {f.unit}" if f.peer is not None else "—"
        ratio = f"{f.ratio:.2f}×" if f.ratio is not None else "—"
        met = "—" if f.met is None else ("yes" if f.met else "**no**")
        name = f"{f.name}" + (f" ({f.note})" if f.note else "")
        rows.append(
            f"| {name} | {_num(f.ours)} {f.unit} | {peer} | {ratio} | {f.target or '—'} | {met} |"
        )
    return "\n".join(rows)


def _default_traces() -> Path:
    return Path(__file__).resolve().parents[1] / ".." / "shared" / "traces"


def main(
    *,
    quick: bool = False,
    json_path: Path | None = None,
    traces: Path | None = None,
    workdir: Path | None = None,
    base: Path | None = None,
) -> int:
    """Run the benchmarks, print the table, optionally write JSON; always returns 0.

    The command line is ``python -m benchmarks perf`` (see ``benchmarks/cli.py``); ``base``, another
    checkout, adds the row timing ``prepare`` +1 round against it (:mod:`benchmarks.perf_base`).
    """
    sizes = Sizes.quick() if quick else Sizes.full()
    traces = traces if traces is not None else _default_traces()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=workdir, prefix="toolbudget-perf-") as tmp:
        figures = run(
            sizes,
            traces=traces,
            workdir=Path(tmp),
            progress=lambda s: print(f"... {s}", file=sys.stderr, flush=True),
        )
    if base is not None:
        print("... against the base checkout", file=sys.stderr, flush=True)
        rounds = 800 if 800 in sizes.rounds else sizes.rounds[-1]
        figures.append(bench_against_base(base, rounds, sizes.requests, sizes.result_chars))
    elapsed = time.perf_counter() - started
    load = os.getloadavg()
    print(format_table(figures))
    print(
        f"\n{'quick' if quick else 'full'} run, {elapsed:.0f} s; Python "
        f"{sys.version.split()[0]}; {os.cpu_count()} CPUs, load average {load[0]:.1f}"
    )
    if json_path is not None:
        doc = {
            "quick": quick,
            "sizes": asdict(sizes),
            "elapsed_s": elapsed,
            "python": sys.version.split()[0],
            "cpus": os.cpu_count(),
            "load_average": list(load),
            "figures": [asdict(f) for f in figures],
        }
        json_path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return 0


def command(
    quick: Annotated[bool, typer.Option(help="Smaller sizes, under a minute.")] = False,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Also write the figures here.")
    ] = None,
    traces: Annotated[
        Path | None, typer.Option(help="Recorded traces (default ../shared/traces).")
    ] = None,
    workdir: Annotated[Path | None, typer.Option("--dir", help="Where to create sessions.")] = None,
    base: Annotated[
        Path | None,
        typer.Option(help="Another checkout: time prepare +1 round against it, interleaved."),
    ] = None,
) -> None:
    """Performance against the targets of docs/performance.md, side by side with LangChain."""
    raise typer.Exit(
        main(quick=quick, json_path=json_path, traces=traces, workdir=workdir, base=base)
    )


if __name__ == "__main__":
    from benchmarks._command import run_alone

    run_alone(command, "benchmarks.perf")
