"""How accurate is the token estimator? Measured against the usage recorded in real traces.

For each pair of consecutive requests of a trace that both recorded usage, the prompt grew by
``delta = prompt_tokens[i+1] - prompt_tokens[i]``: the messages appended in between (the model's
answer to request ``i`` and what came back, tool results mostly). The system prompt and tool
definitions are in both prompts and cancel out. Two estimates of that growth are compared:

``added``
    The estimated tokens of every appended message, the answer included (the brief's measure).
    Traces whose importer had to drop content that was sent (thinking blocks, reasoning items)
    are left out: their messages do not hold what the provider counted. For agents that act
    through text (mini-swe-agent), messages are counted as they were sent: the answer without
    the ``tool_use`` block the importer adds, the observation as plain user text.
``anchored``
    The answer's recorded ``output_tokens`` (but no less than the estimate of its visible text:
    Claude Code transcripts, like streaming callers, keep the output count of the stream's first
    event) plus the estimated tokens of the other appended messages: what the budget computes,
    since its anchor includes the answer. This isolates the estimator on what it is for: new
    tool output.

``anchored_prompt`` is the relative error of the resulting estimate of the whole next prompt
(the previous prompt and answer as recorded, plus the estimated additions), the figure the
pressure trigger acts on.

Each trace is estimated with its model's tokenizer profile (:func:`budget.tokens._tokens.tokenizer_profile`),
as a session configured with that model would. Pairs whose prompt did not grow (the history was
compacted or reset, or the next request dropped messages) are skipped and counted. Errors are
``(estimate - actual) / actual``; negative is an underestimate. They are summarized per trace
format, per tokenizer family, per script mix of the added text (ASCII only, containing CJK, other
non-ASCII), by size (growth under or over 1,000 tokens: on small growths, a few tokens of framing
the trace does not show weigh heavily) and by turn (``user`` when a person's message was
appended: agents attach context there that their recordings do not hold).

``session`` replays each trace through a real :class:`budget.Budget` (its model named, nothing
spilled or trimmed, so the request copy is what was recorded), passing each request the usage
recorded for the one before, as an adopter would. Per tokenizer family it compares the report's
``tokens_after_raw`` (the anchored estimate) and ``tokens_after`` (corrected by what the session
learned from earlier pairs, :mod:`budget.tokens._calibration`) with the recorded prompt: median |error|
and the share underestimated by more than 2% of the whole prompt, and the same estimates' error
relative to the growth (per delta).

Run: ``python -m benchmarks tokens [--traces DIR] [--json FILE]``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Protocol

import orjson
import typer

from benchmarks.trace import Trace
from budget import Budget
from budget.tokens._tokens import estimate_tokens, text_class_counts, tokenizer_profile

__all__ = [
    "Calibrated",
    "Pair",
    "SessionPair",
    "Stats",
    "TokenAccuracy",
    "calibrated",
    "collect_pairs",
    "command",
    "main",
    "measure",
    "replay_session",
    "script_mix",
    "summarize",
]

Method = Literal["added", "anchored", "anchored_prompt"]
METHODS: Final[tuple[Method, ...]] = ("added", "anchored", "anchored_prompt")
Script = Literal["ascii", "cjk", "other"]
Turn = Literal["tool", "user"]

DEFAULT_TRACES: Final = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces"

# Import notes meaning the trace's messages lack content the provider counted.
_DROPPED_NOTES: Final = frozenset({"dropped_thinking_blocks", "skipped_reasoning_items"})
_UNDER_BY: Final = 0.10
UNDER_PROMPT_BY: Final = 0.02
"""An estimate of the whole prompt this much under counts as an underestimate (issue 17)."""
# Formats whose tool calls are synthetic: the agent wrote its action as text.
_TEXT_ACTION_FORMATS: Final = frozenset({"mini-swe-agent"})
LARGE_DELTA: Final = 1000


@dataclass(frozen=True, slots=True)
class Pair:
    """One pair of consecutive requests with recorded usage, and the estimates of its growth."""

    trace: str
    format: str
    family: str
    """Tokenizer family of the trace's model (:func:`budget.tokens._tokens.tokenizer_profile`)."""
    script: Script
    turn: Turn
    """``user`` when a person's message was appended (agents add unrecorded context there)."""
    delta: int
    """Recorded growth of the prompt, in tokens (always positive: others are skipped)."""
    next_prompt: int
    """Recorded prompt tokens of the later request."""
    added: int
    """Estimated tokens of every message appended between the two requests."""
    anchored: int
    """Recorded output tokens of the earlier request plus the estimate of the other additions."""
    complete: bool
    """False when the importer dropped sent content from this trace (``added`` is then skipped)."""

    def error(self, method: Method) -> float | None:
        """Relative error of ``method``'s estimate, or None when the method skips this pair."""
        if method == "added":
            return (self.added - self.delta) / self.delta if self.complete else None
        if method == "anchored":
            return (self.anchored - self.delta) / self.delta
        prompt_estimate = self.next_prompt - self.delta + self.anchored
        return (prompt_estimate - self.next_prompt) / self.next_prompt


