"""Hypothesis fuzzing of ``prepare`` and of the log reader: only BudgetError ever escapes.

``prepare`` gets conversations with random parts replaced by random JSON values (wrong types,
missing keys, strange ids), random ``usage`` and ``now``; after any refusal the same session
must still budget the intact conversation exactly as a fresh one does. The log reader gets
random bytes, a real log damaged at random (flips, cuts, repeats, zeros, inserts), and records
with valid checksums but random contents; a session opened on it must restore only decisions
that were logged, work, and lose nothing.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from budget import Budget, BudgetError
from budget._envelope import EMPTY_TEXT
from spill._log import decode_log, encode_records
from tests._lanes import at_least
from tests.conversations import CONFIG, Step, conversation, result_texts
from tests.strategies import conversations

pytestmark = pytest.mark.slow  # large hypothesis runs

FAST = CONFIG.model_copy(update={"fsync": False})
# More examples for a longer hunt: pytest tests/reliability/test_fuzz.py --hypothesis-profile=hunt
# (a project variable named TOOLBUDGET_* would be read as a stray setting: a warning each session).
EXAMPLES = at_least(150)
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
SEED, ROUNDS = 6, 8

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=20)
    | st.sampled_from(["tool_use", "tool_result", "text", "image", "user", "assistant", ""]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=3)
    ),
    max_leaves=12,
)
KEYS = ["type", "role", "content", "id", "tool_use_id", "name", "text", "is_error", "input"]


def _slots(value: Any, out: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Every (container, key) pair of a JSON-like tree, depth first."""
    if isinstance(value, dict):
        for key in list(value):
            out.append((value, key))
            _slots(value[key], out)
    elif isinstance(value, list):
        for i in range(len(value)):
            out.append((value, i))
            _slots(value[i], out)
    return out


@st.composite
def mutated(draw: st.DrawFn) -> tuple[list[Any], list[Any]]:
    """(an intact conversation, the same with 1-3 random parts replaced, removed or added)."""
    msgs = draw(conversations(max_rounds=4))
    bad = copy.deepcopy(msgs)
    for _ in range(draw(st.integers(1, 3))):
        slots = _slots(bad, [])
        container, key = draw(st.sampled_from(slots))
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "delete" and isinstance(container, dict):
            del container[key]
        elif action == "add" and isinstance(container, dict):
            container[draw(st.sampled_from(KEYS))] = draw(json_values)
        else:
            container[key] = draw(json_values)
    return msgs, bad


RAN: Counter[str] = Counter()
"""Examples run per fuzz test in this process (recorded for the figures)."""


@FUZZ
@given(
    mutated(),
    st.one_of(st.none(), json_values),
    st.one_of(st.none(), st.floats(), st.integers(-(2**40), 2**40), st.text(max_size=5)),
)
def test_prepare_only_ever_raises_budget_errors_and_stays_usable(
    record_property: Any, pair: tuple[list[Any], list[Any]], usage: Any, now: Any
) -> None:
    """Whatever the damage, prepare returns or raises a BudgetError. After a refusal the same
    session budgets the intact conversation exactly as a fresh one does (an accepted history
    freezes its decisions: the intact one may then legitimately show them)."""
    msgs, bad = pair
    RAN["prepare"] += 1
    record_property("reliability.bad_inputs.fuzz_prepare", RAN["prepare"])
    session = Budget.in_memory(FAST)
    with capture_logs():
        try:
            session.prepare(bad, usage=usage, now=now)
        except BudgetError:
            pass  # refused: the session must be as good as new (checked below)
        else:
            # Accepted: its decisions (and maybe its format) are the session's now, so the
            # intact history may legitimately be refused too; still only as a BudgetError.
            with contextlib.suppress(BudgetError):
                session.prepare(msgs, now=10_000)
            return
        got = session.prepare(msgs, now=10_000)
    expected = Budget.in_memory(FAST).prepare(msgs, now=10_000)
    assert got.messages == expected.messages


@functools.cache
def real_log() -> tuple[bytes, list[Any], list[Step]]:
    """The log of a real 8-round session (spills, a batch), with its conversation."""
    msgs, steps = conversation(SEED, ROUNDS)
    with tempfile.TemporaryDirectory() as tmp:
        with Budget.open(Path(tmp) / "s", FAST) as session:
            for step in steps:
                session.prepare(msgs[: step.length], usage=step.usage, now=step.now)
        data = (Path(tmp) / "s" / "decisions.jsonl").read_bytes()
    return data, msgs, steps


Damage = Callable[[bytes], bytes]


