"""Budget end to end on a real session directory: the four passes, freezing, read-back, resume."""

from __future__ import annotations

import copy
import inspect
import os
import stat
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from budget import Budget, InputError, RefError
from spill import LocalStore, Store, ref_for
from spill._store import STORE_METHODS
from tests.strategies import SMALL as FAST
from tests.strategies import assistant, big, conversation, image_block, results

# Synced like a user's session: these tests cover the session directory end to end.
SMALL = FAST.model_copy(update={"fsync": True})


def shown(msgs: list[dict[str, Any]], call_id: str) -> str:
    """The text a request copy shows for ``call_id``."""
    for m in msgs:
        if isinstance(m["content"], list):
            for b in m["content"]:
                if b.get("type") == "tool_result" and b["tool_use_id"] == call_id:
                    c = b["content"]
                    return (
                        c
                        if isinstance(c, str)
                        else "".join(p.get("text", "") for p in c if p.get("type") == "text")
                    )
    raise KeyError(call_id)


def test_cap_spills_a_large_result_and_reads_it_back_exactly(tmp_path: Path) -> None:
    """A result over the cap becomes an envelope; its ref reads back the exact original."""
    text = big(300)
    msgs = conversation([[text]])
    with Budget.open(tmp_path / "s", SMALL) as b:
        req = b.prepare(msgs, now=0)
        env = shown(req.messages, "call_0_0")
        assert env.startswith("[toolbudget] Output of bash was too large")
        assert ref_for(text) in env
        assert b.read(ref_for(text)) == text
        assert b.read(ref_for(text), offset=2, limit=2) == "out line 00002\nout line 00003\n"
        [d] = req.report.decisions
        assert (d.kind, d.reason, d.chars_before) == ("spilled", "cap", len(text))


def test_the_callers_history_is_never_changed_and_unchanged_messages_are_shared(
    tmp_path: Path,
) -> None:
    """prepare leaves its input as it was and reuses the message objects it does not change."""
    msgs = conversation([[big(300)], ["small"]])
    before = copy.deepcopy(msgs)
    with Budget.open(tmp_path / "s", SMALL) as b:
        req = b.prepare(msgs, now=0)
    assert msgs == before
    assert req.messages is not msgs
    assert req.messages[0] is msgs[0] and req.messages[1] is msgs[1]
    assert req.messages[2] is not msgs[2]
    assert req.messages[4] is msgs[4]


def test_decisions_are_frozen_and_the_prefix_stays_byte_identical(tmp_path: Path) -> None:
    """Each later request starts with the previous request copy, byte for byte."""
    msgs = conversation([[big(300)], ["ok"]])
    with Budget.open(tmp_path / "s", SMALL) as b:
        first = b.prepare(msgs, now=0)
        msgs = [*msgs, assistant(("c9", "bash")), results(("c9", big(200, "more")))]
        second = b.prepare(msgs, now=1)
    assert second.messages[: len(first.messages)] == first.messages
    assert second.report.prefix_stable
    assert shown(second.messages, "call_0_0") == shown(first.messages, "call_0_0")


def test_aggregate_spills_the_largest_fresh_results_of_a_group(tmp_path: Path) -> None:
    """A group over its budget spills its largest results first until it fits."""
    a, b_, c = "a" * 900, "b" * 950, "c" * 800
    msgs = conversation([[a, b_, c]])
    with Budget.open(tmp_path / "s", SMALL) as b:
        req = b.prepare(msgs, now=0)
    kinds = {d.call_id: (d.kind, d.reason) for d in req.report.decisions}
    assert kinds["call_0_1"] == ("spilled", "aggregate")
    assert kinds["call_0_0"] == ("kept", "fits")
    assert kinds["call_0_2"] == ("kept", "fits")


