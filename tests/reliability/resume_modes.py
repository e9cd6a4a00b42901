"""Long sessions under each mode, replayed once uninterrupted and once resumed (issue 28, 6-8).

A scenario is a list of actions: a ``prepare`` of a history prefix (with the usage the last
response reported, derived from the copy this run sent before, with a header the messages do
not show and a bias the calibration learns), or an ``on_overflow``. :func:`replay` runs actions
against a session directory and returns one line per action: the digest of the request copy
and of its report (all but ``elapsed_s``), or what ``on_overflow`` answered. A resumed run is
the same replay with the session closed and opened again (``Budget.open`` on the same
directory) before chosen actions: a byte-identical resume gives the same lines.

The child process of the subprocess case imports this module (``replay_rest``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from budget import Budget, BudgetConfig, ContextOverflow
from budget.tokens._tokens import estimate_tokens
from tests import compaction as cmp
from tests.conversations import CONFIG, digest
from tests.conversations import conversation as mixed_conversation

__all__ = ["MODES", "Action", "Scenario", "replay", "replay_rest", "scenario"]

HEADER: Final = 700
"""Tokens each simulated request carries beyond its messages (system prompt, tool definitions)."""
BIAS: Final = 1.25
"""How much more than the estimate the simulated provider counts (what calibration learns)."""
OVERFLOW: Final = "prompt is too long: 250000 tokens > 200000 maximum"

Message = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Action:
    """``prepare(history[:length], now=now)`` with the simulated usage, or an overflow."""

    length: int = 0
    now: float = 0.0
    overflow: bool = False
    usage: bool = True
    """Pass the usage the previous copy's (simulated) response reported."""


@dataclass(frozen=True, slots=True)
class Scenario:
    """One mode's session: its settings, history, actions and summarizer."""

    config: BudgetConfig
    history: list[Message]
    actions: list[Action]
    summarizer: str
    """"" (none), "counting" (:class:`tests.compaction.Counting`) or "flaky" (:class:`Flaky`)."""


MODES: Final = ("off", "proactive", "reactive", "breaker")


class Flaky(cmp.Counting):
    """A summarizer that fails on parts of fewer than :data:`FLAKY_BELOW` messages: the first
    three compactions of the ``breaker`` scenario fail (the breaker opens), a later one would
    succeed."""

    def __call__(self, messages: Sequence[Any]) -> str:
        if len(messages) < FLAKY_BELOW:
            self.calls.append(len(messages))
            raise RuntimeError("the summary model is overloaded")
        return super().__call__(messages)


FLAKY_BELOW: Final = 42
"""Messages of the parts the breaker scenario's first three compactions summarize (37, 39, 41 since
small results are trimmed as they age without a cache: the scenario's usage shows none) are fewer."""


def _usage(copy: Sequence[Any] | None) -> dict[str, int] | None:
    """The usage a provider reports for ``copy``: its estimate, biased, plus the header."""
    if copy is None:
        return None
    tokens = sum(estimate_tokens(m) for m in copy)
    return {"input_tokens": int(tokens * BIAS) + HEADER, "output_tokens": 40}


def scenario(mode: str) -> Scenario:
    """The long session of ``mode``: compaction off (spills, calibration, staleness batches
    after pauses past the cache TTL), proactive compaction, reactive compaction after three
    overflows in a row (twice), or proactive compaction whose first three summaries fail (the
    breaker opens), each with usage and a pause past the TTL."""
    if mode == "off":
        mixed, steps = mixed_conversation(seed=7, rounds=36)
        replayed = [Action(s.length, s.now, usage=s.usage is not None) for s in steps]
        return Scenario(CONFIG.model_copy(update={"fsync": False}), mixed, replayed, "")
    rounds = 40
    history = cmp.history(rounds, lines=30)
    actions: list[Action] = []
    now = 1_000.0
    for r in range(rounds):
        # Every seventh request follows a pause past the 300 s cache TTL (a staleness batch).
        now += 400.0 if r % 7 == 6 else 5.0
        if mode == "reactive" and r in (14, 29):
            actions += [Action(overflow=True)] * 3
        actions.append(Action(1 + 2 * (r + 1), now, usage=r % 5 != 3))
    config = cmp.compaction_config("manual" if mode == "reactive" else "auto")
    # A window of a dozen rounds: calibration learns between two compactions. In reactive
    # mode nothing compacts on its own: only the compaction scheduled by the third overflow.
    config = config.model_copy(update={"window": 8_000})
    return Scenario(config, history, actions, "flaky" if mode == "breaker" else "counting")


def _open(path: Path, sc: Scenario) -> Budget:
    summarizer = {"": None, "counting": cmp.Counting(), "flaky": Flaky()}[sc.summarizer]
    return Budget.open(path, sc.config, summarizer=summarizer)


def _line(prepared: Any) -> str:
    report = prepared.report.model_dump(mode="json", exclude={"elapsed_s"})
    return f"{digest(prepared.messages)} {json.dumps(report, sort_keys=True)}"


def replay(
    path: Path,
    sc: Scenario,
    *,
    start: int = 0,
    stop: int | None = None,
    reopen: Callable[[int], bool] = lambda i: False,
    last: list[Any] | None = None,
) -> tuple[list[str], list[Any] | None]:
    """Run ``sc.actions[start:stop]`` on the session at ``path``, closing and opening it again
    before each action ``i`` where ``reopen(i)``; (a line per action, the last copy sent)."""
    lines: list[str] = []
    session = _open(path, sc)
    try:
        for i in range(start, len(sc.actions) if stop is None else stop):
            action = sc.actions[i]
            if reopen(i) and i > start:
                session.close()
                session = _open(path, sc)
            if action.overflow:
                try:
                    lines.append(f"overflow {session.on_overflow(OVERFLOW)}")
                except ContextOverflow:
                    lines.append("overflow raised")
                continue
            usage = _usage(last) if action.usage else None
            prepared = session.prepare(sc.history[: action.length], usage=usage, now=action.now)
            lines.append(_line(prepared))
            last = prepared.messages
    finally:
        session.close()
    return lines, last


def replay_rest(mode: str, path: str, start: int, last_copy: str) -> None:
    """The child process's half: resume the session at ``path`` and replay from ``start``;
    prints the lines as JSON."""
    last = json.loads(last_copy)
    lines, _ = replay(Path(path), scenario(mode), start=start, last=last)
    sys.stdout.write(json.dumps(lines))