@dataclass(frozen=True, slots=True)
class Skipped:
    """Pairs left out, by reason."""

    not_grown: int = 0
    """The prompt did not grow: history compacted, reset or rewritten between the requests."""
    no_new_messages: int = 0
    """The later request appended no message (a retry or a resend)."""


def _texts(obj: Any, out: list[str]) -> None:
    if isinstance(obj, str):
        out.append(obj)
    elif isinstance(obj, dict):
        for value in obj.values():
            _texts(value, out)
    elif isinstance(obj, list | tuple):
        for value in obj:
            _texts(value, out)


def script_mix(messages: Iterable[Any]) -> Script:
    """Which script mix the messages' text is: ``cjk`` if any CJK character, ``other`` if any
    other non-ASCII character, else ``ascii``."""
    parts: list[str] = []
    _texts(list(messages), parts)
    text = "".join(parts)
    if text.isascii():
        return "ascii"
    return "cjk" if text_class_counts(text)["cjk"] else "other"


def _as_sent(message: dict[str, Any]) -> dict[str, Any]:
    """The message as an agent that acts through text sent it: the answer without the importer's
    synthetic ``tool_use`` blocks, an observation as plain user text rather than a tool result."""
    content = message.get("content")
    if not isinstance(content, list):
        return message
    if message.get("role") == "assistant":
        return {**message, "content": [b for b in content if b.get("type") != "tool_use"]}
    blocks: list[Any] = []
    for block in content:
        if block.get("type") == "tool_result":
            inner = block.get("content")
            blocks.extend(inner if isinstance(inner, list) else [{"type": "text", "text": inner}])
        else:
            blocks.append(block)
    return {**message, "content": blocks}


def _turn(added: Sequence[dict[str, Any]]) -> Turn:
    """``user`` when a person's message is among the additions, else ``tool`` (an agent round)."""
    for message in added:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if not isinstance(content, list) or any(
            b.get("type") != "tool_result" for b in content if isinstance(b, dict)
        ):
            return "user"
    return "tool"


class Estimator(Protocol):
    """Estimates the tokens of messages sent to ``model`` (see :func:`budget.estimate_tokens`)."""

    def __call__(self, obj: Any, /, *, model: str | None = None) -> int:
        """Estimated tokens of ``obj`` in a prompt to ``model``."""
        ...


