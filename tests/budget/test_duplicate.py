"""The duplicate pass: a fresh result whose text is an earlier result's, still shown whole, is
shown as a pointer to that earlier call, its text stored and read back exactly."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import Budget, BudgetConfig
from budget._envelope import same_output
from budget.previews import apply_delta
from spill import ref_for
from tests._lanes import examples

FILE = "".join(f"line {i:04d} of a file the agent reads twice\n" for i in range(80))
CONFIG: dict[str, Any] = {"fsync": False, "model": "claude-sonnet-4-5"}


def call(cid: str, tool: str = "Read") -> dict[str, Any]:
    """An assistant message calling ``tool`` once."""
    block = {"type": "tool_use", "id": cid, "name": tool, "input": {"path": "a.py"}}
    return {"role": "assistant", "content": [block]}


def result(cid: str, text: str) -> dict[str, Any]:
    """The user message holding ``text`` as call ``cid``'s result."""
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": cid, "content": text}],
    }


def shown(messages: list[Any], i: int) -> str:
    """The text message ``i``'s only tool result shows."""
    text: str = messages[i]["content"][0]["content"]
    return text


def history(*outputs: str, tool: str = "Read") -> list[dict[str, Any]]:
    """A user request and one call of ``tool`` per output, answered by it."""
    out: list[dict[str, Any]] = [{"role": "user", "content": "read a.py"}]
    for k, text in enumerate(outputs):
        out += [call(f"c{k}", tool), result(f"c{k}", text)]
    return out


def grown(b: Budget, messages: list[dict[str, Any]]) -> list[Any]:
    """The copies of ``messages`` prepared round by round; the last one."""
    copy: list[Any] = []
    for n in range(3, len(messages) + 1, 2):
        copy = b.prepare(messages[:n], now=float(n)).messages
    return copy


def test_a_repeated_output_is_a_pointer_to_the_earlier_call_read_back_exactly(
    tmp_path: Path,
) -> None:
    """The second read of an unchanged file shows the pointer naming the first call, spilled for
    reason 'duplicate'; its stored text reads back byte for byte; the first stays whole."""
    messages = history(FILE, "edited", FILE)
    with Budget.open(tmp_path / "s", CONFIG) as b:
        copy = grown(b, messages)
        d, ref = b.decision("c2"), ref_for(FILE)
        assert d is not None and (d.kind, d.reason, d.ref) == ("spilled", "duplicate", ref)
        assert shown(copy, 6) == same_output(
            FILE, ref=ref, tool="Read", same_as="c0", read_tool="toolbudget_read"
        )
        assert shown(copy, 6).startswith(
            "[toolbudget] Output of Read is the same as the output of call c0 earlier in this "
            "conversation (3,360 characters, 80 lines)"
        )
        assert shown(copy, 2) == FILE
        assert b.read(ref) == FILE


def test_a_resumed_session_gives_the_same_pointer(tmp_path: Path) -> None:
    """Closed after the first read and opened again, the session points the repeat to it as
    the session that went on does, and the same bytes again on the next request."""
    messages = history(FILE, "x", FILE, "y")
    with Budget.open(tmp_path / "a", CONFIG) as went_on:
        expected = grown(went_on, messages)
    with Budget.open(tmp_path / "b", CONFIG) as first:
        grown(first, messages[:5])
    with Budget.open(tmp_path / "b", CONFIG) as resumed:
        got = [resumed.prepare(messages[:n], now=float(n)).messages for n in (7, 9)]
    assert got[-1] == expected
    assert got[0] == expected[:7]


@pytest.mark.parametrize(
    ("config", "tool"),
    [
        ({"dedupe_outputs": False}, "Read"),
        ({"tools": {"Read": {"exempt": True}}}, "Read"),
        ({"tools": {"Read": {"cap": 10_000}}}, "Read"),
    ],
)
def test_no_pointer_where_the_setting_or_the_callers_own_rule_says_so(
    tmp_path: Path, config: dict[str, Any], tool: str
) -> None:
    """Off, or for a tool the caller exempts or caps itself, a repeat stays whole."""
    with Budget.open(tmp_path / "s", {**CONFIG, **config}) as b:
        copy = grown(b, history(FILE, "x", FILE, tool=tool))
    assert shown(copy, 6) == FILE


