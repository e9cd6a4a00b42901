"""The tool wrapper: outputs spilled at execution time, consistent with prepare, never re-wrapped."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest

from budget import Budget, InputError, ToolPolicy, wrap_tool
from spill import ref_for
from tests.strategies import (
    SMALL,
    assistant,
    big,
    chat_assistant,
    chat_tool,
    conversation,
    results,
)


def test_a_wrapped_output_is_the_envelope_prepare_would_have_shown(tmp_path: Path) -> None:
    """The wrapper stores a big output and returns exactly the cap pass's envelope for it."""
    text = big(300)
    with Budget.open(tmp_path / "plain", SMALL) as plain:
        req = plain.prepare(conversation([[text]]), now=0)
        expected = req.messages[2]["content"][0]["content"]
    with Budget.open(tmp_path / "s", SMALL) as b:

        @b.wrap_tool(name="bash")
        def run(cmd: str) -> str:
            return text if cmd == "big" else "small"

        envelope = run("big")
        assert envelope == expected
        assert run("small") == "small"
        assert b.read(ref_for(text)) == text
        assert run.__name__ == "run"


def test_prepare_keeps_a_wrapped_envelope_as_a_small_result(tmp_path: Path) -> None:
    """In history the envelope is a kept result with its ref: not rewritten, not spilled again."""
    text = big(300)
    with Budget.open(tmp_path / "s", SMALL) as b:
        envelope = b.wrap_tool(lambda: text, name="bash")()
        msgs = conversation([[envelope]])
        req = b.prepare(msgs, now=0)
        assert req.messages[2] is msgs[2]
        [d] = req.report.decisions
        assert (d.kind, d.reason, d.ref) == ("kept", "wrapped", ref_for(text))
        assert b.read(ref_for(text)) == text


def test_a_wrapped_envelope_is_never_spilled_again_by_the_group_budget(tmp_path: Path) -> None:
    """In an over-budget group the plain outputs are spilled, the wrapped envelopes left alone."""
    cfg = SMALL.model_copy(update={"group_budget": 1_500})
    with Budget.open(tmp_path / "s", cfg) as b:
        wrapped = [b.spill_output(big(100 + k, f"w{k}"), tool="bash") for k in range(3)]
        assert all(w.startswith("[toolbudget] Output of bash") for w in wrapped)
        assert all(len(w) < 900 for w in wrapped)
        plain = "p" * 900
        msgs = conversation([[*wrapped, plain]])
        req = b.prepare(msgs, now=0)
    kinds = {d.call_id: (d.kind, d.reason) for d in req.report.decisions}
    assert kinds["call_0_3"] == ("spilled", "aggregate")
    assert [kinds[f"call_0_{k}"] for k in range(3)] == [("kept", "wrapped")] * 3
    shown = [b["content"] for b in req.messages[2]["content"][:3]]
    assert shown == wrapped


def test_staleness_trims_a_wrapped_envelope_to_a_stub_naming_the_original(tmp_path: Path) -> None:
    """An old wrapped result can be trimmed; its stub's ref reads back the original output."""
    cfg = SMALL.model_copy(update={"preview_chars": 600})
    text = big(300, "old")
    with Budget.open(tmp_path / "s", cfg) as b:
        envelope = b.spill_output(text, tool="bash")
        assert len(envelope) > cfg.stale_floor
        msgs = conversation([[envelope], *[[big(40, f"r{r}")] for r in range(4)]])
        b.prepare(msgs[:-2], now=0)
        req = b.prepare(msgs, now=10_000)
        assert req.report.staleness_ran
        stub = req.messages[2]["content"][0]["content"]
        assert stub.startswith("[toolbudget] Old output of bash trimmed")
        assert ref_for(text) in stub
        d = b.decision("call_0_0")
        assert d is not None and (d.kind, d.ref) == ("trimmed", ref_for(text))
        assert b.read(ref_for(text)) == text


def test_a_request_copy_fed_back_as_history_gives_the_same_bytes(tmp_path: Path) -> None:
    """A host that keeps what it sent as its history gets no envelope inside an envelope."""
    msgs = conversation([[big(300)], ["ok"]])
    with Budget.open(tmp_path / "s", SMALL) as b:
        first = b.prepare(msgs, now=0).messages
        again = b.prepare(first, now=1)
        assert orjson.dumps(again.messages) == orjson.dumps(first)
        assert b.read(ref_for(msgs[2]["content"][0]["content"])) == msgs[2]["content"][0]["content"]


def test_wrapped_envelopes_are_recognised_after_a_restart(tmp_path: Path) -> None:
    """An output wrapped before a restart is recognised by a resumed session through its store."""
    text = big(300)
    with Budget.open(tmp_path / "s", SMALL) as b:
        envelope = b.spill_output(text, tool="bash")
    msgs = [
        {"role": "user", "content": "go"},
        chat_assistant(("c1", "bash")),
        chat_tool("c1", envelope),
    ]
    with Budget.open(tmp_path / "s", SMALL) as b:
        req = b.prepare(msgs, now=0)
        assert req.messages[2] is msgs[2]
        [d] = req.report.decisions
        assert (d.kind, d.reason, d.ref) == ("kept", "wrapped", ref_for(text))
    with Budget.open(tmp_path / "other", SMALL) as b:
        # Another session does not hold that body: the text is an ordinary (small) result.
        [d] = b.prepare(msgs, now=0).report.decisions
        assert (d.kind, d.reason) == ("kept", "fits")


