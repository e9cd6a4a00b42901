"""Regressions for issue 11, items 1-5 and 16: state a session keeps, logs and resumes.

Each test fails on 86f6284 and names what it proves: a wrapped result trimmed after a resume,
repeated call ids, repeated log records, the overflow streak and last usage across a restart,
the usage anchor after the caller compacts its history, and a result the caller edits after it
was decided.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from structlog.testing import capture_logs

from budget import Budget, BudgetConfig, StoreError
from spill import MemoryStore, ref_for
from spill._log import encode_records
from tests.conversations import digest
from tests.strategies import SMALL, assistant, big, results

Message = dict[str, Any]
OVERFLOW = {"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 250000 tokens > 200000 maximum"}}  # fmt: skip
"""Anthropic's prompt-too-long error body, as ``on_overflow`` is given it."""


def rounds(n: int, chars: int, start: int = 0, tag: str = "r") -> list[Message]:
    """``n`` rounds of one ``bash`` call each, answered by ``chars`` characters of output."""
    out: list[Message] = []
    for i in range(start, start + n):
        cid = f"{tag}{i}"
        out += [assistant((cid, "bash")), results((cid, f"{cid}:" + "x" * (chars - 3 - len(cid))))]
    return out


def shown_results(messages: list[Any]) -> list[str]:
    """The text of every tool result of an Anthropic-format request copy, in order."""
    out = []
    for m in messages:
        if isinstance(m.get("content"), list):
            out += [b["content"] for b in m["content"] if b.get("type") == "tool_result"]
    return out


# -- item 1 ---------------------------------------------------------------------------------------


def test_a_wrapped_result_trimmed_after_a_resume_is_trimmed_as_live_and_reads_back(
    tmp_path: Path,
) -> None:
    """A wrap_tool envelope kept in one process and trimmed by a batch after ``Budget.open``
    again shows the same stub as a session that went on, and its ref reads back the exact
    output (it used to raise StoreError on that request and every later one)."""
    cfg = SMALL.model_copy(update={"preview_chars": 800})
    body = big(300, "wrapped")
    later = rounds(5, 20, start=1)
    copies = []
    for name, restart in (("live", False), ("resumed", True)):
        path = tmp_path / name
        session = Budget.open(path, cfg)
        envelope = session.spill_output(body, tool="bash")
        msgs = [
            {"role": "user", "content": "go"},
            assistant(("w", "bash")),
            results(("w", envelope)),
        ]
        first = session.prepare(msgs, now=1_000)
        assert [(d.kind, d.reason) for d in first.report.decisions] == [("kept", "wrapped")]
        if restart:
            session.close()
            session = Budget.open(path, cfg)
        with session:
            req = session.prepare(msgs + later, now=100_000)  # a cold cache: a batch runs
            again = session.prepare(msgs + later + rounds(1, 20, start=9), now=100_001)
            trimmed = [d for d in req.report.decisions if d.call_id == "w"]
            assert [d.kind for d in trimmed] == ["trimmed"]
            assert trimmed[0].ref == ref_for(body)
            assert session.read(ref_for(body)) == body
        copies.append((digest(req.messages), digest(again.messages)))
    assert copies[0] == copies[1]


class _RehashingStore(MemoryStore):
    """A store that files every body under the hash of its reversed text: not the ref the
    session computed, as a store with another hash function would."""

    def put(self, text: str) -> str:
        super().put(text[::-1])
        return ref_for(text[::-1])

    def put_many(self, texts: Sequence[str]) -> list[str | StoreError]:
        return [self.put(text) for text in texts]


def test_a_store_returning_another_ref_keeps_the_text_inline_instead_of_raising() -> None:
    """When the store files a body under another ref than the decision names, prepare keeps
    the text whole as ``kept_unspillable`` with a ``toolbudget.spill.failed`` event (it used to raise
    StoreError, which prepare must never do for the store)."""
    text = big(200, "rehash")
    msgs = [{"role": "user", "content": "go"}, assistant(("c", "bash")), results(("c", text))]
    session = Budget(_RehashingStore(), SMALL)
    with capture_logs() as events:
        req = session.prepare(msgs, now=0)
    assert [(d.kind, d.reason) for d in req.report.decisions] == [
        ("kept_unspillable", "spill_failed")
    ]
    assert shown_results(req.messages) == [text]
    assert [e["event"] for e in events if e["log_level"] == "error"] == ["toolbudget.spill.failed"]


# -- item 2 ---------------------------------------------------------------------------------------


