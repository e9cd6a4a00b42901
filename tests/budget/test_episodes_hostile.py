"""Hostile tests of the read-back episodes (``budget.session._quotes``): each answer quoting a
needed kept result outside its would-be envelope, with a line no earlier answer quoted from it,
is one read-back a spill would have cost (``budget.policy.readbacks_per_need``).

Real sessions on disk: the counts are read from the decision log's request records (``p``,
``q``, ``e`` and ``k``), a session that went on compared with one reopened before each request.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from budget import Budget, BudgetConfig
from budget.policy import (
    Observed,
    Outlook,
    Prices,
    readback_chance,
    readback_cost,
    readbacks_per_need,
    spill_verdict,
)
from budget.session._bodies import Bodies
from tests.budget.test_kept_evidence import (
    EPISODES,
    EXPOSED,
    MID,
    MIDDLE_LINE,
    NEEDED,
    _result,
)
from tests.budget.test_kept_evidence_hostile import _requests, _rewrite_last_request

OTHER_LINE = f"row 0150: value=1050 status=ok detail={'y' * 40}"
"""Another line of :data:`MID` its preview does not show."""


def _call(call_id: str, text: str = "", inp: Any = None) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    blocks.append(
        {"type": "tool_use", "id": call_id, "name": "Bash", "input": inp or {"command": call_id}}
    )
    return {"role": "assistant", "content": blocks}


def _evidence(path: Path) -> list[tuple[Any, ...]]:
    """Per request record, the kept results' evidence it logged: its counts, ``q``, ``e``, ``k``."""
    return [(r["p"][EXPOSED:], r.get("q"), r.get("e"), r.get("k")) for r in _requests(path)]


def _prepare(path: Path, histories: list[list[Any]], restarts: set[int]) -> None:
    """Prepare each of ``histories`` in turn, the session reopened before each in ``restarts``."""
    session = Budget.open(path, BudgetConfig())
    for i, history in enumerate(histories):
        if i in restarts:
            session.close()
            session = Budget.open(path, BudgetConfig())
        session.prepare(history, now=10.0 * i)
    session.close()


def _grown(steps: list[list[Any]]) -> list[list[Any]]:
    """The histories of ``steps`` appended in turn."""
    out: list[list[Any]] = []
    for step in steps:
        out.append([*(out[-1] if out else []), *step])
    return out


class _Interrupted(Exception):
    """Injected in the middle of a request (a KeyboardInterrupt, a MemoryError)."""