def collect_pairs(
    traces: Iterable[Trace], estimator: Estimator = estimate_tokens
) -> tuple[list[Pair], Skipped]:
    """Every pair of consecutive usage-carrying requests whose prompt grew, and the skips."""
    pairs: list[Pair] = []
    not_grown = no_new = 0
    for trace in traces:
        notes = trace.meta.get("import_notes") or {}
        complete = not any(notes.get(k) for k in _DROPPED_NOTES)
        text_actions = trace.format in _TEXT_ACTION_FORMATS
        model = trace.model
        family = tokenizer_profile(model).name if model else "unknown"
        previous = None
        for request in trace.requests:
            if request.usage is None:
                previous = None
                continue
            if previous is not None and previous.usage is not None:
                if request.n_messages <= previous.n_messages:
                    no_new += 1
                else:
                    delta = request.usage.prompt_tokens - previous.usage.prompt_tokens
                    if delta <= 0:
                        not_grown += 1
                    else:
                        added = list(trace.messages[previous.n_messages : request.n_messages])
                        sent = [_as_sent(m) for m in added] if text_actions else added
                        answer = [m for m in sent if m.get("role") == "assistant"]
                        others = [m for m in sent if m.get("role") != "assistant"]
                        # As the budget does: an answer is counted at no less than its visible
                        # text, since some recordings (and streaming callers) report the output
                        # count of the stream's first event.
                        output = max(previous.usage.output_tokens, estimator(answer, model=model))
                        pairs.append(
                            Pair(
                                trace=trace.name,
                                format=trace.format,
                                family=family,
                                script=script_mix(added),
                                turn=_turn(added),
                                delta=delta,
                                next_prompt=request.usage.prompt_tokens,
                                added=estimator(sent, model=model),
                                anchored=output + estimator(others, model=model),
                                complete=complete,
                            )
                        )
            previous = request
    return pairs, Skipped(not_grown=not_grown, no_new_messages=no_new)


@dataclass(frozen=True, slots=True)
class Stats:
    """Distribution of relative errors of one method over one group of pairs."""

    n: int
    median_abs: float
    p90_abs: float
    p95_abs: float
    median: float
    """Signed median: below zero, the estimator tends to underestimate."""
    under_share: float
    """Share of pairs underestimated at all."""
    under10_share: float
    """Share of pairs underestimated by more than 10%."""


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile of already sorted values."""
    pos = (len(sorted_values) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(errors: Sequence[float]) -> Stats | None:
    """The error distribution's summary, or None for no errors."""
    if not errors:
        return None
    absolute = sorted(abs(e) for e in errors)
    return Stats(
        n=len(errors),
        median_abs=statistics.median(absolute),
        p90_abs=_quantile(absolute, 0.90),
        p95_abs=_quantile(absolute, 0.95),
        median=statistics.median(errors),
        under_share=sum(e < 0 for e in errors) / len(errors),
        under10_share=sum(e < -_UNDER_BY for e in errors) / len(errors),
    )


@dataclass(frozen=True, slots=True)
class TokenAccuracy:
    """The benchmark's result: error summaries per method and group, and what was skipped."""

    traces: int
    pairs: int
    skipped: Skipped
    incomplete_pairs: int
    """Pairs from traces missing sent content, left out of the ``added`` method."""
    groups: dict[str, dict[str, Stats]] = field(default_factory=dict)
    """Method name -> group (``all``, ``format:<name>``, ``script:<mix>``) -> summary."""

    def stats(self, method: Method, group: str = "all") -> Stats | None:
        """The summary for ``method`` over ``group``, if it had pairs."""
        return self.groups.get(method, {}).get(group)

    def to_json(self) -> dict[str, Any]:
        """A plain-data form for ``--json``."""
        return asdict(self)


def measure(traces: Sequence[Trace], estimator: Estimator = estimate_tokens) -> TokenAccuracy:
    """Measure the estimator's error on ``traces``."""
    pairs, skipped = collect_pairs(traces, estimator)
    groups_of: dict[str, list[Pair]] = {"all": pairs}
    for p in pairs:
        size = "large" if p.delta >= LARGE_DELTA else "small"
        keys = (
            f"format:{p.format}",
            f"family:{p.family}",
            f"script:{p.script}",
            f"size:{size}",
            f"turn:{p.turn}",
        )
        for key in keys:
            groups_of.setdefault(key, []).append(p)
    order = sorted(groups_of, key=lambda k: (k != "all", k.split(":")[0], k))
    groups: dict[str, dict[str, Stats]] = {}
    for method in METHODS:
        by_group: dict[str, Stats] = {}
        for name in order:
            errors = [e for p in groups_of[name] if (e := p.error(method)) is not None]
            summary = summarize(errors)
            if summary is not None:
                by_group[name] = summary
        groups[method] = by_group
    return TokenAccuracy(
        traces=len(traces),
        pairs=len(pairs),
        skipped=skipped,
        incomplete_pairs=sum(not p.complete for p in pairs),
        groups=groups,
    )