def test_two_results_with_one_call_id_in_one_request_each_show_their_own_envelope(
    tmp_path: Path,
) -> None:
    """Parallel calls sharing an id: each result is its own result, shown with the envelope of
    its own output, and both outputs read back (the first used to show the second's envelope
    and was never stored)."""
    first, second = big(200, "first"), big(200, "secnd")
    msgs = [
        {"role": "user", "content": "go"},
        assistant(("call_0", "bash"), ("call_0", "bash")),
        results(("call_0", first), ("call_0", second)),
    ]
    with Budget.open(tmp_path / "s", SMALL) as session:
        req = session.prepare(msgs, now=0)
        refs = [d.ref for d in req.report.decisions]
        assert refs == [ref_for(first), ref_for(second)]
        assert [d.call_id for d in req.report.decisions] == ["call_0", "call_0"]
        shown = shown_results(req.messages)
        assert ref_for(first) in shown[0] and ref_for(second) not in shown[0]
        assert ref_for(second) in shown[1] and ref_for(first) not in shown[1]
        assert session.read(ref_for(first)) == first
        assert session.read(ref_for(second)) == second


def test_a_call_id_repeated_in_a_later_turn_is_decided_as_a_new_result(tmp_path: Path) -> None:
    """A server that names every turn's call ``call_0``: an output of the same length appended
    later gets a decision and its own envelope, and is stored (it used to show the first
    one's envelope, with no decision, and was never stored)."""
    first, second = big(200, "first"), big(200, "secnd")
    assert len(first) == len(second)
    msgs = [
        {"role": "user", "content": "go"},
        assistant(("call_0", "bash")),
        results(("call_0", first)),
    ]
    with Budget.open(tmp_path / "s", SMALL) as session:
        session.prepare(msgs, now=0)
        msgs += [assistant(("call_0", "bash")), results(("call_0", second))]
        req = session.prepare(msgs, now=1)
        assert [(d.call_id, d.kind, d.ref) for d in req.report.decisions] == [
            ("call_0", "spilled", ref_for(second))
        ]
        shown = shown_results(req.messages)
        assert ref_for(first) in shown[0] and ref_for(second) in shown[1]
        assert session.read(ref_for(second)) == second


def test_chat_completions_servers_that_name_every_call_call_0_lose_no_output(
    tmp_path: Path,
) -> None:
    """OpenAI-compatible servers numbering calls per turn (Chat Completions): every turn's
    ``call_0`` output is shown with its own envelope and reads back, live and after a resume."""
    outputs = [big(200, f"turn{i}") for i in range(4)]
    history: list[Message] = [{"role": "user", "content": "go"}]
    for out in outputs:
        call = {"id": "call_0", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
        history += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_0", "content": out},
        ]
    path = tmp_path / "s"
    with Budget.open(path, SMALL) as session:
        live = session.prepare(history, now=0)
    with Budget.open(path, SMALL) as session:
        again = session.prepare(history, now=0)
        for out, message in zip(outputs, live.messages[2::2], strict=True):
            assert ref_for(out) in message["content"]
            assert session.read(ref_for(out)) == out
    assert [d.ref for d in live.report.decisions] == [ref_for(out) for out in outputs]
    assert digest(again.messages) == digest(live.messages)


def test_a_repeated_call_id_resumes_with_the_same_copies_and_never_raises(tmp_path: Path) -> None:
    """Repeated call ids with outputs of different lengths: every prepare after a resume works
    and gives the bytes the session that went on gave (it used to raise StoreError)."""
    outputs = [big(200 + 30 * i, f"turn{i}") for i in range(8)]
    history: list[Message] = [{"role": "user", "content": "go"}]
    steps = []
    for i, out in enumerate(outputs):
        history += [assistant(("call_0", "bash")), results(("call_0", out))]
        steps.append((len(history), 1_000.0 * i))
    with Budget.open(tmp_path / "live", SMALL) as session:
        live = [digest(session.prepare(history[:n], now=t).messages) for n, t in steps]
    with Budget.open(tmp_path / "resumed", SMALL) as session:
        got = [digest(session.prepare(history[:n], now=t).messages) for n, t in steps[:3]]
    with Budget.open(tmp_path / "resumed", SMALL) as session:
        got += [digest(session.prepare(history[:n], now=t).messages) for n, t in steps[3:]]
        for i, out in enumerate(outputs):
            assert session.read(ref_for(out)) == out, f"output {i}"
    assert got == live


# -- item 3 ---------------------------------------------------------------------------------------