def test_staleness_trims_old_results_in_one_batch_when_the_cache_is_cold(tmp_path: Path) -> None:
    """After a cache-TTL pause, every result outside the protected rounds becomes a stub at once."""
    outputs = [[big(40, f"r{r}")] for r in range(6)]
    msgs = conversation(outputs)
    with Budget.open(tmp_path / "s", SMALL) as b:
        warm = b.prepare(msgs[:7], now=0)
        assert not warm.report.staleness_ran
        hot = b.prepare(msgs[:9], now=10)
        assert not hot.report.staleness_ran  # warm cache, no pressure, does not pay yet
        cold = b.prepare(msgs, now=10 + 301)
        assert cold.report.staleness_ran and cold.report.staleness_reason == "cold_cache"
        assert not cold.report.prefix_stable
        trimmed = {d.call_id for d in cold.report.decisions if d.kind == "trimmed"}
        assert trimmed == {"call_0_0", "call_1_0", "call_2_0", "call_3_0"}
        for cid in trimmed:
            assert shown(cold.messages, cid).startswith("[toolbudget] Old output of bash trimmed")
            original = shown(msgs, cid)
            assert b.read(ref_for(original)) == original
        assert shown(cold.messages, "call_5_0") == shown(msgs, "call_5_0")
        again = b.prepare([*msgs, assistant(("x", "bash")), results(("x", "fine"))], now=312)
        assert again.report.prefix_stable and not again.report.staleness_ran


def test_the_window_triggers_a_batch_on_a_warm_cache(tmp_path: Path) -> None:
    """Near the window, old results are trimmed even though the cache is warm."""
    cfg = SMALL.model_copy(update={"window": 1_000})
    msgs = conversation([[big(40, f"r{r}")] for r in range(5)])
    with Budget.open(tmp_path / "s", cfg) as b:
        b.prepare(msgs[:5], now=0)
        req = b.prepare(msgs, now=1)
    assert req.report.staleness_reason == "window"


def test_empty_results_become_no_output_and_images_are_never_rewritten(tmp_path: Path) -> None:
    """An empty result shows "(no output)"; an image block survives its result being spilled."""
    content = [{"type": "text", "text": big(300)}, dict(image_block)]
    msgs = [
        {"role": "user", "content": "go"},
        assistant(("e", "bash"), ("i", "screenshot")),
        results(("e", ""), ("i", content)),
    ]
    with Budget.open(tmp_path / "s", SMALL) as b:
        req = b.prepare(msgs, now=0)
    blocks = req.messages[2]["content"]
    assert blocks[0]["content"] == "(no output)"
    assert blocks[1]["content"][1] == image_block
    assert blocks[1]["content"][0]["text"].startswith("[toolbudget]")


def test_the_read_back_tool_is_never_spilled_and_pages_instead(tmp_path: Path) -> None:
    """Results of the read-back tool stay whole; its handler pages with numbered lines."""
    text = big(3000)
    msgs = conversation([[text]])
    with Budget.open(tmp_path / "s", SMALL) as b:
        b.prepare(msgs, now=0)
        page = b.handle_read_tool({"ref": ref_for(text), "offset": 10, "limit": 3})
        assert page.splitlines() == [
            f"[toolbudget] ref {ref_for(text)}: lines 11-13 of 3000",
            "    11\tout line 00010",
            "    12\tout line 00011",
            "    13\tout line 00012",
            "[more: call again with offset=13]",
        ]
        whole = b.handle_read_tool({"ref": ref_for(text)})
        assert len(whole) > SMALL.result_cap
        msgs += [assistant(("rb", "toolbudget_read")), results(("rb", whole))]
        req = b.prepare(msgs, now=1)
        assert shown(req.messages, "rb") == whole
        assert b.read_tool()["name"] == "toolbudget_read"
        assert b.handle_read_tool({"ref": "../../etc/passwd"}).startswith("Error:")


def test_resume_restores_decisions_and_gives_identical_bytes(tmp_path: Path) -> None:
    """A new session object on the same directory produces byte-identical request copies."""
    msgs = conversation([[big(300)], [big(40)], ["x" * 1200, "y" * 900, "z" * 800]])
    with Budget.open(tmp_path / "s", SMALL) as b:
        first = b.prepare(msgs, now=0)
    with Budget.open(tmp_path / "s", SMALL) as b:
        again = b.prepare(msgs, now=1)
        assert b.decision("call_0_0") is not None
    assert again.messages == first.messages
    assert [d.call_id for d in again.report.decisions] == []


