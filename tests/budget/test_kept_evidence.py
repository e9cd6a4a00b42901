"""Read-back evidence from kept results: a later answer quoting what a preview would not show.

A session that has hidden nothing still learns its read-back rate: every result the cost model
weighed and kept whole is an exposure, and a later answer quoting one of its lines that the
spill's envelope would not have shown is a read-back a spill would have cost
(``budget.session._quotes``). These tests run real sessions on disk and read the counts from the
decision log's request records.
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
from budget.session._quotes import MIN_QUOTE_CHARS, answer_strings, quotable

EXPOSED, NEEDED, EPISODES = 12, 13, 14
"""Indexes of the three counts in a request record's ``p`` (``Observed.to_record``)."""

MID = "\n".join(f"row {i:04d}: value={i * 7} status=ok detail={'y' * 40}" for i in range(200))
"""A ~15,000-character result: over the preview, under the cap, so the cost model weighs it."""

MIDDLE_LINE = f"row 0100: value=700 status=ok detail={'y' * 40}"
"""A line in the middle of :data:`MID`, which its ~2,000-character preview does not show."""

FIRST_LINE = f"row 0000: value=0 status=ok detail={'y' * 40}"
"""The first line of :data:`MID`, which its preview shows."""


def _call(call_id: str, text: str = "") -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    blocks.append({"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": "x"}})
    return {"role": "assistant", "content": blocks}


def _result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": call_id, "content": text}]}  # fmt: skip


def _records(path: Path) -> list[dict[str, Any]]:
    (log,) = list(path.rglob("*.jsonl"))
    return [json.loads(line) for line in log.read_text().splitlines()]


def _requests(path: Path) -> list[dict[str, Any]]:
    return [rec for rec in _records(path) if rec.get("t") == "req"]


def _history(answer: str) -> list[list[dict[str, Any]]]:
    """The steps of a session: a kept mid-size result, then an answer saying ``answer``."""
    return [
        [{"role": "user", "content": "Check the table."}, _call("c1"), _result("c1", MID)],
        [_call("c2", answer), _result("c2", "done")],
    ]


def _run(path: Path, steps: list[list[dict[str, Any]]]) -> tuple[Budget, list[dict[str, Any]]]:
    session = Budget.open(path, BudgetConfig())
    history: list[dict[str, Any]] = []
    for i, step in enumerate(steps):
        history = history + step
        prepared = session.prepare(history, now=1.0 + i)
        if i == 0:
            (decision,) = prepared.report.decisions
            assert decision.kind == "kept" and decision.cost is not None
    return session, history


def test_a_quote_outside_the_preview_counts_the_kept_result_as_needed(tmp_path: Path) -> None:
    """An answer quoting a middle line of a kept result (a whole line, as agents quote): needed
    1 at the next request, and the request record's ``q`` names it."""
    session, _ = _run(tmp_path / "s", _history(f"The broken one is:\n  {MIDDLE_LINE}\n"))
    session.close()
    first, second = _requests(tmp_path / "s")
    assert first["p"][NEEDED] == 0 and second["p"][NEEDED] == 1
    assert second["q"] == ["c1"] and second["k"] == {"Bash": [0, 1, 1]}
    assert second["p"][EPISODES] == 1 and len(second["e"]["c1"]) == 1


def _rounds_after(steps: list[list[dict[str, Any]]], n: int) -> list[list[dict[str, Any]]]:
    """``steps`` followed by ``n`` rounds of small results (the kept one ages)."""
    return steps + [[_call(f"s{i}"), _result(f"s{i}", "ok")] for i in range(n)]


def test_a_kept_result_is_exposed_once_it_leaves_the_protected_rounds(tmp_path: Path) -> None:
    """Kept in round 0, the result counts as exposed at the request of round 5 (the default
    5 protected rounds are behind it), once, and a retry of a request counts nothing again."""
    steps = _rounds_after(_history("nothing quoted here, just a plain remark about it"), 6)
    session = Budget.open(tmp_path / "s", BudgetConfig())
    history: list[dict[str, Any]] = []
    for i, step in enumerate(steps):
        history = history + step
        session.prepare(history, now=1.0 + i)
        if i == 3:
            session.prepare(history, now=1.5 + i)  # a retry
    session.close()
    exposed = [r["p"][EXPOSED] for r in _requests(tmp_path / "s")]
    assert exposed == [0, 0, 0, 0, 0, 0, 1, 1, 1]