def test_a_request_interrupted_after_looking_still_logs_what_it_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request fails after it found a needed result but before its record was logged, and the
    caller prepares it again: the log names what was found (``q``, ``e``), so the session,
    reopened later, counts a line quoted again neither as a new need nor as a new read-back,
    as a session reopened before every request does."""
    first = [{"role": "user", "content": "Check."}, _call("c1"), _result("c1", MID)]
    steps = [
        first,
        [_call("a1", f"see:\n{MIDDLE_LINE}"), _result("a1", "ok")],
        [_call("a2", "a plain remark, nothing quoted"), _result("a2", "ok")],
        [_call("a3", f"again:\n{MIDDLE_LINE}"), _result("a3", "ok")],
    ]
    histories = _grown(steps)
    real = Bodies.materialize

    def failing(self: Bodies, made: Any, by_id: Any) -> Any:
        raise _Interrupted

    def run(path: Path, reopen_each: bool) -> None:
        session = Budget.open(path, BudgetConfig())
        for i, history in enumerate(histories):
            if i == 1:  # the first attempt fails after the quotes were looked at
                monkeypatch.setattr(Bodies, "materialize", failing)
                with pytest.raises(_Interrupted):
                    session.prepare(history, now=10.0 * i)
                monkeypatch.setattr(Bodies, "materialize", real)
            if reopen_each or i == len(histories) - 1:
                session.close()
                session = Budget.open(path, BudgetConfig())
            session.prepare(history, now=10.0 * i + 1)
        session.close()

    run(tmp_path / "a", reopen_each=False)
    run(tmp_path / "b", reopen_each=True)
    assert _evidence(tmp_path / "a") == _evidence(tmp_path / "b")
    assert _requests(tmp_path / "a")[-1]["p"][NEEDED : NEEDED + 2] == [1, 1]


def test_a_re_read_answer_is_not_charged_to_a_result_that_came_after_it(tmp_path: Path) -> None:
    """Two answers quote a kept result, then a re-run brings the same lines again (kept too);
    the caller then edits its first message, so every answer is looked at again: the answers
    that came before the re-run did not quote it, so neither a need nor a read-back is charged
    to it (the counts stay those of the session whose history did not diverge)."""
    again = MID.replace("row 0000", "rox 0000")  # another text, the same middle lines
    steps = [
        [{"role": "user", "content": "Check the table."}, _call("c1"), _result("c1", MID)],
        [_call("a1", f"see:\n{MIDDLE_LINE}"), _result("a1", "ok")],
        [_call("a2", f"and:\n{OTHER_LINE}"), _result("a2", "ok")],
        [_call("c2"), _result("c2", again)],
        [_call("a3", "a plain remark, nothing quoted"), _result("a3", "ok")],
        [_call("a4", "moving on, nothing quoted either"), _result("a4", "ok")],
    ]
    straight = _grown(steps)
    edited = [
        *straight[:-1],
        [{"role": "user", "content": "Check the table, please."}, *straight[-1][1:]],
    ]
    _prepare(tmp_path / "straight", straight, set())
    _prepare(tmp_path / "edited", edited, set())
    _prepare(tmp_path / "reopened", edited, set(range(1, len(edited))))
    for name in ("straight", "edited", "reopened"):
        last = _requests(tmp_path / name)[-1]
        assert (last["p"][NEEDED : NEEDED + 2], last.get("q")) == ([1, 2], None), name
    assert _evidence(tmp_path / "edited") == _evidence(tmp_path / "reopened")


def _r_call(call_id: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "Bash",
            "arguments": json.dumps(args)}  # fmt: skip


def _r_out(call_id: str, text: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def _r_say(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": [
        {"type": "output_text", "text": text}]}  # fmt: skip


def test_one_turn_of_responses_items_is_one_read_back(tmp_path: Path) -> None:
    """One model turn quoting two new lines of a kept result, in its text and in its calls'
    inputs, is one read-back in every format: Responses items (a message, then two parallel
    function calls) count as the one Anthropic message holding the same blocks counts."""
    first = "Check the table."
    quoting = [
        {"type": "text", "text": f"see:\n{MIDDLE_LINE}"},
        {"type": "tool_use", "id": "a1", "name": "Bash", "input": {"old": OTHER_LINE}},
        {"type": "tool_use", "id": "a2", "name": "Bash", "input": {"old": MID.splitlines()[120]}},
    ]
    outs = _result("a2", "ok")
    anthropic = [
        [{"role": "user", "content": first}, _call("c1"), _result("c1", MID)],
        [
            {"role": "assistant", "content": quoting},
            {"role": "user", "content": _result("a1", "ok")["content"] + outs["content"]},
        ],
        [_call("a3", "done"), _result("a3", "ok")],
    ]
    responses = [
        [{"role": "user", "content": first}, _r_call("c1", {"cmd": "c1"}), _r_out("c1", MID)],
        [
            _r_say(f"see:\n{MIDDLE_LINE}"),
            _r_call("a1", {"old": OTHER_LINE}),
            _r_call("a2", {"old": MID.splitlines()[120]}),
            _r_out("a1", "ok"),
            _r_out("a2", "ok"),
        ],
        [_r_say("done"), _r_call("a3", {"cmd": "a3"}), _r_out("a3", "ok")],
    ]
    _prepare(tmp_path / "anthropic", _grown(anthropic), set())
    _prepare(tmp_path / "responses", _grown(responses), set())
    counts = {
        name: [r["p"][NEEDED : NEEDED + 2] for r in _requests(tmp_path / name)]
        for name in ("anthropic", "responses")
    }
    assert counts["anthropic"] == counts["responses"] == [[0, 0], [1, 1], [1, 1]]


@pytest.mark.parametrize(
    "k", [{"Bash": [0, 5, 0]}, {"Bash": [3, 2, 1], "Read": [1, 1, 1]}], ids=["5-needed-0", "2-1"]
)
def test_a_k_with_fewer_read_backs_than_needed_results_is_not_trusted(
    tmp_path: Path, k: dict[str, list[int]]
) -> None:
    """A request record's ``k`` counting fewer read-backs than needed results for a tool (no
    writer logs that: every needed result is one read-back at least) is skipped, not trusted:
    the read-backs per need it would give are below one, which no session's evidence gives."""
    steps = [[{"role": "user", "content": "Check."}, _call("c1"), _result("c1", MID)]]
    _prepare(tmp_path / "s", _grown(steps), set())
    _rewrite_last_request(tmp_path / "s", {"k": k})
    history = [*_grown(steps)[-1], _call("c2", "nothing quoted here at all"), _result("c2", "ok")]
    with Budget.open(tmp_path / "s", BudgetConfig()) as session:
        session.prepare(history, now=50.0)
    last = _requests(tmp_path / "s")[-1]
    assert last["p"][EPISODES] >= last["p"][NEEDED]