def test_no_pointer_to_a_result_of_the_same_request(tmp_path: Path) -> None:
    """Two equal results first seen in one request: neither was shown before, both stay."""
    with Budget.open(tmp_path / "s", CONFIG) as b:
        copy = b.prepare(history(FILE, FILE), now=0).messages
    assert shown(copy, 2) == shown(copy, 4) == FILE


def test_no_pointer_to_an_earlier_output_the_caller_edited_since(tmp_path: Path) -> None:
    """The caller rewrote the first result after it was decided: the repeat of its old text
    points to nothing the model can see, so it stays whole."""
    messages = history(FILE, "x")
    with Budget.open(tmp_path / "s", CONFIG) as b:
        grown(b, messages)
        edited = [*messages[:2], result("c0", "rewritten by the host"), *messages[3:]]
        copy = b.prepare([*edited, call("c2"), result("c2", FILE)], now=10).messages
    assert shown(copy, 6) == FILE


def test_no_pointer_naming_a_call_id_that_several_earlier_calls_share(tmp_path: Path) -> None:
    """Where every call is named call_0, the repeat of the first output is not 'the output of
    call call_0 earlier' (the latest call_0 before it answered something else); the second
    call_0, one earlier call_0 before it, is still a re-run pointer."""
    other = FILE.replace("line 0040", "line forty")
    messages = [{"role": "user", "content": "read a.py"}]
    for text in (FILE, other, FILE):
        messages += [call("call_0"), result("call_0", text)]
    with Budget.open(tmp_path / "s", CONFIG) as b:
        copy = grown(b, messages)
    assert shown(copy, 2) == FILE
    assert shown(copy, 4).startswith("[toolbudget] Output of Read is the output of call call_0")
    assert "the output of call call_0" not in shown(copy, 6)


def test_no_pointer_to_an_earlier_output_that_is_not_shown_whole(tmp_path: Path) -> None:
    """The first output was over its cap and spilled: the repeat is not pointed to it (its
    lines are not in view); it is spilled by the cap in turn, with its own preview."""
    big = FILE * 20
    with Budget.open(tmp_path / "s", {**CONFIG, "result_cap": 50_000}) as b:
        copy = grown(b, history(big, "x", big))
        d = b.decision("c2")
    assert d is not None and (d.kind, d.reason) == ("spilled", "cap")
    assert "is the same as the output" not in shown(copy, 6)


def test_a_pointer_counts_as_no_hidden_result_for_the_readback_rate(tmp_path: Path) -> None:
    """The read-back rate is learned over results hidden: a pointer hides nothing the model
    does not see, so the count stays at 0 (a spill by the cap counts one)."""
    with Budget.open(tmp_path / "s", CONFIG) as b:
        grown(b, history(FILE, "x", FILE, "y"))
        pointed = b._turns.pipeline._parts.tally.observed.hidden
    with Budget.open(tmp_path / "t", {**CONFIG, "result_cap": 3_000}) as b:
        grown(b, history(FILE, "x", FILE + "!", "y"))
        spilled = b._turns.pipeline._parts.tally.observed.hidden
    assert (pointed, spilled) == (0, 2)


def test_the_pointer_is_shorter_than_what_it_replaces_or_not_made(tmp_path: Path) -> None:
    """A repeat shorter than its pointer stays as it is."""
    short = "ok: 3 files\n" * 5
    with Budget.open(tmp_path / "s", CONFIG) as b:
        copy = grown(b, history(short, "x", short))
    assert shown(copy, 6) == short


def test_the_setting_is_on_by_default() -> None:
    """Duplicates are pointed to unless the caller turns it off."""
    assert BudgetConfig().dedupe_outputs is True
    assert BudgetConfig(dedupe_outputs=False).dedupe_outputs is False


RUN = "".join(f"tests/test_mod.py::test_{i:04d} PASSED\n" for i in range(100))
RERUN = RUN.replace("test_0050 PASSED", "test_0050 FAILED")