def test_a_quote_the_preview_shows_is_no_read_back(tmp_path: Path) -> None:
    """An answer quoting the first line, which the preview shows, leaves needed at 0."""
    session, _ = _run(tmp_path / "s", _history(f"First row:\n{FIRST_LINE}"))
    session.close()
    assert [r["p"][NEEDED] for r in _requests(tmp_path / "s")] == [0, 0]
    assert all("q" not in r for r in _requests(tmp_path / "s"))


def test_a_user_pasting_a_line_is_no_evidence(tmp_path: Path) -> None:
    """A user message holding a middle line is not the model's answer: needed stays 0."""
    steps = _history("ok")
    steps[1].insert(0, {"role": "user", "content": f"look at\n{MIDDLE_LINE}"})
    session, _ = _run(tmp_path / "s", steps)
    session.close()
    assert [r["p"][NEEDED] for r in _requests(tmp_path / "s")] == [0, 0]


def test_a_result_is_needed_once_across_a_restart(tmp_path: Path) -> None:
    """Quoted again after a restart, a result found needed before is not counted twice, and
    the resumed session logs what the session that went on logs."""
    steps = _history(f"see:\n{MIDDLE_LINE}")
    steps.append([_call("c3", f"again:\n{MIDDLE_LINE}"), _result("c3", "done")])
    went_on, history = _run(tmp_path / "a", steps)
    went_on.close()
    first, _ = _run(tmp_path / "b", steps[:2])
    first.close()
    resumed = Budget.open(tmp_path / "b", BudgetConfig())
    resumed.prepare(history, now=3.0)
    resumed.close()
    a, b = _requests(tmp_path / "a"), _requests(tmp_path / "b")
    assert [r["p"][NEEDED] for r in a] == [r["p"][NEEDED] for r in b] == [0, 1, 1]
    assert a[-1]["p"] == b[-1]["p"]


def test_a_json_encoded_tool_input_is_read_for_quotes() -> None:
    """OpenAI's tool-call arguments (a JSON string) yield the strings inside them."""
    message = {
        "role": "assistant",
        "tool_calls": [{"function": {"arguments": json.dumps({"pattern": MIDDLE_LINE})}}],
    }
    assert MIDDLE_LINE in set(answer_strings(message))
    assert list(answer_strings({"role": "tool", "content": MIDDLE_LINE})) == []


def test_quotable_lines_are_stripped_and_long_enough() -> None:
    """Lines shorter than the minimum after stripping are no quotes."""
    short = " " * 40 + "x" * (MIN_QUOTE_CHARS - 1)
    assert list(quotable(f"{short}\n  {MIDDLE_LINE}  ")) == [MIDDLE_LINE]


def test_the_fresh_chance_counts_kept_results_and_the_stale_one_does_not() -> None:
    """Hand-worked: Laplace's prior (1, 1) with 8 kept results of which 1 was needed gives
    (1 + 1) / (2 + 8) = 0.2 for a fresh result; a stale result's chance ignores them."""
    observed = Observed(exposed=8, needed=1)
    assert readback_chance(observed, fresh=True, is_error=False) == pytest.approx(0.2)
    assert readback_chance(observed, fresh=False, is_error=False) == pytest.approx(0.1)
    # With 2 results hidden and 1 read back: (1 + 1 + 1) / (2 + 2 + 8) = 0.25.
    both = Observed(exposed=8, needed=1, hidden=2, readbacks=1, recalled=1)
    assert readback_chance(both, fresh=True, is_error=False) == pytest.approx(0.25)


def test_old_logs_resume_without_the_new_counts() -> None:
    """A request record's ``p`` of 12 fields (before kept evidence) restores with none of it;
    14 fields restore both counts, a negative one is refused."""
    old = [3, 2, 1, 1, 0.0, 0, 0, 100, 1.0, 0.0, 0.0, 0.0]
    restored = Observed.from_record(old)
    assert restored is not None and (restored.exposed, restored.needed) == (0, 0)
    new = Observed.from_record([*old, 4, 1])
    assert new is not None and (new.exposed, new.needed, new.episodes) == (4, 1, 1)
    now = Observed.from_record([*old, 4, 1, 3])
    assert now is not None and (now.exposed, now.needed, now.episodes) == (4, 1, 3)
    assert Observed.from_record([*old, -1, 0]) is None
    assert Observed.from_record([*old, 1]) is None