def test_a_second_overflow_streak_survives_a_resume(tmp_path: Path) -> None:
    """A second overflow streak logs a record equal to the first one's; it is kept, so the
    forced retry after a resume shows what the same process shows (the log reader used to drop
    it as a duplicate line, and the resumed retry was not forced)."""
    cfg = SMALL.model_copy(update={"protect_rounds": 3})
    history = [{"role": "user", "content": "go"}, *rounds(6, 700)]
    usage_1 = {"input_tokens": 1_000, "output_tokens": 10}
    usage_2 = {"input_tokens": 2_000, "output_tokens": 10}
    copies = []
    for name, restart in (("live", False), ("resumed", True)):
        path = tmp_path / name
        session = Budget.open(path, cfg)
        session.prepare(history[:9], now=0)
        session.on_overflow(OVERFLOW)
        session.prepare(history[:9], now=1)  # the forced retry ends in a new response...
        session.prepare(history, usage=usage_1, now=2)
        session.prepare(history + rounds(1, 20, 8), usage=usage_2, now=3)
        session.on_overflow(OVERFLOW)  # ...and a second streak starts: {"t":"ovf","count":1}
        if restart:
            session.close()
            session = Budget.open(path, cfg)
        with session:
            req = session.prepare(history + rounds(1, 20, 8), now=4)
        assert req.report.staleness_reason == "forced", name
        copies.append(digest(req.messages))
    assert copies[0] == copies[1]


def test_a_log_written_before_sequence_numbers_restores_as_it_did(tmp_path: Path) -> None:
    """A log without the fields this fix adds (sequence numbers, text hashes, the request's
    tokens, streak and usage) restores the same decisions and gives the same next copy; its
    one duplicated line is still skipped."""
    history = [{"role": "user", "content": "go"}, *rounds(8, 700)]
    steps = [3, 7, 11, 17]
    for name in ("live", "old"):
        with Budget.open(tmp_path / name, SMALL) as session:
            for i, n in enumerate(steps):
                session.prepare(history[:n], now=1_000.0 * i)
            if name == "live":
                expected = digest(session.prepare(history, now=10_000).messages)
    log = tmp_path / "old" / "decisions.jsonl"
    added = {"s", "h", "f", "o", "u", "v", "crc"}
    old = [
        {k: v for k, v in orjson.loads(line).items() if k not in added}
        for line in log.read_bytes().splitlines()
    ]
    log.write_bytes(encode_records([*old[:1], *old]))  # and its first line twice
    with capture_logs() as events, Budget.open(tmp_path / "old", SMALL) as session:
        got = digest(session.prepare(history, now=10_000).messages)
    assert got == expected
    assert [e["reason"] for e in events if e["event"] == "toolbudget.log.line_skipped"] == [
        "duplicate of an earlier record"
    ]


# -- item 4 ---------------------------------------------------------------------------------------


def test_a_retry_with_the_same_usage_after_an_overflow_is_forced_after_a_resume(
    tmp_path: Path,
) -> None:
    """``prepare(usage=U)``, ``on_overflow``, restart, ``prepare(usage=U)`` again: the retry is
    forced and shows what the same-process retry shows (``U`` used to look like a new response
    after the resume and end the streak)."""
    history = [{"role": "user", "content": "go"}, *rounds(6, 700)]
    usage = {"input_tokens": 3_000, "output_tokens": 20}
    copies = []
    for name, restart in (("live", False), ("resumed", True)):
        path = tmp_path / name
        session = Budget.open(path, SMALL)
        session.prepare(history[:7], now=0)
        session.prepare(history, usage=usage, now=1)
        session.on_overflow(OVERFLOW)
        if restart:
            session.close()
            session = Budget.open(path, SMALL)
        with session:
            req = session.prepare(history, usage=usage, now=2)
            assert req.report.staleness_reason == "forced", name
            after = session.prepare(history, usage=usage, now=3)  # still the same streak
        copies.append((digest(req.messages), digest(after.messages)))
    assert copies[0] == copies[1]


# -- item 5 ---------------------------------------------------------------------------------------


def test_a_usage_from_before_the_caller_compacted_its_history_is_not_an_anchor(
    tmp_path: Path,
) -> None:
    """After the caller replaces its history by a shorter one, the usage measured on the long
    one is not a floor: the estimate is the compacted history's own and no pressure batch
    trims it (it used to report the old usage as ``tokens_after`` and trim)."""
    cfg = BudgetConfig(window=200_000, fsync=False)
    long = [{"role": "user", "content": "go"}, *rounds(40, 4_000)]
    compacted = [
        {"role": "user", "content": "Summary of the work so far."},
        *rounds(6, 8_000, tag="c"),
    ]
    usage = {"input_tokens": 131_000, "output_tokens": 200}
    with Budget.open(tmp_path / "s", cfg) as session:
        session.prepare(long, now=0)
        req = session.prepare(compacted, usage=usage, now=1)
        assert req.report.tokens_after < 20_000
        assert not req.report.staleness_ran
        # Nothing is trimmed or spilled for the window; a fresh result may still be spilled
        # because it pays (the long history's kept results taught a low read-back rate).
        assert all(d.kind != "trimmed" for d in req.report.decisions)
        assert all(d.kind == "kept" or d.reason == "pays" for d in req.report.decisions)