def test_a_rerun_is_a_pointer_with_its_diff_from_the_earlier_run(tmp_path: Path) -> None:
    """The same command run again with one line changed: the pointer names the first run and
    holds the diff, which applied to the first run gives the re-run exactly (reason 'rerun')."""
    messages = history(RUN, "x", RERUN, tool="bash")
    for m in (messages[1], messages[5]):
        m["content"][0]["input"] = {"command": "pytest -v"}
    with Budget.open(tmp_path / "s", CONFIG) as b:
        copy = grown(b, messages)
        d = b.decision("c2")
        assert d is not None and (d.kind, d.reason, d.ref) == ("spilled", "rerun", ref_for(RERUN))
        assert b.read(ref_for(RERUN)) == RERUN
    text = shown(copy, 6)
    head, diff = text.split("\n--- diff against the output of call c0 ---\n")
    assert head.startswith(
        "[toolbudget] Output of bash is the output of call c0 earlier in this conversation "
        "with 1 line removed and 1 line added (3,600 characters, 100 lines)"
    )
    assert apply_delta(RUN, diff) == RERUN
    assert shown(copy, 2) == RUN


def test_no_pointer_for_a_rerun_whose_diff_is_longer_than_a_preview(tmp_path: Path) -> None:
    """A re-run that changed more than a preview's worth of lines stays to the other passes."""
    other = RUN.replace("PASSED", "FAILED")
    messages = history(RUN, "x", other, tool="bash")
    for m in (messages[1], messages[5]):
        m["content"][0]["input"] = {"command": "pytest -v"}
    with Budget.open(tmp_path / "s", {**CONFIG, "preview_chars": 1_000}) as b:
        copy = grown(b, messages)
        d = b.decision("c2")
    assert d is not None and d.reason not in ("rerun", "duplicate")
    assert "earlier in this conversation" not in shown(copy, 6)


def test_no_pointer_for_a_rerun_whose_diff_takes_half_the_output(tmp_path: Path) -> None:
    """A short re-run that changed most of its lines is shown as it is: its diff would be read
    as hard as the output."""
    first = "".join(f"step {i:02d}: checking the configuration file\n" for i in range(60))
    second = first.replace("checking", "checked ", 20)  # 20 lines of 60: a diff of 2/3 of it
    messages = history(first, "x", second, tool="bash")
    for m in (messages[1], messages[5]):
        m["content"][0]["input"] = {"command": "make check"}
    with Budget.open(tmp_path / "s", CONFIG) as b:
        copy = grown(b, messages)
    assert shown(copy, 6) == second


def test_no_pointer_where_an_image_sits_beside_the_same_text(tmp_path: Path) -> None:
    """Two screenshots with the same caption are not the same output: a result with a non-text
    part is never pointed, nor pointed to."""
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"},
    }
    caption = "Screenshot of the settings page after the change was applied.\n" * 20
    with_image: list[dict[str, Any]] = [{"type": "text", "text": caption}, image]
    messages = history(caption, "x", caption)
    messages[2]["content"][0]["content"] = with_image
    with Budget.open(tmp_path / "a", CONFIG) as b:
        copy = grown(b, messages)
    assert shown(copy, 6) == caption
    messages = history(caption, "x", caption)
    messages[6]["content"][0]["content"] = [dict(block) for block in with_image]
    with Budget.open(tmp_path / "b", CONFIG) as b:
        copy = grown(b, messages)
    assert copy[6]["content"][0]["content"] == with_image


def _round(cid: str, tool: str, text: str) -> list[dict[str, Any]]:
    """One round: a call of ``tool`` (its command naming ``cid``, so no two are re-runs) and its
    result ``text``."""
    block = {"type": "tool_use", "id": cid, "name": tool, "input": {"command": cid}}
    return [{"role": "assistant", "content": [block]}, result(cid, text)]


def test_a_batch_of_the_same_request_does_not_trim_the_output_a_pointer_names(
    tmp_path: Path,
) -> None:
    """A repeat pointed to an output that a cold-cache batch of the same request trims would
    show neither: the output it names stays whole while the pointer is made."""
    small = {**CONFIG, "result_cap": 5_000, "protect_rounds": 2, "stale_floor": 400}
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for k, text in enumerate([FILE, RUN[:700], RUN[700:1400], RUN[1400:2100], FILE]):
        messages += _round(f"c{k}", "bash", text)
    with Budget.open(tmp_path / "s", small) as b:
        b.prepare(messages[:9], now=0)
        req = b.prepare(messages, now=400)  # the cache went cold: a batch trims the old rounds
        d = b.decision("c4")
        assert req.report.staleness_ran
        assert d is not None and d.reason == "duplicate"
        assert shown(req.messages, 2) == FILE


