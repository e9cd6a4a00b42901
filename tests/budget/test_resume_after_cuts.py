"""A caller that cuts its last round and sends its history again (without that round, or with
another last answer) leaves the session that went on learning what a session resumed from its
directory learns: the same logged evidence (``p``, ``q``, ``e``, ``k``, ``w``) and the same
copies, on generated sessions and on the recorded traces.

The resumed sessions are opened on a copy of the live session's directory taken after a request
and fed the histories that follow, as a process restarted there would be."""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import Budget, BudgetConfig
from tests._lanes import examples
from tests._shared import SharedTraces

Message = dict[str, Any]
Next = Callable[[int, list[str]], tuple[list[Message], dict[str, Any] | None] | None]
"""Given the request's index and the refs spilled so far, the next history and its usage (None:
the session ends); a history may name a ref, so the sequence is made as the session goes."""

LOG = "\n".join(f"line {i:05d} of a long build log with enough text to spill" for i in range(3000))
"""A ~180,000-character result: spilled at first sight."""


def _call(cid: str, command: str, text: str = "") -> Message:
    blocks: list[Message] = [{"type": "text", "text": text}] if text else []
    blocks.append({"type": "tool_use", "id": cid, "name": "Bash", "input": {"command": command}})
    return {"role": "assistant", "content": blocks}


def _result(cid: str, text: str) -> Message:
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": cid, "content": text}],
    }


def _requests(path: Path) -> list[dict[str, Any]]:
    (log,) = list(path.rglob("*.jsonl"))
    records = [orjson.loads(line) for line in log.read_bytes().splitlines()]
    return [r for r in records if r.get("t") == "req"]


def _learned(rec: dict[str, Any]) -> tuple[Any, ...]:
    """What a request record says the session learned (``p`` but the gap, which a restart does
    not know for a history it cannot anchor; the kept results' evidence)."""
    p = list(rec["p"])
    del p[8]
    return (p, *(rec.get(key) for key in ("q", "e", "k", "w")))


def _went_on_and_resumed(base: Path, next_history: Next, config: BudgetConfig, forks: int) -> None:
    """Run the live session over ``next_history``'s requests, its directory copied after each
    of ``forks`` random requests; each copy, opened and fed the requests after it, logs and
    sends what the live session did."""
    live = Budget.open(base / "live", config)
    histories: list[tuple[list[Message], dict[str, Any] | None]] = []
    copies: list[bytes] = []
    refs: list[str] = []
    try:
        while (step := next_history(len(histories), refs)) is not None:
            histories.append(step)
            prepared = live.prepare(step[0], usage=step[1], now=10.0 * len(copies))
            copies.append(orjson.dumps(prepared.messages))
            refs += [d.ref for d in prepared.report.decisions if d.ref and d.kind == "spilled"]
            (base / "snap").mkdir(exist_ok=True)
            shutil.copytree(base / "live", base / "snap" / str(len(copies)))
    finally:
        live.close()
    learned = [_learned(r) for r in _requests(base / "live")]
    points = random.Random(len(copies)).sample(range(1, len(copies)), min(forks, len(copies) - 1))
    for at in points:
        resumed = Budget.open(base / "snap" / str(at), config)
        try:
            for i in range(at, len(histories)):
                history, usage = histories[i]
                sent = orjson.dumps(resumed.prepare(history, usage=usage, now=10.0 * i).messages)
                assert sent == copies[i], f"request {i}, resumed after request {at}"
        finally:
            resumed.close()
        again = [_learned(r) for r in _requests(base / "snap" / str(at))]
        assert again == learned, f"resumed after request {at}"


def test_a_read_back_in_a_withdrawn_answer_is_counted_as_a_resumed_session_counts_it(
    tmp_path: Path,
) -> None:
    """An answer reading a spilled result back is withdrawn (the history cut back before it);
    after a later read-back the session that went on counts what one resumed after the cut
    counts (the withdrawn one not twice: it counted 3 read-backs where the resumed one had 2)."""
    start = [{"role": "user", "content": "Build it."}, _call("c1", "make"), _result("c1", LOG)]
    base = [*start, _call("c2", "ls"), _result("c2", "ok")]

    def next_history(i: int, refs: list[str]) -> tuple[list[Message], None] | None:
        ref = refs[0] if refs else "none"
        withdrawn = [*base, _call("c3", f"cat {ref}"), _result("c3", "page 1")]
        later = [*base, _call("c4", f"cat {ref}"), _result("c4", "page 2")]
        steps = [start, base, withdrawn, base, later]
        steps.append([*later, _call("c5", f"head {ref}"), _result("c5", "page 3")])
        return (steps[i], None) if i < len(steps) else None

    _went_on_and_resumed(tmp_path, next_history, BudgetConfig(fsync=False), forks=5)
    readbacks = [r["p"][6] for r in _requests(tmp_path / "live")]
    assert readbacks == [0, 0, 1, 1, 1, 2]  # the withdrawn one is the logged floor until passed