def test_each_tool_has_its_own_rate_with_the_rest_of_the_session_as_its_prior() -> None:
    """Hand-worked: 10 kept results answered, 1 needed; 8 of them a file reader's, never
    needed, 2 a shell's, 1 needed. The reader: the others' rate (1 + 1) / (2 + 2) = 0.5 weighs
    as 2 results beside its 8: (2 x 0.5 + 0) / (2 + 8) = 0.1. The shell: the others' rate
    1 / (2 + 8) = 0.1, so (2 x 0.1 + 1) / (2 + 2) = 0.3. With no evidence of its own, a tool
    gets the session's rate, (1 + 1) / (2 + 10) = 1/6."""
    observed = Observed(exposed=10, needed=1)
    assert readback_chance(observed, fresh=True, is_error=False, kind=(8, 0)) == pytest.approx(0.1)
    assert readback_chance(observed, fresh=True, is_error=False, kind=(2, 1)) == pytest.approx(0.3)
    assert readback_chance(observed, fresh=True, is_error=False) == pytest.approx(1 / 6)
    # A stale result's chance is the session's, whatever its tool.
    stale = readback_chance(observed, fresh=False, is_error=False, kind=(2, 1))
    assert stale == pytest.approx(0.1)


def _two_tools(rounds: int) -> list[list[dict[str, Any]]]:
    """Steps of a session reading a file (never quoted) and running a shell (quoted in the
    next answer), one mid-size result each per round."""
    steps: list[list[dict[str, Any]]] = [[{"role": "user", "content": "Work on it."}]]
    for r in range(rounds):
        text = MID.replace("row ", f"r{r} row ")
        quote = f"The last run says:\nr{r - 1} {MIDDLE_LINE}" if r else "Start."
        read, run = f"read{r}", f"run{r}"
        steps[-1].append({"role": "assistant", "content": [
            {"type": "text", "text": quote},
            {"type": "tool_use", "id": read, "name": "Read", "input": {"file_path": f"f{r}"}},
            {"type": "tool_use", "id": run, "name": "Bash", "input": {"command": f"t {r}"}},
        ]})  # fmt: skip
        steps[-1].append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": read, "content": text.replace("status", "file")},
            {"type": "tool_result", "tool_use_id": run, "content": text},
        ]})  # fmt: skip
        steps.append([])
    steps[-1] = [{"role": "assistant", "content": f"Done:\n{f'r{rounds - 1} ' + MIDDLE_LINE}"}]
    return steps


def test_the_counts_per_tool_are_logged_and_restored(tmp_path: Path) -> None:
    """A session whose shell results are quoted and whose file reads are not counts each tool
    apart (``k``), and a session reopened before every request logs the same records."""
    steps = _two_tools(9)
    went_on = Budget.open(tmp_path / "a", BudgetConfig())
    history: list[dict[str, Any]] = []
    for i, step in enumerate(steps):
        history = history + step
        went_on.prepare(history, now=1.0 + i)
    went_on.close()
    history = []
    for i, step in enumerate(steps):
        history = history + step
        with Budget.open(tmp_path / "b", BudgetConfig()) as reopened:
            reopened.prepare(history, now=1.0 + i)
    kinds: dict[str, list[int]] = {}
    for rec in _requests(tmp_path / "a"):
        kinds.update(rec.get("k", {}))
    assert kinds["Bash"][1] >= 3 and kinds["Read"][1] == 0
    assert kinds["Read"][0] > 0
    strip = [{k: v for k, v in r.items() if k != "at"} for r in _requests(tmp_path / "a")]
    again = [{k: v for k, v in r.items() if k != "at"} for r in _requests(tmp_path / "b")]
    assert strip == again


def _steps_quoting(*answers: str) -> list[list[dict[str, Any]]]:
    """A kept mid-size result, then one step per answer (each a call with that text)."""
    steps = [[{"role": "user", "content": "Check the table."}, _call("c1"), _result("c1", MID)]]
    for i, answer in enumerate(answers):
        steps.append([_call(f"a{i}", answer), _result(f"a{i}", "done")])
    return steps


OTHER_LINE = f"row 0150: value=1050 status=ok detail={'y' * 40}"
"""Another line of :data:`MID` its preview does not show."""


