"""Hostile tests of the read-back evidence from kept results (``budget.session._quotes``).

Real sessions on disk: the counts and the needed ids are read from the decision log's request
records (``p`` and ``q``), the copies compared byte for byte across restarts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import Budget, BudgetConfig, ToolPolicy
from spill._log import encode_records
from tests._ci import require_module
from tests._lanes import examples

EXPOSED, NEEDED = 12, 13
"""Indexes of the two counts in a request record's ``p`` (``Observed.to_record``)."""

MID = "\n".join(f"row {i:04d}: value={i * 7} status=ok detail={'y' * 40}" for i in range(200))
"""A ~15,000-character result the cost model weighs and keeps (under the cap)."""

MIDDLE_LINE = f"row 0100: value=700 status=ok detail={'y' * 40}"
"""A line of :data:`MID` its preview does not show."""

OTHER = "\n".join(f"col {i:04d}: other={i * 3} state=fine detail={'z' * 40}" for i in range(200))
"""Another weighed-and-kept result, no line in common with :data:`MID`."""

OTHER_MIDDLE = f"col 0100: other=300 state=fine detail={'z' * 40}"


# -- Anthropic messages ---------------------------------------------------------------------------


def _call(call_id: str, text: str = "", name: str = "Bash", inp: Any = None) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    blocks.append(
        {"type": "tool_use", "id": call_id, "name": name, "input": inp or {"command": call_id}}
    )
    return {"role": "assistant", "content": blocks}


def _result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": call_id, "content": text}]}  # fmt: skip


# -- OpenAI Responses items -----------------------------------------------------------------------


def _r_call(call_id: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": "function_call",
        "call_id": call_id,
        "name": "shell",
        "arguments": json.dumps(args or {"cmd": call_id}),
    }


def _r_out(call_id: str, text: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def _r_say(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": [
        {"type": "output_text", "text": text}]}  # fmt: skip


# -- sessions -------------------------------------------------------------------------------------


def _requests(path: Path) -> list[dict[str, Any]]:
    (log,) = list(path.rglob("*.jsonl"))
    records = []
    for line in log.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return [rec for rec in records if rec.get("t") == "req"]


def _run(
    path: Path, steps: list[list[dict[str, Any]]], config: BudgetConfig | None = None
) -> tuple[list[bytes], list[Any]]:
    """Prepare each step appended in turn in one session; the copies and the final history."""
    session = Budget.open(path, config or BudgetConfig())
    history: list[Any] = []
    copies = []
    for i, step in enumerate(steps):
        history = history + step
        copies.append(orjson.dumps(session.prepare(history, now=1.0 + i).messages))
    session.close()
    return copies, history


def _rewrite_last_request(path: Path, fields: dict[str, Any]) -> None:
    """Set ``fields`` in the log's last request record, its checksum made anew (a record a
    buggy or foreign writer left, not a torn line)."""
    (log,) = list(path.rglob("*.jsonl"))
    lines = log.read_bytes().splitlines()
    last = max(i for i, line in enumerate(lines) if json.loads(line).get("t") == "req")
    rec = {k: v for k, v in json.loads(lines[last]).items() if k not in ("v", "crc")}
    rec.update(fields)
    lines[last] = encode_records([rec]).rstrip(b"\n")
    log.write_bytes(b"\n".join(lines) + b"\n")


def _needed(path: Path) -> list[int]:
    return [r["p"][NEEDED] for r in _requests(path)]


def test_a_later_tool_output_repeating_a_line_is_no_answer(tmp_path: Path) -> None:
    """Responses: a small function_call_output repeating a kept result's middle line is a tool's
    output, not the model's answer: the kept result is not needed."""
    steps = [
        [{"role": "user", "content": "Check the table."}, _r_call("c1"), _r_out("c1", MID)],
        [_r_call("c2"), _r_out("c2", f"grep hit:\n{MIDDLE_LINE}\n")],
        [_r_call("c3"), _r_out("c3", "ok")],
    ]
    _run(tmp_path / "s", steps)
    assert _needed(tmp_path / "s") == [0, 0, 0]