@pytest.mark.parametrize(
    "fields",
    [
        {"e": {"c1": "not a list"}},
        {"e": {"c1": [True, 1.5, -3, None, [1], {"a": 1}, 2**64 - 1]}},
        {"e": [1, 2, 3]},
        {"e": {"c1": list(range(100_000))}},
        {"k": {"Bash": [True, 1, 1]}},
        {"k": {"Bash": [1.0, 1, 1]}},
        {"k": {"Bash": [0, 1, 1, 1]}},
        {"k": {"Bash": [0]}},
        {"k": {"Bash": "0,1,1"}},
        {"p": [0, 0, 0, 0, 0.0, 0, 0, 10, None, 0.0, 0.0, 0.0, 0, 1, True]},
        {"p": [0, 0, 0, 0, 0.0, 0, 0, 10, None, 0.0, 0.0, 0.0, 0, 1, "2"]},
    ],
    ids=lambda f: repr(f)[:40],
)
def test_a_garbled_e_k_or_p_is_not_fatal_and_a_new_quote_counts(
    tmp_path: Path, fields: dict[str, Any]
) -> None:
    """Request records whose ``e``, ``k`` or 15-field ``p`` hold the wrong types or sizes: the
    session opens, and a quote of a new line after it counts one need and one read-back."""
    steps = [[{"role": "user", "content": "Check."}, _call("c1"), _result("c1", MID)]]
    _prepare(tmp_path / "s", _grown(steps), set())
    _rewrite_last_request(tmp_path / "s", fields)
    history = [*_grown(steps)[-1], _call("c2", f"see:\n{MIDDLE_LINE}"), _result("c2", "ok")]
    with Budget.open(tmp_path / "s", BudgetConfig()) as session:
        session.prepare(history, now=50.0)
    last = _requests(tmp_path / "s")[-1]
    assert last["p"][NEEDED : NEEDED + 2] == [1, 1] and last["q"] == ["c1"]


OTHER = "\n".join(f"col {i:04d}: other={i * 3} state=fine detail={'z' * 40}" for i in range(200))
"""Another text the cost model weighs and keeps, no line in common with :data:`MID`."""