def test_a_failed_spill_keeps_the_text_inline(tmp_path: Path) -> None:
    """When the store cannot take the body, the full text stays and the result is kept_unspillable."""
    text = big(300)
    with Budget.open(tmp_path / "s", SMALL.model_copy(update={"quota_bytes": 100})) as b:
        req = b.prepare(conversation([[text]]), now=0)
    assert shown(req.messages, "call_0_0") == text
    [d] = req.report.decisions
    assert (d.kind, d.reason) == ("kept_unspillable", "spill_failed")


def test_session_directory_and_files_are_private(tmp_path: Path) -> None:
    """The session directory is 0700 and every file in it 0600."""
    with Budget.open(tmp_path / "s", SMALL) as b:
        b.prepare(conversation([[big(300)]]), now=0)
    assert stat.S_IMODE(os.stat(tmp_path / "s").st_mode) == 0o700
    for root, _dirs, files in os.walk(tmp_path / "s"):
        for f in files:
            assert stat.S_IMODE(os.stat(Path(root) / f).st_mode) == 0o600, f


@pytest.mark.parametrize(
    ("messages", "needle"),
    [
        ("hello", "messages must be a list"),
        ([{"content": "hi"}], "messages[0].role"),
        ([{"role": "user", "content": 3}], "messages[0].content must be a string or a list"),
        ([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "nope"}]}], "'nope'"),
        ([{"role": "user", "content": ["text"]}], "messages[0].content[0] must be a dict"),
    ],
)
def test_bad_input_raises_an_input_error_naming_the_problem(
    tmp_path: Path, messages: Any, needle: str
) -> None:
    """Malformed histories raise InputError whose message points at the bad part."""
    with Budget.open(tmp_path / "s", SMALL) as b, pytest.raises(InputError) as info:
        b.prepare(messages)
    assert needle in str(info.value)


@pytest.mark.parametrize(
    ("argument", "value"), [("summarizer", "claude-sonnet-4-5"), ("text_tokens", "o200k_base")]
)
def test_open_refuses_a_callback_that_is_not_callable(
    tmp_path: Path, argument: str, value: str
) -> None:
    """A summarizer or text counter that is not callable is an InputError naming it at open."""
    with pytest.raises(InputError, match=rf"^{argument} must be a callable"):
        Budget.open(tmp_path / "s", SMALL, **{argument: value})  # type: ignore[arg-type]
    with Budget.open(tmp_path / "s", SMALL) as b:  # the refused open let the session go
        assert b.prepare(conversation([["ok"]])).report.format == "anthropic"


@pytest.mark.parametrize("call_id", [None, 5, ["call_0_0"]])
def test_a_decision_asked_by_a_call_id_that_is_not_a_string_is_an_input_error(
    tmp_path: Path, call_id: Any
) -> None:
    """decision() with None (a missing id field), a number or a list is an InputError naming
    call_id."""
    with Budget.open(tmp_path / "s", SMALL) as b:
        b.prepare(conversation([[big(40)]]))
        with pytest.raises(InputError, match="call_id must be"):
            b.decision(call_id)
        assert b.decision("call_0_0") is not None


@pytest.mark.parametrize("ref", ["../../etc/passwd", "/etc/passwd", "A" * 32, "0" * 31, 7])
def test_bad_refs_are_refused(tmp_path: Path, ref: Any) -> None:
    """A ref that is not 32 lowercase hex characters is a RefError, and no file is touched."""
    with Budget.open(tmp_path / "s", SMALL) as b, pytest.raises(RefError):
        b.read(ref)


def test_overflow_forces_staleness_and_three_in_a_row_raise(tmp_path: Path) -> None:
    """After an overflow everything but the last round is trimmed; a third overflow raises."""
    from budget import ContextOverflow

    msgs = conversation([[big(40, f"r{r}")] for r in range(4)])
    with Budget.open(tmp_path / "s", SMALL) as b:
        b.prepare(msgs, now=0)
        assert not b.on_overflow("rate limited, try later")  # not an overflow: ignored
        overflow = {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 210000 tokens > 200000 maximum",
            },
        }
        assert b.on_overflow(overflow)
        assert b.window() == 128_000  # the stated 200k limit is larger than the default window
        req = b.prepare(msgs, now=1)
        assert req.report.staleness_reason == "forced"
        assert {d.call_id for d in req.report.decisions} == {"call_0_0", "call_1_0", "call_2_0"}
        assert b.on_overflow("prompt is too long: 130000 tokens > 100000 maximum")
        assert b.window() == 100_000
        with pytest.raises(ContextOverflow):
            b.on_overflow(overflow)