def test_each_answer_quoting_new_lines_of_a_needed_result_is_one_more_read_back(
    tmp_path: Path,
) -> None:
    """Three answers quote the kept result outside its preview: a middle line, the same line
    again, then another line. The result is needed once; the first and third answers are read-
    backs a spill would have cost (the second quotes what the first brought back): ``k`` says
    [exposed 0, needed 1, episodes 2], and the two lines' hashes are logged in ``e``."""
    steps = _steps_quoting(f"see:\n{MIDDLE_LINE}", f"again:\n{MIDDLE_LINE}", f"and:\n{OTHER_LINE}")
    session, _ = _run(tmp_path / "s", steps)
    session.close()
    reqs = _requests(tmp_path / "s")
    assert [r["p"][NEEDED] for r in reqs] == [0, 1, 1, 1]
    assert [r["p"][EPISODES] for r in reqs] == [0, 1, 1, 2]
    assert [len(r.get("e", {}).get("c1", [])) for r in reqs] == [0, 1, 0, 1]
    assert reqs[-1]["k"] == {"Bash": [0, 1, 2]}


def test_quoted_lines_are_remembered_across_a_restart(tmp_path: Path) -> None:
    """A session reopened before each request counts the same read-backs as the one that went
    on: a line quoted before the restart is no new read-back after it."""
    steps = _steps_quoting(f"see:\n{MIDDLE_LINE}", f"again:\n{MIDDLE_LINE}", f"and:\n{OTHER_LINE}")
    went_on, _ = _run(tmp_path / "a", steps)
    went_on.close()
    history: list[dict[str, Any]] = []
    for i, step in enumerate(steps):
        history = history + step
        with Budget.open(tmp_path / "b", BudgetConfig()) as reopened:
            reopened.prepare(history, now=1.0 + i)
    strip = [{k: v for k, v in r.items() if k != "at"} for r in _requests(tmp_path / "a")]
    again = [{k: v for k, v in r.items() if k != "at"} for r in _requests(tmp_path / "b")]
    assert strip == again and again[-1]["p"][EPISODES] == 2


def test_a_log_of_two_counts_per_tool_resumes_with_one_read_back_per_need(tmp_path: Path) -> None:
    """A request record's ``k`` written before episodes were counted ([exposed, needed])
    restores as one read-back per needed result."""
    from budget.session._records import restore_policy

    rec = {"t": "req", "m": 3, "at": 1.0, "k": {"Bash": [4, 2]}, "e": {"c1": [7, "x", -1]}}
    _, _, evidence = restore_policy([rec])
    assert evidence.kinds == {"Bash": (4, 2, 2)} and evidence.quoted == {"c1": frozenset({7})}


def test_the_read_backs_per_need_are_the_sessions_own_with_a_prior_of_one() -> None:
    """Hand-worked: no evidence, one read-back per need; 3 needed results that cost 7 read-
    backs give (1 + 7) / (1 + 3) = 2."""
    assert readbacks_per_need(Observed()) == 1.0
    assert readbacks_per_need(Observed(exposed=5, needed=3, episodes=7)) == pytest.approx(2.0)


def test_a_spill_risks_as_many_read_backs_as_the_session_needed_per_result() -> None:
    """Hand-worked spill: 1,000 tokens, envelope 100, a page of 500, at a cached request of
    10,000 tokens with 4 requests expected after it. Saving (900 x (1.25 + 0.1 x 4)) = 1,485.
    With 3 results needed out of 8 kept, (1 + 3) / (2 + 8) = 0.4; one read-back costs
    0.1 x 10,000 + 1.25 x 500 + 0.1 x 500 x 4 = 1,825, so the risk is 0.4 x 1,825 = 730 at one
    read-back per need, and 0.4 x 2 x 1,825 = 1,460 when the 3 needed cost 7 read-backs (the
    prior one besides: (1 + 7) / (1 + 3) = 2)."""
    prices = Prices(write=1.25, read=0.1, ttl_s=300.0, regime="cached")
    look = Outlook(made=9, tokens=10_000, window=1_000_000, growth=1.0, requests=4.0)
    assert readback_cost(prices, look, 500) == pytest.approx(1_825)

    def risk(episodes: int) -> float:
        observed = Observed(requests=9, exposed=8, needed=3, episodes=episodes)
        v = spill_verdict(
            prices, look, observed, tokens=1_000, envelope_tokens=100, is_error=False,
            page_tokens=500,
        )  # fmt: skip
        assert v.saving == pytest.approx(1_485)
        return v.readback_risk

    assert risk(3) == pytest.approx(730)
    assert risk(7) == pytest.approx(1_460)