def test_an_edited_result_quoted_in_the_request_that_decides_it_anew_is_not_charged(
    tmp_path: Path,
) -> None:
    """The caller rewrites a kept result (same call id) and the model quotes a middle line of the
    new text in the same request, which decides that text anew: like a result quoted in the
    request it arrives in, no need and no read-back, then or later, reopened or not."""
    first = [{"role": "user", "content": "Check the table."}, _call("c1"), _result("c1", MID)]
    edited = [
        *first[:2],
        _result("c1", OTHER),
        _call("c2", f"see:\n{OTHER.splitlines()[100]}"),
        _result("c2", "ok"),
    ]
    later = [*edited, _call("c3", "a plain remark, nothing quoted"), _result("c3", "ok")]
    _prepare(tmp_path / "a", [first, edited, later], set())
    _prepare(tmp_path / "b", [first, edited, later], {1, 2})
    assert [r["p"][NEEDED : NEEDED + 2] for r in _requests(tmp_path / "a")] == [[0, 0]] * 3
    assert _evidence(tmp_path / "a") == _evidence(tmp_path / "b")


def test_each_tool_is_read_back_as_often_as_its_own_needed_results_were() -> None:
    """Hand-worked: a file reader's one needed result took 16 read-backs (edited answer after
    answer), a shell's 4 needed results one each: pooled, (1 + 20) / (1 + 5) = 3.5 read-backs per
    need for either. Each tool's own count, the other tools' as its prior weighing as one result:
    the shell (17 / 2 + 4) / (1 + 4) = 2.5, the reader (5 / 5 + 16) / (1 + 1) = 8.5; a tool with
    no evidence gets the session's 3.5. A spill of a shell result risks 2.5 read-backs, not 3.5."""
    observed = Observed(exposed=10, needed=5, episodes=20)
    assert readbacks_per_need(observed, (5, 4, 4)) == pytest.approx(2.5)
    assert readbacks_per_need(observed, (5, 1, 16)) == pytest.approx(8.5)
    assert readbacks_per_need(observed) == pytest.approx(3.5)
    prices = Prices(write=1.25, read=0.1, ttl_s=300.0, regime="cached")
    look = Outlook(made=9, tokens=10_000, window=1_000_000, growth=1.0, requests=4.0)

    def risk(kind: tuple[int, int, int]) -> float:
        v = spill_verdict(prices, look, observed, tokens=1_000, envelope_tokens=100,
                          is_error=False, page_tokens=500, kind=kind)  # fmt: skip
        chance = readback_chance(observed, fresh=True, is_error=False, kind=kind[:2])
        return v.readback_risk / (chance * readback_cost(prices, look, 500))

    assert risk((5, 4, 4)) == pytest.approx(2.5) and risk((0, 0, 0)) == pytest.approx(3.5)


def test_a_history_edited_at_its_start_counts_no_exposure_again_after_a_reopen(
    tmp_path: Path,
) -> None:
    """A caller that edits its first message (its length changes) makes the history diverge; a
    session reopened before every request then logs the same exposures as the one that went on
    (the results counted are in ``w``: none is counted twice)."""
    mid = "\n".join(f"row {i:04d}: value={i * 7} status=ok detail={'y' * 40}" for i in range(200))
    steps: list[list[Any]] = [[{"role": "user", "content": "Start."}]]
    for r in range(10):
        steps.append([_call(f"c{r}"), _result(f"c{r}", mid.replace("row ", f"r{r} row "))])
    histories = _grown(steps)
    edited = [
        [{"role": "user", "content": "Start, and mind the tests."}, *h[1:]] if i >= 7 else h
        for i, h in enumerate(histories)
    ]
    _prepare(tmp_path / "a", edited, set())
    _prepare(tmp_path / "b", edited, set(range(len(edited))))
    went_on = [r["p"][EXPOSED] for r in _requests(tmp_path / "a")]
    reopened = [r["p"][EXPOSED] for r in _requests(tmp_path / "b")]
    assert went_on == reopened
    assert went_on[-1] == sum(len(r.get("w", [])) for r in _requests(tmp_path / "a"))