def _cut(history: list[Message], i: int, refs: list[str], rng: random.Random) -> list[Message]:
    """``history`` sent again without its last answer and what followed it, or with another
    answer in its place (quoting its results' lines, or reading a spilled result back)."""
    at = max(j for j, m in enumerate(history) if m["role"] == "assistant")
    how = rng.choice(["drop", "same-length", "other"])
    if how == "drop":
        return history[:at]
    lines = [
        line
        for m in history[:at]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result" and isinstance(b.get("content"), str)
        for line in b["content"].splitlines()
        if len(line.strip()) >= 30
    ]
    quote = "\n".join(rng.sample(lines, min(3, len(lines))))
    if how == "same-length":  # another answer making the same calls: a retry of the request
        calls = [b for b in history[at]["content"] if b.get("type") == "tool_use"]
        other = {"role": "assistant", "content": [{"type": "text", "text": quote or "."}, *calls]}
        return [*history[:at], other, *history[at + 1 :]]
    command = f"cat {rng.choice(refs)}" if refs else "ls"
    cid = f"toolu_cut_{i}"
    return [*history[:at], _call(cid, command, quote), _result(cid, quote or "ok")]


def _with_cuts(histories: list[tuple[list[Message], Any]], seed: int) -> Next:
    """The recorded requests, some of them cut and sent again (:func:`_cut`) before the next;
    then two read-backs of spilled results."""
    rng = random.Random(seed)
    plan: list[int | None] = []  # each request's index, None for a cut one
    for i in range(len(histories)):
        plan.append(i)
        if i > 1 and rng.random() < 0.3:
            plan.append(None)
    done: list[list[Message]] = []

    def next_history(i: int, refs: list[str]) -> tuple[list[Message], Any] | None:
        if i < len(plan):
            j = plan[i]
            step = (_cut(done[-1], i, refs, rng), None) if j is None else histories[j]
        elif i < len(plan) + 2 and refs:
            cid = f"toolu_read_{i}"
            history = [*done[-1], _call(cid, f"cat {refs[i % len(refs)]}"), _result(cid, "page")]
            step = (history, None)
        else:
            return None
        done.append(step[0])
        return step

    return next_history


def test_recorded_traces_cut_and_sent_again_resume_alike(
    tmp_path: Path, shared_trace_set: SharedTraces
) -> None:
    """Recorded traces with requests cut and sent again at random (a round dropped, another
    last answer, one reading a spilled result back): sessions resumed from the directory at
    random requests log and send what the session that went on did."""
    traces, _ = shared_trace_set
    chosen = [t for t in traces if t.format in ("claude-code", "mini-swe-agent", "codex-cli")]
    assert chosen
    for n, trace in enumerate(chosen[::3]):
        histories = [
            (list(trace.messages[: r.n_messages]), r.usage.as_anthropic() if r.usage else None)
            for r in trace.requests
            if r.n_messages
        ][:60]
        config = BudgetConfig(model=trace.model, fsync=False)
        _went_on_and_resumed(tmp_path / str(n), _with_cuts(histories, n), config, forks=3)


@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    sizes=st.lists(st.sampled_from([40, 400, 3000]), min_size=3, max_size=8),
    seed=st.integers(0, 2**16),
)
def test_generated_sessions_cut_and_sent_again_resume_alike(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int], seed: int
) -> None:
    """Generated sessions of results of random sizes, cut and sent again at random: sessions
    resumed from the directory at random requests log and send what the one that went on did."""
    history: list[Message] = [{"role": "user", "content": "Find the bug."}]
    histories: list[tuple[list[Message], Any]] = []
    for i, size in enumerate(sizes):
        text = "\n".join(f"row {i}.{n:05d}: value={n * 7} detail={'x' * 30}" for n in range(size))
        history = [*history, _call(f"c{i}", f"run {i}"), _result(f"c{i}", text)]
        histories.append((history, None))
    base = tmp_path_factory.mktemp("cuts")
    config = BudgetConfig(fsync=False, protect_rounds=1)
    _went_on_and_resumed(base, _with_cuts(histories, seed), config, forks=3)