def test_a_quote_read_off_a_later_small_result_is_not_charged_to_the_kept_one(
    tmp_path: Path,
) -> None:
    """Anthropic: the model quotes a line a later small grep showed it in full; the older kept
    result holding the same line did not need to be whole for that."""
    steps = [
        [{"role": "user", "content": "Check the table."}, _call("c1"), _result("c1", MID)],
        [_call("c2"), _result("c2", f"grep hit:\n{MIDDLE_LINE}\n")],
        [_call("c3", f"The grep shows:\n{MIDDLE_LINE}"), _result("c3", "ok")],
    ]
    _run(tmp_path / "s", steps)
    assert _needed(tmp_path / "s") == [0, 0, 0]


def test_a_result_edited_after_its_decision_indexes_as_a_resumed_session_would(
    tmp_path: Path,
) -> None:
    """The caller rewrites a kept result's text (same call id) and the model quotes a middle
    line of the new text: the session that went on logs what a resumed one logs."""
    edited = OTHER
    first = [{"role": "user", "content": "Check the table."}, _call("c1"), _result("c1", MID)]
    second = [
        {"role": "user", "content": "Check the table."},
        _call("c1"),
        _result("c1", edited),
        _call("c2", f"see:\n{OTHER_MIDDLE}"),
        _result("c2", "ok"),
    ]
    on = Budget.open(tmp_path / "a", BudgetConfig())
    a = [on.prepare(first, now=1.0).messages, on.prepare(second, now=2.0).messages]
    on.close()
    off = Budget.open(tmp_path / "b", BudgetConfig())
    b = [off.prepare(first, now=1.0).messages]
    off.close()
    off = Budget.open(tmp_path / "b", BudgetConfig())
    b.append(off.prepare(second, now=2.0).messages)
    off.close()
    assert [r["p"] for r in _requests(tmp_path / "a")] == [
        r["p"] for r in _requests(tmp_path / "b")
    ]
    assert orjson.dumps(a) == orjson.dumps(b)


def test_a_retry_counts_what_the_first_attempt_counted(tmp_path: Path) -> None:
    """A result quoted in the request it arrives in is not counted (it had no decision yet);
    prepared again (a retry), the same history must not count it either."""
    steps = [
        [
            {"role": "user", "content": "Check the table."},
            _call("c0"),
            _result("c0", "ok"),
        ],
        [
            _call("c1"),
            _result("c1", MID),
            {"role": "assistant", "content": f"The broken row:\n{MIDDLE_LINE}"},
            {"role": "user", "content": "go on"},
        ],
    ]
    session = Budget.open(tmp_path / "s", BudgetConfig())
    session.prepare(steps[0], now=1.0)
    history = steps[0] + steps[1]
    first = orjson.dumps(session.prepare(history, now=2.0).messages)
    again = orjson.dumps(session.prepare(history, now=3.0).messages)
    session.close()
    assert first == again
    reqs = _requests(tmp_path / "s")
    assert reqs[1]["p"][NEEDED] == reqs[2]["p"][NEEDED]


def test_an_unknown_id_in_a_logged_q_does_not_inflate_needed(tmp_path: Path) -> None:
    """A request record's ``q`` naming an id no result has (a hand-edited or foreign log): the
    needed count stays what ``p`` said plus the results found since."""
    steps = [
        [{"role": "user", "content": "Check."}, _call("c1"), _result("c1", MID)],
        [_call("c2"), _result("c2", OTHER)],
    ]
    _run(tmp_path / "s", steps)
    _rewrite_last_request(tmp_path / "s", {"q": ["ghost-1", "ghost-2", 7, None]})
    session = Budget.open(tmp_path / "s", BudgetConfig())
    history = steps[0] + steps[1] + [_call("c3", f"see:\n{MIDDLE_LINE}"), _result("c3", "ok")]
    session.prepare(history, now=5.0)
    session.close()
    assert _requests(tmp_path / "s")[-1]["p"][NEEDED] == 1


# -- determinism: a session that goes on vs one reopened ------------------------------------------

FORMATS = ("anthropic", "chat", "responses")