@st.composite
def damages(draw: st.DrawFn) -> Damage:
    """One random kind of damage to a log's bytes."""
    kind = draw(st.sampled_from(["flip", "cut", "repeat", "zeros", "insert", "delete"]))
    a = draw(st.floats(0, 1))
    b = draw(st.floats(0, 1))
    junk = draw(st.binary(min_size=1, max_size=64))
    bit = draw(st.integers(0, 7))

    def damage(data: bytes) -> bytes:
        if not data:
            return junk if kind == "insert" else data
        i, j = sorted((int(a * len(data)), int(b * len(data))))
        if kind == "flip":
            i = min(i, len(data) - 1)
            return data[:i] + bytes([data[i] ^ (1 << bit)]) + data[i + 1 :]
        if kind == "cut":
            return data[:i]
        if kind == "repeat":
            return data[:j] + data[i:j] + data[j:]
        if kind == "zeros":
            return data[:i] + b"\0" * (j - i) + data[j:]
        if kind == "insert":
            return data[:i] + junk + data[i:]
        return data[:i] + data[j:]

    return damage


def check_session(path: Path, originals: list[dict[str, Any]]) -> None:
    """Open the session: only logged decisions restored; the last request works; nothing lost."""
    _data, msgs, steps = real_log()
    texts = result_texts(msgs)
    logged: dict[str, list[dict[str, Any]]] = {}
    for rec in originals:
        if rec.get("t") == "d":
            logged.setdefault(rec["id"], []).append(rec)
    last = steps[-1]
    with capture_logs(), Budget.open(path, FAST) as session:
        for cid in texts:
            d = session.decision(cid)
            if d is not None:
                # A logged record also has its sequence number ("s"), not part of the decision.
                unnumbered = [{k: v for k, v in r.items() if k != "s"} for r in logged[cid]]
                assert d.to_record() in unnumbered
        req = session.prepare(msgs[: last.length], usage=last.usage, now=last.now)
        for cid, shown in result_texts(req.messages).items():
            d = session.decision(cid)
            if shown == texts[cid] or (shown == EMPTY_TEXT and not texts[cid]):
                continue
            assert d is not None and d.ref is not None
            assert session.read(d.ref) == texts[cid]


@FUZZ
@given(st.lists(damages(), min_size=1, max_size=3))
def test_a_damaged_log_restores_only_what_was_logged(
    record_property: Any, damage: list[Damage]
) -> None:
    """Flipped, cut, repeated, zeroed, inserted or deleted bytes: the session opens, restores
    no decision that was not logged, budgets the conversation and loses nothing."""
    data, _msgs, _steps = real_log()
    originals = decode_log(data, source="clean")
    for hit in damage:
        data = hit(data)
    RAN["damaged_log"] += 1
    record_property("reliability.bad_inputs.fuzz_damaged_logs", RAN["damaged_log"])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s"
        Budget.open(path, FAST).close()
        bodies_from = Path(tmp) / "clean"
        with Budget.open(bodies_from, FAST) as session:  # the bodies the log points to
            _d, msgs, steps = real_log()
            for step in steps:
                session.prepare(msgs[: step.length], usage=step.usage, now=step.now)
        (path / "bodies").rmdir()
        (bodies_from / "bodies").rename(path / "bodies")
        (path / "decisions.jsonl").write_bytes(data)
        with capture_logs():
            records = decode_log(data, source="fuzz")
        assert all(rec in originals for rec in records)
        check_session(path, originals)


@FUZZ
@given(st.binary(max_size=2_000))
def test_any_bytes_decode_to_records_or_warnings(record_property: Any, data: bytes) -> None:
    """decode_log never raises on any bytes; each record it returns is a dict."""
    RAN["bytes"] += 1
    record_property("reliability.bad_inputs.fuzz_log_bytes", RAN["bytes"])
    with capture_logs():
        records = decode_log(data, source="fuzz")
    assert all(isinstance(rec, dict) for rec in records)


RECORD_KEYS = ["t", "id", "kind", "why", "chars", "text", "ref", "tool", "n", "m", "at", "count"]


@FUZZ
@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(RECORD_KEYS),
            st.one_of(
                json_values, st.sampled_from(["d", "req", "ovf", "kept", "spilled", "trimmed"])
            ),
            max_size=8,
        ),
        min_size=1,
        max_size=5,
    )
)
def test_checksummed_records_of_any_shape_never_break_a_resume(
    record_property: Any, records: list[dict[str, Any]]
) -> None:
    """Records with valid checksums but random fields (another writer, a future version) are
    skipped or used; opening the session raises nothing, and it still budgets its conversation:
    with no record that could close a request (req, ovf, void) its request copy is exactly that
    of a session resumed from the clean log, and with one every result is still shown whole,
    as a toolbudget envelope or stub within the cap, or as the clean resume shows it."""
    data, msgs, steps = real_log()
    try:
        extra = encode_records(records)
    except BudgetError:
        return  # not even writable as a record
    RAN["records"] += 1
    record_property("reliability.bad_inputs.fuzz_log_records", RAN["records"])
    last = steps[-1]
    clean = result_texts(resumed_copy(data))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s"
        Budget.open(path, FAST).close()
        (path / "decisions.jsonl").write_bytes(data + extra)
        with capture_logs(), Budget.open(path, FAST) as session:
            req = session.prepare(msgs[: last.length], usage=last.usage, now=last.now)
    got = result_texts(req.messages)
    assert got.keys() == clean.keys()
    if not any(rec.get("t") in ("req", "ovf", "void") for rec in records):
        # Unclosed records are a cut-off request's: its retry (this request) replaces them.
        assert req.messages == resumed_copy(data)
        return
    texts = result_texts(msgs[: last.length])
    for cid, shown in got.items():
        budgeted = shown.startswith("[toolbudget] ") and len(shown) <= FAST.result_cap
        assert shown in (texts[cid], clean[cid]) or budgeted, cid