def test_the_cut_search_prices_no_trim_of_the_output_a_pointer_names(tmp_path: Path) -> None:
    """The batch that spares the named output prices it spared: its verdict reclaims less, by
    that output, than the same batch beside a new output of the same size (which spares none)."""
    small = {**CONFIG, "result_cap": 5_000, "protect_rounds": 2, "stale_floor": 400}
    reclaimed: list[int] = []
    for last in (FILE, FILE.replace("line", "LINE")):
        messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
        for k, text in enumerate([FILE, RUN[:700], RUN[700:1400], RUN[1400:2100], last]):
            messages += _round(f"c{k}", "bash", text)
        with Budget.open(tmp_path / str(len(reclaimed)), small) as b:
            b.prepare(messages[:9], now=0)
            cost = b.prepare(messages, now=400).report.staleness_cost
            assert cost is not None and cost.choice == "trim"
            reclaimed.append(cost.reclaim_tokens)
    spared, none_spared = reclaimed
    assert none_spared - spared > len(FILE) // 5


def test_a_repeat_gets_the_same_pointer_live_and_resumed_after_a_batch(tmp_path: Path) -> None:
    """Two equal outputs shown whole, the later one trimmed by a batch, the earlier (exempt)
    still whole: a repeat gets the same decision in the session that went on and in one resumed."""
    cfg = {**CONFIG, "result_cap": 5_000, "tools": {"Read": {"exempt": True}}}
    both = {"role": "assistant", "content": [
        {"type": "tool_use", "id": cid, "name": tool, "input": {"command": cid}}
        for cid, tool in (("a", "Read"), ("b", "bash"))
    ]}  # fmt: skip
    answers = {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": cid, "content": FILE} for cid in ("a", "b")
    ]}  # fmt: skip
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}, both, answers]
    for k in range(5):
        messages += _round(f"f{k}", "bash", RUN[k * 700 : k * 700 + 700])
    messages += _round("r", "bash", FILE)
    n = len(messages)
    with Budget.open(tmp_path / "live", cfg) as b:
        b.prepare(messages[: n - 4], now=0)
        cold = b.prepare(messages[: n - 2], now=400)  # the cache went cold: b is trimmed
        assert "b" in {d.call_id for d in cold.report.decisions if d.kind == "trimmed"}
        went_on = b.prepare(messages, now=401).messages
    with Budget.open(tmp_path / "resumed", cfg) as b:
        b.prepare(messages[: n - 4], now=0)
        b.prepare(messages[: n - 2], now=400)
    with Budget.open(tmp_path / "resumed", cfg) as b:
        resumed = b.prepare(messages, now=401).messages
    assert resumed == went_on


def test_a_compaction_of_the_same_request_leaves_no_pointer_to_an_output_it_dropped(
    tmp_path: Path,
) -> None:
    """A repeat decided in the request that compacts the history away from the output it
    repeats would name a call the copy no longer holds: the budgeting of the compacted history
    trims it to a stub (reason 'orphan'), which reads back exactly."""
    from tests.compaction import AUTO, Counting
    from tests.strategies import big, conversation

    repeated = big(40, "file")
    messages = conversation([[repeated], *([big(40, f"r{r}")] for r in range(1, 7)), [repeated]])
    with Budget.open(tmp_path / "s", AUTO, summarizer=Counting()) as b:
        grown(b, messages[:-2])
        req = b.prepare(messages, now=99)
        d = b.decision("call_7_0")
        assert d is not None and (d.kind, d.reason) == ("trimmed", "orphan")
        assert b.read(ref_for(repeated)) == repeated
    ids = [
        blk["tool_use_id"]
        for m in req.messages
        if isinstance(m["content"], list)
        for blk in m["content"]
        if blk.get("type") == "tool_result"
    ]
    assert req.report.compacted and ids == ["call_7_0"]
    last = shown(req.messages, len(req.messages) - 1)
    assert "the output of call call_0_0" not in last
    assert last.startswith("[toolbudget] Old output")


def test_a_repeat_of_the_text_with_another_image_is_not_called_the_same_output(
    tmp_path: Path,
) -> None:
    """Two results with the same text but different images are not the same output: the second
    is not a pointer saying it is."""
    messages = history(FILE, "x", FILE)
    for i, data in ((2, "iVBORw0KGgo="), (6, "R0lGODlhAQABAAAAACw=")):
        image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                             "data": data}}  # fmt: skip
        messages[i]["content"][0]["content"] = [{"type": "text", "text": FILE}, image]
    with Budget.open(tmp_path / "s", CONFIG) as b:
        copy = grown(b, messages)
    assert copy[6]["content"][0]["content"][0]["text"] == FILE