@pytest.mark.slow
def test_a_fresh_process_resumes_with_byte_identical_request_copies(tmp_path: Path) -> None:
    """Another Python process opening the session produces exactly the same request bytes."""
    import subprocess
    import sys

    import orjson

    msgs = conversation([[big(300)], [big(40)], ["x" * 1200, "y" * 900, "z" * 800]])
    (tmp_path / "msgs.json").write_bytes(orjson.dumps(msgs))
    with Budget.open(tmp_path / "s", SMALL) as b:
        mine = orjson.dumps(b.prepare(msgs, now=0).messages)
    script = (
        "import sys, orjson\n"
        "from budget import Budget\n"
        "from tests.budget.test_session import SMALL\n"
        "msgs = orjson.loads(open(sys.argv[1], 'rb').read())\n"
        "with Budget.open(sys.argv[2], SMALL) as b:\n"
        "    sys.stdout.buffer.write(orjson.dumps(b.prepare(msgs, now=5).messages))\n"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "msgs.json"), str(tmp_path / "s")],
        capture_output=True,
        cwd=root,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == mine


def test_envelopes_can_name_the_spilled_file(tmp_path: Path) -> None:
    """With include_path the envelope names the body's file, which holds the exact output."""
    text = big(300)
    cfg = SMALL.model_copy(update={"include_path": True})
    with Budget.open(tmp_path / "s", cfg) as b:
        req = b.prepare(conversation([[text]]), now=0)
    line = next(x for x in shown(req.messages, "call_0_0").splitlines() if x.startswith("File: "))
    path = Path(line.removeprefix("File: "))
    assert path.is_relative_to((tmp_path / "s").resolve()) or path.is_relative_to(tmp_path / "s")
    assert path.read_text() == text


def test_report_spilled_counts_the_copy_while_decisions_cover_this_request(
    tmp_path: Path,
) -> None:
    """report.spilled counts every spilled result of the copy; spilled_now only this request's."""
    first = conversation([["x" * 60_000]])
    with Budget.open(tmp_path / "s") as session:
        one = session.prepare(first, now=0).report
        two = session.prepare([*first, {"role": "assistant", "content": "done"}], now=1).report
    assert (one.spilled, one.spilled_now, len(one.decisions)) == (1, 1, 1)
    assert (two.spilled, two.spilled_now, two.decisions) == (1, 0, ())


class _CountingStore:
    """A user's metrics wrapper: counts each store call and delegates it through __getattr__."""

    def __init__(self, inner: LocalStore) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return method(*args, **kwargs)

        return counted if callable(method) else method


def test_a_store_wrapper_that_delegates_through_getattr_is_a_store_on_every_python(
    tmp_path: Path,
) -> None:
    """A wrapper whose store methods come from __getattr__ is accepted (Python 3.12 and later
    check runtime protocols without __getattr__), and the session runs through it."""
    store = _CountingStore(LocalStore(tmp_path / "s"))
    text = big(300)
    with Budget(store, SMALL) as b:
        out = b.prepare(conversation([[text]])).messages
        assert ref_for(text) in shown(out, "call_0_0")
        assert b.read(ref_for(text)) == text
    assert store.calls["put_many"] + store.calls["put"] >= 1
    assert store.calls["close"] == 1


@pytest.mark.parametrize("store", ["sessions/abc", object(), None])
def test_a_store_that_is_not_one_is_an_input_error(store: object) -> None:
    """A path, or any object without the store methods, is an InputError naming its type."""
    with pytest.raises(
        InputError, match=r"^store must be a spill store .* not (str|object|NoneType)"
    ):
        Budget(store)  # type: ignore[arg-type]


def test_the_store_check_looks_for_every_method_of_the_store_protocol() -> None:
    """STORE_METHODS names exactly the methods the Store protocol declares."""
    declared = {n for n, v in vars(Store).items() if inspect.isfunction(v)}
    assert set(STORE_METHODS) == declared - {"__init__", "__subclasshook__"}