def test_a_usage_from_a_history_that_diverged_is_not_an_anchor_live_or_resumed(
    tmp_path: Path,
) -> None:
    """A history that is longer but does not start with the last request's history (the caller
    rewrote it) gets no usage floor, in the same process and after a resume alike."""
    cfg = BudgetConfig(window=200_000, fsync=False)
    first = [{"role": "user", "content": "go"}, *rounds(4, 4_000)]
    rewritten = [{"role": "user", "content": "Summary."}, *rounds(6, 3_000, tag="n")]
    usage = {"input_tokens": 150_000, "output_tokens": 100}
    for name, restart in (("live", False), ("resumed", True)):
        path = tmp_path / name
        session = Budget.open(path, cfg)
        session.prepare(first, now=0)
        if restart:
            session.close()
            session = Budget.open(path, cfg)
        with session:
            req = session.prepare(rewritten, usage=usage, now=1)
        assert req.report.tokens_after < 20_000, name
        assert not req.report.staleness_ran, name


# -- item 16 --------------------------------------------------------------------------------------


def test_a_result_redacted_after_it_was_trimmed_shows_the_redaction_and_reports_it(
    tmp_path: Path,
) -> None:
    """The caller redacts a trimmed result (same length, and shorter): the copy shows the new
    text, the report's decision is the one the copy shows, the secret never reappears, and a
    resumed session shows the same bytes (the old stub, with a glimpse of the secret, used to
    stay in the copy while the report said kept/fits)."""
    cfg = SMALL.model_copy(update={"min_reclaim_tokens": 50, "stub_chars": 300})
    secret = "API_KEY=sk-live-0123456789abcdef"
    for variant, redacted in (("same", "API_KEY=" + "*" * 24), ("shorter", "API_KEY=[redacted]")):
        text = secret + "\n" + "y" * 600
        history = [
            {"role": "user", "content": "go"},
            assistant(("leak", "bash")),
            results(("leak", text)),
            *rounds(4, 20),
        ]
        path = tmp_path / variant
        with Budget.open(path, cfg) as session:
            session.prepare(history[:3], now=0)
            req = session.prepare(history, now=100_000)  # cold cache: the result is trimmed
            assert secret[:20] in shown_results(req.messages)[0]
            assert [d.kind for d in req.report.decisions if d.call_id == "leak"] == ["trimmed"]
            edited = [*history]
            edited[2] = results(("leak", text.replace(secret, redacted)))
            req = session.prepare([*edited, *rounds(1, 20, 9)], now=100_001)
            shown = shown_results(req.messages)[0]
            assert secret not in shown and "sk-live" not in shown, variant
            assert shown == text.replace(secret, redacted), variant
            leak = [d for d in req.report.decisions if d.call_id == "leak"]
            assert [(d.kind, d.chars_after) for d in leak] == [("kept", len(shown))], variant
            live = digest(req.messages)
        with Budget.open(path, cfg) as session:
            again = session.prepare([*edited, *rounds(1, 20, 9)], now=100_001)
        assert digest(again.messages) == live, variant
        assert "sk-live" not in shown_results(again.messages)[0]


def test_the_decision_of_a_call_id_holding_nul_names_that_call_id(tmp_path: Path) -> None:
    """``session.decision(id)`` for an id holding NUL (keyed with a suffix, so keys never
    collide) names the call id as given, where it named the internal key ``id + NUL + 1``;
    so it does after a resume."""
    call_id = "c\x001"
    msgs = [
        {"role": "user", "content": "go"},
        assistant((call_id, "bash")),
        results((call_id, big(300))),
    ]
    with Budget.open(tmp_path / "s", SMALL) as session:
        session.prepare(msgs, now=0)
        decision = session.decision(call_id)
        assert decision is not None and decision.call_id == call_id
        assert [d.call_id for d in session.prepare(msgs, now=1).report.decisions] in ([], [call_id])
    with Budget.open(tmp_path / "s", SMALL) as resumed:
        again = resumed.decision(call_id)
        assert again is not None and again.call_id == call_id and again.ref == decision.ref