def test_a_pointer_whose_output_the_caller_dropped_is_trimmed_to_a_stub(tmp_path: Path) -> None:
    """The caller compacts its own history, dropping the call a pointer names: the pointer moves
    to trimmed (reason 'orphan'), a stub naming its ref, which reads back exactly; a resumed
    session gives the same bytes."""
    messages = history(FILE, "x", FILE, "y")
    summary = {"role": "user", "content": "Summary of the work so far: a.py was read."}
    dropped = [summary, *messages[3:]]  # c0 and its output gone, the pointer (c2) kept
    with Budget.open(tmp_path / "a", CONFIG) as b:
        grown(b, messages)
        assert shown(b.prepare(messages, now=20).messages, 6).startswith("[toolbudget] Output")
        copy = b.prepare(dropped, now=30).messages
        d = b.decision("c2")
        assert d is not None and (d.kind, d.reason, d.ref) == ("trimmed", "orphan", ref_for(FILE))
        assert b.read(ref_for(FILE)) == FILE
    text = shown(copy, 4)
    assert text.startswith("[toolbudget] Old output of Read trimmed (3,360 characters, 80 lines)")
    assert "earlier in this conversation" not in text
    with Budget.open(tmp_path / "b", CONFIG) as first:
        grown(first, messages)
    with Budget.open(tmp_path / "b", CONFIG) as resumed:
        assert resumed.prepare(dropped, now=30).messages == copy


def test_a_pointer_whose_output_is_still_there_stays_a_pointer_after_a_rebuild(
    tmp_path: Path,
) -> None:
    """The caller edits a later message (the history is rebuilt from the frozen decisions): the
    pointer's earlier output is still there, so the pointer stays as it was."""
    messages = history(FILE, "x", FILE, "y")
    with Budget.open(tmp_path / "s", CONFIG) as b:
        before = grown(b, messages)
        edited = [*messages[:8], result("c3", "y, edited by the host")]
        after = b.prepare(edited, now=50).messages
        d = b.decision("c2")
    assert d is not None and d.reason == "duplicate"
    assert shown(after, 6) == shown(before, 6)


_POOL = ["".join(f"line {i:03d} of output {k}\n" for i in range(60 + 20 * k)) for k in range(3)] + [
    "".join(f"line {i:03d} of output 0{' (changed)' if i == 7 else ''}\n" for i in range(60)),
    "ok\n",
]
"""Outputs a few calls share: repeats, a re-run with one line changed, a short one."""


@settings(max_examples=examples(60), deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, len(_POOL) - 1), st.sampled_from(["make", "cat a.py", "ls"])),
        min_size=2,
        max_size=14,
    ),
    st.lists(st.sampled_from([1.0, 400.0]), min_size=14, max_size=14),
    st.integers(1, 13),
)
def test_pointers_resume_to_the_same_bytes_and_read_back_exactly(
    rounds: list[tuple[int, str]], gaps: list[float], restart: int
) -> None:
    """Outputs drawn from a small pool (repeats, re-runs, cold-cache batches): a session resumed
    at any request gives the bytes of the one that went on, and every replaced output reads
    back exactly."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for k, (out, command) in enumerate(rounds):
        block = {"type": "tool_use", "id": f"c{k}", "name": "bash", "input": {"command": command}}
        messages += [{"role": "assistant", "content": [block]}, result(f"c{k}", _POOL[out])]
    config = {**CONFIG, "result_cap": 3_000, "preview_chars": 600}
    with tempfile.TemporaryDirectory() as d:
        went_on, resumed = Budget.open(Path(d) / "a", config), Budget.open(Path(d) / "b", config)
        now = 0.0
        for k, n in enumerate(range(3, len(messages) + 1, 2)):
            now += gaps[k]
            if k == restart:
                resumed.close()
                resumed = Budget.open(Path(d) / "b", config)
            a = went_on.prepare(messages[:n], now=now).messages
            assert resumed.prepare(messages[:n], now=now).messages == a, k
        for k in range(len(rounds)):
            dec = went_on.decision(f"c{k}")
            if dec is not None and dec.ref is not None:
                assert went_on.read(dec.ref) == _POOL[rounds[k][0]]
        went_on.close()
        resumed.close()