@dataclass(frozen=True, slots=True)
class SessionPair:
    """One request replayed through a session, and the session's estimates of its prompt."""

    trace: str
    family: str
    delta: int
    """Recorded growth of the prompt since the previous request (positive: others are skipped)."""
    next_prompt: int
    """Recorded prompt tokens of this request."""
    raw: int
    """The report's ``tokens_after_raw``: the anchored estimate."""
    corrected: int
    """The report's ``tokens_after``: the anchored estimate with the learned correction."""

    def prompt_error(self, corrected: bool) -> float:
        """Relative error of the estimate of the whole prompt."""
        estimate = self.corrected if corrected else self.raw
        return (estimate - self.next_prompt) / self.next_prompt

    def delta_error(self, corrected: bool) -> float:
        """The same estimate's error relative to the growth it estimates."""
        estimate = self.corrected if corrected else self.raw
        return (estimate - self.next_prompt) / self.delta


_NO_CHANGE: Final[dict[str, Any]] = {
    "result_cap": 1 << 60,
    "price_spills": False,
    "group_budget": 1 << 60,
    "staleness": False,
}
"""Settings under which the session shows every message as recorded (the usage then fits it)."""


def replay_session(traces: Iterable[Trace]) -> list[SessionPair]:
    """Each trace through a real in-memory session, the recorded usage fed back request by
    request; the pairs measured as :func:`collect_pairs` takes them (both requests with usage,
    new messages, a prompt that grew)."""
    out: list[SessionPair] = []
    for trace in traces:
        model = trace.model
        family = tokenizer_profile(model).name if model else "unknown"
        text_actions = trace.format in _TEXT_ACTION_FORMATS
        messages = [_as_sent(m) for m in trace.messages] if text_actions else list(trace.messages)
        reports = []
        with Budget.in_memory({**_NO_CHANGE, "model": model}) as session:
            for i, request in enumerate(trace.requests):
                before = trace.requests[i - 1].usage if i else None
                usage = None if before is None else before.as_anthropic()
                history = messages[: request.n_messages]
                reports.append(session.prepare(history, usage=usage, now=float(i)).report)
        for i in range(1, len(trace.requests)):
            previous, request = trace.requests[i - 1], trace.requests[i]
            if previous.usage is None or request.usage is None:
                continue
            delta = request.usage.prompt_tokens - previous.usage.prompt_tokens
            if request.n_messages <= previous.n_messages or delta <= 0:
                continue
            out.append(
                SessionPair(
                    trace=trace.name,
                    family=family,
                    delta=delta,
                    next_prompt=request.usage.prompt_tokens,
                    raw=reports[i].tokens_after_raw,
                    corrected=reports[i].tokens_after,
                )
            )
    return out


@dataclass(frozen=True, slots=True)
class Calibrated:
    """One family's session estimates before (``raw``) and after the learned correction."""

    n: int
    prompt_median_abs_raw: float
    prompt_median_abs: float
    under_raw: float
    """Share of requests whose whole prompt was underestimated by more than 2%, before."""
    under: float
    """The same share after the correction."""
    delta_median_abs_raw: float
    delta_median_abs: float


def _figures(group: Sequence[SessionPair], corrected: bool) -> tuple[float, float, float]:
    """Median |error| of the whole prompt, share under by more than 2%, median |error| per delta."""
    prompt = [p.prompt_error(corrected) for p in group]
    return (
        statistics.median(abs(e) for e in prompt),
        sum(e < -UNDER_PROMPT_BY for e in prompt) / len(prompt),
        statistics.median(abs(p.delta_error(corrected)) for p in group),
    )