@functools.cache
def resumed_copy(data: bytes) -> list[Any]:
    """The last request's copy in a session resumed from the log ``data`` (no bodies, like above)."""
    _data, msgs, steps = real_log()
    last = steps[-1]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s"
        Budget.open(path, FAST).close()
        (path / "decisions.jsonl").write_bytes(data)
        with capture_logs(), Budget.open(path, FAST) as session:
            return session.prepare(msgs[: last.length], usage=last.usage, now=last.now).messages


TYPE_VALUES: list[Any] = [
    None,
    True,
    0,
    -1.5,
    "",
    "text",
    "function_call",
    [],
    ["tool_use"],
    {},
    {"type": "text"},
]
"""A ``type`` of every JSON kind: null, boolean, integer, number, string, array, object."""


def typed_histories() -> dict[str, list[Any]]:
    """One history per format whose items, blocks and parts carry a ``type`` key."""
    out = "".join(f"row {i}\n" for i in range(600))
    anthropic = [
        {"role": "user", "content": [{"type": "text", "text": "Fix CI"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "c1", "name": "bash", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "c1",
                    "content": [{"type": "text", "text": out}, {"type": "text", "text": "end"}],
                }
            ],
        },
    ]
    chat = [
        {"role": "user", "content": [{"type": "text", "text": "Fix CI"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": out}]},
    ]
    responses = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix"}]},
        {"type": "reasoning", "id": "rs_0", "summary": []},
        {"type": "function_call", "call_id": "c1", "name": "bash", "arguments": "{}"},
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": [{"type": "input_text", "text": out}],
        },
    ]
    return {"anthropic": anthropic, "openai_chat": chat, "openai_responses": responses}


def _typed(value: Any, out: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every dict in a JSON-like tree that has a ``type`` key."""
    if isinstance(value, dict):
        if "type" in value:
            out.append(value)
        for inner in value.values():
            _typed(inner, out)
    elif isinstance(value, list):
        for inner in value:
            _typed(inner, out)
    return out


def _refused_or_budgeted(fmt: str, bad: list[Any], intact: list[Any]) -> None:
    """``bad`` is budgeted or refused with a BudgetError; after a refusal the session budgets
    ``intact`` as a fresh session does."""
    session = Budget.in_memory(FAST, format=fmt)
    with capture_logs():
        try:
            session.prepare(bad, now=0)
        except BudgetError:
            got = session.prepare(intact, now=10)
            assert (
                got.messages == Budget.in_memory(FAST, format=fmt).prepare(intact, now=10).messages
            )


@pytest.mark.parametrize("fmt", ["anthropic", "openai_chat", "openai_responses"])
def test_a_type_of_any_json_kind_anywhere_is_refused_as_a_budget_error(fmt: str) -> None:
    """Every item, block and part whose ``type`` is null, a boolean, a number, a string, an array
    or an object (a list or dict used to escape as ``TypeError: unhashable type``) is budgeted or
    refused with a BudgetError, in each format, and the session stays usable."""
    intact = typed_histories()[fmt]
    slots = len(_typed(intact, []))
    assert slots >= 3
    for i in range(slots):
        for value in TYPE_VALUES:
            bad = copy.deepcopy(intact)
            _typed(bad, [])[i]["type"] = copy.deepcopy(value)
            _refused_or_budgeted(fmt, bad, intact)


@FUZZ
@given(
    st.sampled_from(["anthropic", "openai_chat", "openai_responses"]),
    st.lists(st.tuples(st.integers(0, 50), json_values), min_size=1, max_size=3),
)
def test_random_types_in_every_format_only_ever_raise_budget_errors(
    fmt: str, hits: list[tuple[int, Any]]
) -> None:
    """Random JSON values as the ``type`` of random items, blocks and parts, in all three
    formats: prepare returns or raises a BudgetError, and the session stays usable."""
    intact = typed_histories()[fmt]
    bad = copy.deepcopy(intact)
    typed = _typed(bad, [])
    for where, value in hits:
        typed[where % len(typed)]["type"] = value
    _refused_or_budgeted(fmt, bad, intact)