def _text(r: int, lines: int) -> str:
    """Result ``r``'s text: ``lines`` unique quotable lines (some shared by every result)."""
    out = [
        f"r{r:03d} line {i:04d}: value={r * 31 + i} status=ok pad={'q' * 24}" for i in range(lines)
    ]
    out.insert(lines // 2, f"shared line in every result: status=ok pad={'s' * 24}")
    return "\n".join(out)


def _round(fmt: str, r: int, text: str, quote: str, in_args: bool) -> list[Any]:
    """One round in ``fmt``: the model's answer (``quote`` in its text or in its call's input),
    the call, and its result."""
    cid = f"call_{r}"
    args = {"command": f"cat f{r}", "note": quote if in_args else ""}
    say = f"Looking at it.\n{quote}" if quote and not in_args else "Looking at it."
    if fmt == "anthropic":
        return [_call(cid, say, inp=args), _result(cid, text)]
    if fmt == "chat":
        call = {
            "id": cid,
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps(args)},
        }
        return [
            {"role": "assistant", "content": say, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": cid, "content": text},
        ]
    return [_r_say(say), _r_call(cid, args), _r_out(cid, text)]


def _conversation(fmt: str, plan: list[tuple[int, int, int, bool]]) -> list[list[Any]]:
    """The steps of a conversation: per round (lines of its result, the round it quotes from
    counted back, the line it quotes, in the call's input)."""
    first: Any = {"role": "user", "content": "Investigate the tables."}
    steps: list[list[Any]] = []
    texts: list[str] = []
    for r, (lines, back, line, in_args) in enumerate(plan):
        quote = ""
        if texts and back:
            src = texts[max(len(texts) - back, 0)].splitlines()
            quote = src[line % len(src)]
        texts.append(_text(r, lines))
        step = _round(fmt, r, texts[-1], quote, in_args)
        steps.append(([first] if r == 0 else []) + step)
    return steps


def _prepare_each(path: Path, histories: list[list[Any]], restarts: set[int]) -> None:
    """Prepare each of ``histories`` in turn (they need not extend one another), the session
    closed and reopened before each request in ``restarts``."""
    session = Budget.open(path, BudgetConfig())
    for i, history in enumerate(histories):
        if i in restarts:
            session.close()
            session = Budget.open(path, BudgetConfig())
        session.prepare(history, now=float(i))
    session.close()


def _replay(path: Path, steps: list[list[Any]], restarts: set[int]) -> list[bytes]:
    """The copies of ``steps`` prepared in turn, the session closed and reopened before each
    request in ``restarts``."""
    session = Budget.open(path, BudgetConfig())
    history: list[Any] = []
    copies = []
    for i, step in enumerate(steps):
        if i in restarts:
            session.close()
            session = Budget.open(path, BudgetConfig())
        history = history + step
        copy = session.prepare(history, now=10.0 * i).messages
        copies.append(orjson.dumps(copy, default=lambda o: o.model_dump(mode="json")))
    session.close()
    return copies


plans = st.lists(
    st.tuples(
        st.sampled_from([5, 40, 120, 200, 400]),  # ~0.3k, 2.6k, 8k, 13k, 26k characters
        st.integers(0, 4),
        st.integers(0, 400),
        st.booleans(),
    ),
    min_size=2,
    max_size=14,
)


@settings(
    max_examples=examples(30),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(fmt=st.sampled_from(FORMATS), plan=plans, data=st.data())
def test_a_reopened_session_logs_and_sends_what_the_session_that_went_on_does(
    tmp_path_factory: pytest.TempPathFactory, fmt: str, plan: Any, data: st.DataObject
) -> None:
    """Answers quoting lines of earlier results, in every format: the same ``p``, ``q`` and copies
    whether the session went on, reopened at every request, or reopened at random points."""
    steps = _conversation(fmt, plan)
    every = set(range(1, len(steps)))
    some = data.draw(st.sets(st.integers(1, len(steps) - 1)))
    base = tmp_path_factory.mktemp("q")
    runs = {name: _replay(base / name, steps, r) for name, r in
            (("on", set()), ("every", every), ("some", some))}  # fmt: skip
    logs = {name: [(r["p"], r.get("q")) for r in _requests(base / name)] for name in runs}
    assert logs["on"] == logs["every"] == logs["some"]
    assert runs["on"] == runs["every"] == runs["some"]


def test_quotes_are_found_in_every_format(tmp_path: Path) -> None:
    """The determinism property is not vacuous: a middle line quoted in text or in a call's
    input counts in each format."""
    for fmt in FORMATS:
        for in_args in (False, True):
            steps = _conversation(fmt, [(200, 0, 0, False), (5, 1, 150, in_args), (5, 0, 0, False)])
            path = tmp_path / f"{fmt}-{in_args}"
            _replay(path, steps, set())
            assert _needed(path)[-1] == 1, (fmt, in_args)


# -- logs: torn and garbled ``q`` -----------------------------------------------------------------


@pytest.mark.parametrize("q", ["c1", {"c1": 1}, [["c1"]], [1, 2.5, None, True], 7, None], ids=repr)
def test_a_garbled_q_restores_nothing_and_is_not_fatal(tmp_path: Path, q: Any) -> None:
    """A request record's ``q`` that is not a list of strings restores no needed id: the session
    opens, and a later quote of the result still counts once."""
    steps = [[{"role": "user", "content": "Check."}, _call("c1"), _result("c1", MID)]]
    _, history = _run(tmp_path / "s", steps)
    _rewrite_last_request(tmp_path / "s", {"q": q})
    session = Budget.open(tmp_path / "s", BudgetConfig())
    history = [*history, _call("c2", f"see:\n{MIDDLE_LINE}"), _result("c2", "ok")]
    session.prepare(history, now=5.0)
    session.close()
    assert _requests(tmp_path / "s")[-1]["p"][NEEDED] == 1


def test_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    """The log's last request record cut mid-line (a crash while appending) is skipped: the
    session opens and counts from the record before, finding the quote once."""
    steps = [
        [{"role": "user", "content": "Check."}, _call("c1"), _result("c1", MID)],
        [_call("c2", f"see:\n{MIDDLE_LINE}"), _result("c2", "ok")],
    ]
    _, history = _run(tmp_path / "s", steps)
    (log,) = list((tmp_path / "s").rglob("*.jsonl"))
    data = log.read_bytes()
    log.write_bytes(data[: data.rindex(b'"q"') + 3])
    session = Budget.open(tmp_path / "s", BudgetConfig())
    session.prepare([*history, _call("c3", f"again:\n{MIDDLE_LINE}"), _result("c3", "ok")], now=9)
    session.close()
    p = _requests(tmp_path / "s")[-1]["p"]
    assert (p[EXPOSED], p[NEEDED]) == (0, 1)


# -- configuration: exempt tools, own caps, no priced spills --------------------------------------


def _quoted_steps(tool: str) -> list[list[dict[str, Any]]]:
    return [
        [{"role": "user", "content": "Check."}, _call("c1", name=tool), _result("c1", MID)],
        [_call("c2", f"see:\n{MIDDLE_LINE}"), _result("c2", "ok")],
    ]


@pytest.mark.parametrize(
    ("tool", "config"),
    [
        ("toolbudget_read", BudgetConfig()),
        ("Bash", BudgetConfig(tools={"Bash": ToolPolicy(exempt=True)})),
        ("Bash", BudgetConfig(tools={"Bash": ToolPolicy(cap=40_000)})),
        ("Bash", BudgetConfig(price_spills=False)),
    ],
    ids=["read-tool", "exempt", "own-cap", "no-priced-spills"],
)
def test_a_result_the_cost_model_does_not_weigh_never_counts(
    tmp_path: Path, tool: str, config: BudgetConfig
) -> None:
    """The read-back tool's results, an exempt tool's, a tool with its own cap, or any without
    priced spills: neither exposed nor needed, however quoted."""
    _run(tmp_path / "s", _quoted_steps(tool), config)
    assert [(r["p"][EXPOSED], r["p"][NEEDED]) for r in _requests(tmp_path / "s")] == [(0, 0)] * 2
    assert all("q" not in r for r in _requests(tmp_path / "s"))


def test_a_read_back_page_showing_the_line_takes_the_quote(tmp_path: Path) -> None:
    """The read-back tool's page (exempt, shown whole) repeats a kept result's lines: a quote
    after it is read off that page, not charged to the kept result."""
    steps = [
        [{"role": "user", "content": "Check."}, _call("c1"), _result("c1", MID)],
        [_call("c2", name="toolbudget_read", inp={"ref": "x"}), _result("c2", MID[3000:9000])],
        [_call("c3", f"see:\n{MIDDLE_LINE}"), _result("c3", "ok")],
    ]
    _run(tmp_path / "s", steps)
    assert _needed(tmp_path / "s") == [0, 0, 0]


# -- histories: duplicates, shared lines, shrinking, same-request quotes --------------------------


def test_a_line_in_several_results_is_charged_to_the_latest_once(tmp_path: Path) -> None:
    """The same line in two kept results: a quote counts the later one, once, and quoting it
    again counts nothing more."""
    again = MID.replace("row 0000", "rox 0000")  # another text (kept too), same middle line
    steps = [
        [{"role": "user", "content": "Check."}, _call("c1"), _result("c1", MID)],
        [_call("c2"), _result("c2", again)],
        [_call("c3", f"see:\n{MIDDLE_LINE}"), _result("c3", "ok")],
        [_call("c4", f"still:\n{MIDDLE_LINE}"), _result("c4", "ok")],
    ]
    _run(tmp_path / "s", steps)
    reqs = _requests(tmp_path / "s")
    assert [r["p"][NEEDED] for r in reqs] == [0, 0, 1, 1]
    assert [r.get("q") for r in reqs] == [None, None, ["c2"], None]


def test_duplicate_call_ids_do_not_break_the_session(tmp_path: Path) -> None:
    """Two results under one call id (a buggy agent): the session prepares, restarts and logs
    what the session that went on logs."""
    steps = [
        [{"role": "user", "content": "Check."}, _call("c1"), _result("c1", MID)],
        [_call("c1"), _result("c1", OTHER)],
        [_call("c2", f"see:\n{OTHER_MIDDLE}\n{MIDDLE_LINE}"), _result("c2", "ok")],
    ]
    a = _replay(tmp_path / "a", steps, set())
    b = _replay(tmp_path / "b", steps, {1, 2})
    assert a == b
    assert [r["p"] for r in _requests(tmp_path / "a")] == [
        r["p"] for r in _requests(tmp_path / "b")
    ]


def test_a_history_compacted_by_the_caller_resumes_alike(tmp_path: Path) -> None:
    """The caller drops the early rounds (its own compaction) and the model quotes a result
    kept before: the session that went on and a reopened one log the same."""
    early = [{"role": "user", "content": "Check."}, _call("c1"), _result("c1", MID)]
    mid = [_call("c2"), _result("c2", OTHER)]
    later = [
        {"role": "user", "content": "Summary: looked at two tables."},
        _call("c2"),
        _result("c2", OTHER),
        _call("c3", f"see:\n{OTHER_MIDDLE}"),
        _result("c3", "ok"),
    ]
    histories = [early, early + mid, later]
    _prepare_each(tmp_path / "a", histories, set())
    _prepare_each(tmp_path / "b", histories, {1, 2})
    a, b = _requests(tmp_path / "a"), _requests(tmp_path / "b")
    assert [(r["p"], r.get("q")) for r in a] == [(r["p"], r.get("q")) for r in b]
    assert a[-1]["p"][NEEDED] == 1


def test_a_result_quoted_in_the_request_it_arrives_in_is_not_counted_later(
    tmp_path: Path,
) -> None:
    """A result and an answer quoting it arrive in one request (no decision yet when looked at):
    not counted then, nor at the next request, nor by a reopened session."""
    steps = [
        [{"role": "user", "content": "Check."}, _call("c0"), _result("c0", "ok")],
        [
            _call("c1"),
            _result("c1", MID),
            _call("c2", f"see:\n{MIDDLE_LINE}"),
            _result("c2", "ok"),
        ],
        [_call("c3", "next"), _result("c3", "ok")],
    ]
    _replay(tmp_path / "a", steps, set())
    _replay(tmp_path / "b", steps, {1, 2})
    assert _needed(tmp_path / "a") == _needed(tmp_path / "b") == [0, 0, 0]


# -- hostile answers ------------------------------------------------------------------------------


def _deep(n: int) -> Any:
    value: Any = MIDDLE_LINE
    for _ in range(n):
        value = {"k": [value]}
    return value


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(_call("c2", "x" * 1_000_000), id="1MB-line"),
        pytest.param(_call("c2", (MIDDLE_LINE[:-1] + "\n") * 100_000), id="100k-lines"),
        pytest.param(_call("c2", inp=_deep(200)), id="deep-input"),
        pytest.param(_call("c2", inp={"a": "{" + MIDDLE_LINE + "\ud800" * 10}), id="bad-json"),
        pytest.param(
            _call("c2", f"\ud800{MIDDLE_LINE}\udfff\n\x00{MIDDLE_LINE}\x00"), id="surrogates-nul"
        ),
    ],
)
def test_a_hostile_answer_is_read_without_failing(tmp_path: Path, answer: Any) -> None:
    """Huge, deep, undecodable or NUL-laden answers: the request is prepared and logged, and a
    line quoted whole inside one still counts at most once."""
    session = Budget.open(tmp_path / "s", BudgetConfig())
    history = [{"role": "user", "content": "Check."}, _call("c1"), _result("c1", MID)]
    session.prepare(history, now=1.0)
    session.prepare([*history, answer], now=2.0)
    session.close()
    assert _needed(tmp_path / "s")[-1] in (0, 1)