def calibrated(pairs: Sequence[SessionPair]) -> dict[str, Calibrated]:
    """The before/after figures of :func:`replay_session`'s pairs, overall and per family."""
    groups: dict[str, list[SessionPair]] = {"all": list(pairs)}
    for p in pairs:
        groups.setdefault(f"family:{p.family}", []).append(p)
    out: dict[str, Calibrated] = {}
    for name in sorted(groups, key=lambda k: (k != "all", k)):
        group = groups[name]
        if not group:
            continue

        (med_raw, under_raw, delta_raw), (med, under, delta) = (
            _figures(group, False),
            _figures(group, True),
        )
        out[name] = Calibrated(len(group), med_raw, med, under_raw, under, delta_raw, delta)
    return out


def render_calibrated(rows: dict[str, Calibrated]) -> str:
    """The session replay's before/after figures as a plain-text table."""
    lines = [
        "Replayed through a session (recorded usage fed back): raw -> corrected estimate",
        f"{'group':24} {'n':>5} {'prompt med|e|':>17} {'prompt under>2%':>17} {'delta med|e|':>17}",
    ]
    for name, r in rows.items():
        lines.append(
            f"{name:24} {r.n:5d} {r.prompt_median_abs_raw:7.2%} -> {r.prompt_median_abs:6.2%} "
            f"{r.under_raw:7.1%} -> {r.under:6.1%} "
            f"{r.delta_median_abs_raw:7.1%} -> {r.delta_median_abs:6.1%}"
        )
    return "\n".join(lines)


def render(result: TokenAccuracy) -> str:
    """The result as a plain-text table."""
    lines = [
        f"{result.traces} traces, {result.pairs} request pairs measured; skipped: "
        f"{result.skipped.not_grown} whose prompt did not grow (compacted or reset), "
        f"{result.skipped.no_new_messages} with no new message; "
        f"{result.incomplete_pairs} pairs from traces missing sent content (not in 'added').",
        "",
        f"{'method':16} {'group':24} {'n':>5} {'med|e|':>7} {'p90|e|':>7} {'p95|e|':>7} "
        f"{'median':>7} {'under':>6} {'<-10%':>6}",
    ]
    for method, by_group in result.groups.items():
        for group, s in by_group.items():
            lines.append(
                f"{method:16} {group:24} {s.n:5d} {s.median_abs:7.1%} {s.p90_abs:7.1%} "
                f"{s.p95_abs:7.1%} {s.median:+7.1%} {s.under_share:6.0%} {s.under10_share:6.0%}"
            )
        lines.append("")
    return "\n".join(lines)


def main(*, traces_dir: Path = DEFAULT_TRACES, json_path: Path | None = None) -> int:
    """Measure, print the table, optionally write the JSON.

    The command line is ``python -m benchmarks tokens`` (see ``benchmarks/cli.py``).
    """
    from benchmarks.importers import load_dir

    traces, skipped_files = load_dir(traces_dir)
    result = measure(traces)
    session = calibrated(replay_session(traces))
    print(render(result))
    print(render_calibrated(session))
    if skipped_files:
        print(f"{len(skipped_files)} files under {traces_dir} held no trace.")
    if json_path is not None:
        data = {**result.to_json(), "session": {k: asdict(v) for k, v in session.items()}}
        json_path.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
    return 0


def command(
    traces: Annotated[Path | None, typer.Option(help="Traces directory.")] = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Write the results here.")
    ] = None,
) -> None:
    """Accuracy of the token estimates against the usage the recorded traces report."""
    if traces is None:
        raise typer.Exit(main(json_path=json_path))
    raise typer.Exit(main(traces_dir=traces, json_path=json_path))


if __name__ == "__main__":
    from benchmarks._command import run_alone

    run_alone(command, "benchmarks.tokens")