def test_async_tools_and_the_plain_function_form() -> None:
    """Coroutine functions stay coroutine functions; budget.wrap_tool takes any spiller."""
    text = big(300)
    with Budget.in_memory(SMALL) as b:

        @b.wrap_tool
        async def fetch() -> str:
            await asyncio.sleep(0)
            return text

        assert asyncio.iscoroutinefunction(fetch)
        out = asyncio.run(fetch())
        assert out.startswith("[toolbudget] Output of fetch was too large")
        assert b.read(ref_for(text)) == text

        calls: list[tuple[str, str]] = []

        def spiller(text: str, *, tool: str = "") -> str:
            calls.append((text, tool))
            return "spilled"

        assert wrap_tool(lambda: "x", spill=spiller, name="t")() == "spilled"
        assert calls == [("x", "t")]


def test_outputs_that_need_no_spill_pass_through(tmp_path: Path) -> None:
    """Small outputs, non-strings, exempt tools, envelopes and failed spills come back as they are."""
    text = big(300)
    cfg = SMALL.model_copy(update={"tools": {"cat": ToolPolicy(exempt=True)}})
    with Budget.open(tmp_path / "s", cfg) as b:
        payload: dict[str, Any] = {"rows": [1, 2]}
        assert b.wrap_tool(lambda: payload)() is payload
        assert b.spill_output(text, tool="cat") == text
        assert b.spill_output(text, tool=cfg.read_tool_name) == text
        envelope = b.spill_output(text, tool="bash")
        assert b.spill_output(envelope * 3, tool="bash") != envelope * 3  # not one envelope
        assert b.spill_output(envelope, tool="bash") == envelope
    full = SMALL.model_copy(update={"quota_bytes": 100})
    with Budget.open(tmp_path / "q", full) as b:
        assert b.spill_output(text, tool="bash") == text


def test_a_tool_name_that_is_not_a_string_is_an_input_error() -> None:
    """spill_output(tool=...) and wrap_tool(name=...) refuse a number or bytes as the tool's
    name with an InputError naming the argument; wrap_tool refuses what is no function."""
    text = big(300)
    with Budget.in_memory(SMALL) as b:
        for tool in (3, b"cat", None):
            with pytest.raises(InputError, match=r"^tool must be the tool's name"):
                b.spill_output(text, tool=tool)  # type: ignore[arg-type]
        with pytest.raises(InputError, match=r"^name must be the tool's name"):
            b.wrap_tool(name=5)(lambda: text)  # type: ignore[call-overload]
        with pytest.raises(InputError, match=r"^wrap_tool takes the tool's function"):
            b.wrap_tool("bash")  # type: ignore[call-overload]
        assert b.spill_output(text, tool="bash").startswith("[toolbudget] Output of bash")


@pytest.mark.parametrize("spill", [None, "spill_output", 5])
def test_the_module_wrapper_refuses_a_spill_that_is_no_callable(spill: object) -> None:
    """``wrap_tool(fn, spill=None)`` is an InputError naming ``spill`` when wrapping, not a bare
    TypeError at the tool's first run."""
    with pytest.raises(InputError, match=r"^spill must be"):
        wrap_tool(lambda: big(300), spill=spill)  # type: ignore[arg-type]


def test_wrapped_anthropic_results_with_error_flags_keep_them(tmp_path: Path) -> None:
    """A wrapped envelope in an is_error tool_result keeps the flag and is not rewritten."""
    with Budget.open(tmp_path / "s", SMALL) as b:
        envelope = b.spill_output(big(300, "err"), tool="bash")
        msgs = [
            {"role": "user", "content": "go"},
            assistant(("t1", "bash")),
            results(("t1", envelope), is_error=True),
        ]
        req = b.prepare(msgs, now=0)
        assert req.messages[2] is msgs[2]
        assert req.messages[2]["content"][0]["is_error"] is True


def test_a_wrapped_output_its_envelope_would_outgrow_is_returned_whole(tmp_path: Path) -> None:
    """Over a tool cap of 1, an output shorter than its envelope comes back whole and unstored,
    as prepare keeps it (the cap pass's rule), where the wrapper returned the longer envelope."""
    text = "\n".join(f"line {i} " + "x" * 40 for i in range(45))
    cfg = SMALL.model_copy(update={"preview_chars": 2_000, "tools": {"cat": ToolPolicy(cap=1)}})
    with Budget.open(tmp_path / "s", cfg) as b:
        assert b.spill_output(text, tool="cat") == text
        assert not b.store.has(ref_for(text))
        req = b.prepare(conversation([[text]], tool="cat"), now=0)
        assert req.messages[2]["content"][0]["content"] == text