def test_undecodable_and_bomb_arguments_are_read_without_failing(tmp_path: Path) -> None:
    """Chat: tool-call arguments that are no JSON (100,000 open brackets, a lone surrogate, a
    NUL) are read as plain strings; a decodable one still yields its quote."""
    session = Budget.open(tmp_path / "s", BudgetConfig())
    history: list[Any] = [
        {"role": "user", "content": "Check."},
        {"role": "assistant", "content": None, "tool_calls": [_chat_call("c1", "{}")]},
        {"role": "tool", "tool_call_id": "c1", "content": MID},
    ]
    session.prepare(history, now=1.0)
    bad = ["[" * 100_000, '{"a": "\ud800' + MIDDLE_LINE + '"', "{\x00" + MIDDLE_LINE]
    calls = [_chat_call(f"b{i}", arg) for i, arg in enumerate(bad)]
    calls.append(_chat_call("ok", json.dumps({"pattern": MIDDLE_LINE})))
    history += [{"role": "assistant", "content": "x", "tool_calls": calls}]
    history += [{"role": "tool", "tool_call_id": c["id"], "content": "no"} for c in calls]
    session.prepare(history, now=2.0)
    session.close()
    assert _needed(tmp_path / "s") == [0, 1]


def _chat_call(cid: str, arguments: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": "bash", "arguments": arguments}}


def _sdk_steps(fmt: str) -> list[list[Any]]:
    """Three requests with SDK models: a kept result, a small tool output repeating one of its
    middle lines (no answer), then the model quoting another middle line in a call's input."""
    if fmt == "chat":
        from openai.types.chat import ChatCompletionMessage

        def say(cid: str, args: dict[str, Any]) -> Any:
            return ChatCompletionMessage.model_validate({"role": "assistant", "content": None,
                "tool_calls": [_chat_call(cid, json.dumps(args))]})  # fmt: skip

        def out(cid: str, text: str) -> Any:
            return {"role": "tool", "tool_call_id": cid, "content": text}

    else:
        from openai.types.responses import ResponseFunctionToolCall
        from openai.types.responses.response_input_item import FunctionCallOutput

        def say(cid: str, args: dict[str, Any]) -> Any:
            return ResponseFunctionToolCall(type="function_call", call_id=cid, name="shell",
                arguments=json.dumps(args), id=f"fc_{cid}")  # fmt: skip

        def out(cid: str, text: str) -> Any:
            return FunctionCallOutput(type="function_call_output", call_id=cid, output=text)

    return [
        [{"role": "user", "content": "Check."}, say("c1", {"cmd": "cat t"}), out("c1", MID)],
        [say("c2", {"cmd": "grep"}), out("c2", f"hit:\n{MIDDLE_LINE}")],
        [say("c3", {"pattern": MID.splitlines()[120]}), out("c3", "ok")],
        [say("c4", {"cmd": "ls"}), out("c4", "ok")],
    ]


@pytest.mark.parametrize("fmt", ["chat", "responses"])
def test_sdk_models_are_read_as_their_dicts_would_be(tmp_path: Path, fmt: str) -> None:
    """OpenAI SDK models in the history (ChatCompletionMessage; ResponseFunctionToolCall and
    FunctionCallOutput): the tool output is no answer, the quote in the arguments counts once,
    the same whether the session went on or was reopened at every request."""
    require_module("openai", extra="sdk")
    a = _replay(tmp_path / "a", _sdk_steps(fmt), set())
    b = _replay(tmp_path / "b", _sdk_steps(fmt), {1, 2, 3})
    assert a == b
    assert _needed(tmp_path / "a") == _needed(tmp_path / "b") == [0, 0, 1, 1]


def test_a_result_a_later_pass_hides_is_not_exposed(tmp_path: Path) -> None:
    """Three parallel results the cost model would keep, spilled by the group budget: hidden,
    never seen whole, so not exposed."""
    ids = ["a", "b", "c"]
    calls = [{"type": "tool_use", "id": i, "name": "Bash", "input": {"command": i}} for i in ids]
    outs = [
        {"type": "tool_result", "tool_use_id": i, "content": MID.replace("row", f"r{i}")}
        for i in ids
    ]
    steps: list[list[dict[str, Any]]] = [
        [
            {"role": "user", "content": "Check."},
            {"role": "assistant", "content": calls},
            {"role": "user", "content": outs},
        ]
    ]
    _run(tmp_path / "s", steps, BudgetConfig(group_budget=20_000))
    (req,) = _requests(tmp_path / "s")
    hidden = req["p"][5]
    assert (hidden, req["p"][EXPOSED]) == (3, 0)


def _histories(fmt: str, plan: list[tuple[int, int, int, bool]], ops: list[str]) -> list[Any]:
    """The histories a caller sends: the rounds of ``plan`` appended in turn, each op after a
    round applied to the next request ("retry": the same history again; "compact": the rounds
    but the last two dropped, after the first message; "edit": the last result rewritten)."""
    steps = _conversation(fmt, plan)
    head, rounds = steps[0][:1], [steps[0][1:], *steps[1:]]
    kept: list[list[Any]] = []
    out: list[Any] = []
    for i, step in enumerate(rounds):
        kept.append(step)
        op = ops[i % len(ops)] if ops else "append"
        if op == "compact" and len(kept) > 2:
            kept = kept[-2:]
        elif op == "edit":
            last = json.loads(json.dumps(kept[-1]))
            blob = last[-1]
            key = "output" if "output" in blob else "content"
            if isinstance(blob[key], str):
                blob[key] = blob[key].replace("status=ok", "status=KO")
            else:
                blob[key][0]["content"] = blob[key][0]["content"].replace("status=ok", "status=KO")
            kept[-1] = last
        history = [*head, *(m for s in kept for m in s)]
        out.append(history)
        if op == "retry":
            out.append(list(history))
    return out


@settings(
    max_examples=examples(30),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    fmt=st.sampled_from(FORMATS),
    plan=plans.filter(lambda p: len(p) <= 10),
    ops=st.lists(st.sampled_from(["append", "retry", "compact", "edit"]), max_size=6),
)
def test_retries_compaction_and_edits_log_alike_across_restarts(
    tmp_path_factory: pytest.TempPathFactory, fmt: str, plan: Any, ops: list[str]
) -> None:
    """Retried, compacted and edited histories: the session that went on and one reopened at
    every request log the same ``p`` and ``q`` and send the same copies."""
    histories = _histories(fmt, plan, ops)
    base = tmp_path_factory.mktemp("h")
    copies: dict[str, list[bytes]] = {}
    for name, reopen in (("on", False), ("every", True)):
        session = Budget.open(base / name, BudgetConfig())
        copies[name] = []
        for i, h in enumerate(histories):
            if reopen and i:
                session.close()
                session = Budget.open(base / name, BudgetConfig())
            copies[name].append(orjson.dumps(session.prepare(h, now=10.0 * i).messages))
        session.close()
    # The evidence's fields only: a compacted history's gap (``p[8]``) differs across restarts
    # already before the evidence (c41eada), which this test is not about.
    logs = {
        name: [(r["p"][EXPOSED:], r.get("q")) for r in _requests(base / name)] for name in copies
    }
    assert logs["on"] == logs["every"]
    assert copies["on"] == copies["every"]


def test_a_history_rolled_back_resumes_alike(tmp_path: Path) -> None:
    """The caller drops its last round (a rolled-back turn) whose result shared a line with an
    earlier kept one; quotes after that are charged as a reopened session charges them."""
    again = MID.replace("row 0000", "rox 0000")  # kept too, same middle line as MID
    first = [{"role": "user", "content": "Check."}, _call("c1"), _result("c1", MID)]
    rolled = [_call("c2"), _result("c2", again)]
    later = [_call("c3", f"see:\n{MIDDLE_LINE}"), _result("c3", "ok")]
    last = [_call("c4", f"again:\n{MIDDLE_LINE}"), _result("c4", "ok")]
    histories = [first, first + rolled, first + later, first + later + last]
    _prepare_each(tmp_path / "a", histories, set())
    _prepare_each(tmp_path / "b", histories, {1, 2, 3})
    a, b = _requests(tmp_path / "a"), _requests(tmp_path / "b")
    assert [(r["p"][EXPOSED:], r.get("q")) for r in a] == [
        (r["p"][EXPOSED:], r.get("q")) for r in b
    ]
