"""Hypothesis properties of prepare over odd histories in all three formats, under settings at
their bounds (``tests/odd_histories.py``): the caller's messages untouched to the byte, results
over their cap replaced and groups held to their budget where a spill can shrink them, the same
copy again and from the copy itself, prefixes stable outside batches and after a resume, pairing
kept, and every replaced text read back exactly (by the session and by ``toolbudget read``)."""

from __future__ import annotations

import copy
import json
import re
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from typer.testing import CliRunner

from budget import Budget, BudgetConfig, InputError
from budget._envelope import EMPTY_TEXT
from budget.cli import app
from budget.passes.cap import ENVELOPE_FRAME_CHARS
from tests._lanes import examples
from tests.odd_histories import Message, Odd, Result, anthropic_round, odd_histories, opening

PROPS = settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
_REF = re.compile(r"\b[0-9a-f]{32}\b")
_PARTS = {"anthropic": "text", "openai_chat": "text", "openai_responses": "input_text"}


def dumped(msgs: Any) -> str:
    """The JSON text of ``msgs`` (the standard library's: it writes lone surrogates escaped)."""
    return json.dumps(msgs)


def _text(content: Any, part: str) -> tuple[str, int]:
    """A content's text (its text parts joined by newlines) and its count of other parts."""
    if content is None:
        return "", 0
    if isinstance(content, str):
        return content, 0
    texts = [p["text"] for p in content if p.get("type") == part]
    return "\n".join(texts), len(content) - len(texts)


def results(fmt: str, msgs: list[Message]) -> list[tuple[str, str, str, int]]:
    """Each tool result, in order: (call id, tool, text, other parts), the tool named by the
    latest call of its id (or "" when none came before)."""
    return [r[1:] for r in indexed_results(fmt, msgs)]


def indexed_results(fmt: str, msgs: list[Message]) -> list[tuple[int, str, str, str, int]]:
    """:func:`results`, each with the index of its message first."""
    tools: dict[str, str] = {}
    out: list[tuple[int, str, str, str, int]] = []
    for i, m in enumerate(msgs):
        if fmt == "anthropic" and isinstance(m.get("content"), list):
            for b in m["content"]:
                if b.get("type") == "tool_use":
                    tools[b["id"]] = b["name"]
                elif b.get("type") == "tool_result":
                    cid = b["tool_use_id"]
                    out.append((i, cid, tools.get(cid, ""), *_text(b.get("content"), "text")))
        elif fmt == "openai_chat":
            for c in m.get("tool_calls") or []:
                tools[c["id"]] = c["function"]["name"]
            if m["role"] == "tool":
                cid = m["tool_call_id"]
                out.append((i, cid, tools.get(cid, ""), *_text(m["content"], "text")))
        elif fmt == "openai_responses":
            if m.get("type") in ("function_call", "custom_tool_call"):
                tools[m["call_id"]] = m["name"]
            elif str(m.get("type")).endswith("_output"):
                cid = m["call_id"]
                out.append((i, cid, tools.get(cid, ""), *_text(m["output"], "input_text")))
    return out


def shape(fmt: str, msgs: list[Message]) -> list[Any]:
    """Each message's role or type with the call ids it makes and answers: the pairing."""
    return [
        (m.get("role"), m.get("type"), [(cid, tool) for cid, tool, *_ in results(fmt, [m])])
        for m in msgs
    ] + [json.dumps([m.get("tool_calls"), m.get("call_id")]) for m in msgs]


def assert_recoverable(b: Budget, original: str, shown: str) -> list[str]:
    """A result shown changed names a ref that reads its original back exactly (an empty result is
    shown as ``(no output)``, with no ref); the refs read."""
    if shown == original:
        return []
    if original == "":
        assert shown == EMPTY_TEXT
        return []
    refs = _REF.findall(shown)
    assert refs, shown[:300]
    assert b.read(refs[-1]) == original, (refs, shown[:300])
    # Read in pages of lines, as the read-back tool pages, it comes back whole too.
    lines = original.count("\n") + 1
    step = max(1, lines // 3)
    pages = [b.read(refs[-1], offset=i, limit=step) for i in range(0, lines, step)]
    assert "".join(pages) == original
    return refs[-1:]


def assert_budget_held(
    case: Odd, b: Budget, hist: list[Message], out: list[Message], window: int
) -> None:
    """Results over their cap are replaced, and a group over its budget keeps whole only what a
    spill could not shrink: unless the spill failed (a full store) or the tool is exempt."""
    cfg, fmt = case.cfg, case.fmt
    ids = Counter(cid for cid, *_ in results(fmt, hist))
    # An envelope is its preview and frame (a path makes it longer): a text no longer than that
    # may stay whole, its envelope being no shorter.
    room = cfg.preview_chars + ENVELOPE_FRAME_CHARS * 2
    before, after = results(fmt, hist), results(fmt, out)
    for group in _groups(fmt, hist):
        total, whole = 0, []
        for (cid, tool, text, others), (_, _, now, _) in ((before[p], after[p]) for p in group):
            total += len(now) + others * cfg.image_chars
            cap = cfg.cap_for(tool)
            if now != text or ids[cid] > 1 or cap is None:
                continue  # replaced, or a repeated id (its decision is the first result's)
            decision = b.decision(cid)
            assert decision is not None
            if decision.kind == "kept_unspillable":
                continue
            assert len(text) <= max(cap, room), (cid, tool, len(text), cap)
            whole.append(len(text))
        if total > min(cfg.group_budget, window * 2):
            assert all(n <= room for n in whole), (total, whole)


def _groups(fmt: str, msgs: list[Message]) -> list[list[int]]:
    """The positions (in :func:`results`) of the results of each well-formed round: an assistant
    message's calls (or a run of Responses call items) all answered right after it."""
    by_msg: dict[int, list[int]] = {}
    for pos, (i, *_) in enumerate(indexed_results(fmt, msgs)):
        by_msg.setdefault(i, []).append(pos)
    found = results(fmt, msgs)
    groups = []
    i = 0
    while i < len(msgs):
        made = _made(fmt, msgs[i])
        j = i + 1
        while made and fmt == "openai_responses" and j < len(msgs) and _made(fmt, msgs[j]):
            made += _made(fmt, msgs[j])
            j += 1
        k, answered = j, []
        while made and k < len(msgs) and k in by_msg and not _made(fmt, msgs[k]):
            answered += by_msg[k]
            k += 1
            if fmt == "anthropic":
                break
        if made and sorted(found[p][0] for p in answered) == sorted(made):
            groups.append(answered)
        i = max(k, i + 1)
    return groups


def _made(fmt: str, m: Message) -> list[str]:
    """The call ids ``m`` makes."""
    if fmt == "anthropic":
        content = m.get("content")
        return (
            [b["id"] for b in content if b.get("type") == "tool_use"]
            if isinstance(content, list)
            else []
        )
    if fmt == "openai_chat":
        return [c["id"] for c in m.get("tool_calls") or []]
    return [m["call_id"]] if m.get("type") in ("function_call", "custom_tool_call") else []


def _early_answer(fmt: str, msgs: list[Message]) -> bool:
    """Whether a result in ``msgs`` answers a call no earlier message makes."""
    made: set[str] = set()
    for m in msgs:
        if any(cid not in made for cid, *_ in results(fmt, [m])):
            return True
        made.update(_made(fmt, m))
    return False


def cli_reads(session: Path, refs: set[str], b: Budget) -> None:
    """``toolbudget read`` prints each ref's text exactly as the session reads it."""
    runner = CliRunner()
    for ref in sorted(refs)[:3]:
        got = runner.invoke(app, ["read", str(session), ref])
        assert got.exit_code == 0, got.output
        assert got.stdout_bytes == b.read(ref).encode("utf-8", "surrogatepass")


@PROPS
@given(odd_histories())
def test_odd_histories_keep_every_invariant(case: Odd) -> None:
    """Odd histories in any format under bounded settings, grown request by request: every
    invariant holds at each request, again, from the copy itself, and after a resume."""
    fmt, cfg = case.fmt, case.cfg
    pristine = dumped(case.messages)
    kept = copy.deepcopy(case.messages)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "s"
        b = Budget.open(path, cfg, format=fmt)
        prev: list[Message] | None = None
        last = ""
        refs: set[str] = set()
        hist: list[Message] = []
        for k, n in enumerate(case.cuts):
            hist = case.messages[:n]
            if k == case.restart:
                b.close()  # the next copy is the resumed session's: its prefix as stable
                b = Budget.open(path, cfg, format=fmt)
            if _early_answer(fmt, hist):
                # Refused as the APIs refuse it, and the caller's messages left as they were.
                with pytest.raises(InputError, match="no earlier message makes that call"):
                    b.prepare(hist, now=float(k))
                assert dumped(case.messages) == pristine
                hist = case.messages[: case.cuts[k - 1]] if k else []
                break
            req = b.prepare(hist, now=float(k))
            out = req.messages
            # 1. the caller's messages are untouched, to the byte
            assert dumped(case.messages) == pristine and case.messages == kept
            # 5. pairing: every message makes and answers the calls it did
            assert shape(fmt, out) == shape(fmt, hist)
            # 6. every replaced text reads back exactly; images stay
            for (_, _, text, others), (_, _, now, others_now) in zip(
                results(fmt, hist), results(fmt, out), strict=True
            ):
                assert others_now == others
                refs.update(assert_recoverable(b, text, now))
            # 2. the budget is held where it can be
            assert_budget_held(case, b, hist, out, req.report.window)
            # 4. prefixes stable outside batches
            last = dumped(out)
            if prev is not None and not (req.report.staleness_ran or req.report.compacted):
                assert dumped(out[: len(prev)]) == dumped(prev)
                assert req.report.prefix_stable
            prev = out
            # 3. the same history again, as a new list, gives the same copy
            assert dumped(b.prepare(list(hist), now=float(k)).messages) == last
            assert dumped(case.messages) == pristine
        b.close()
        if not hist:
            return
        with Budget.open(path, cfg, format=fmt) as resumed:
            end = float(len(case.cuts))
            assert dumped(resumed.prepare(copy.deepcopy(hist), now=end).messages) == last
            cli_reads(path, refs, resumed)
            # The copy's own history gives the copy again, but where a batch ran: its envelopes
            # are results of their own there, whose stubs may reclaim what the originals' did
            # not (last: passing a copy back, then the history again, decides each changed
            # result anew, docs/events.md).
            # With include_path a stub naming its body's file is no envelope the session knows
            # as its own: it may be spilled again (edge-cases.md, known limits).
            again = resumed.prepare(json.loads(last), now=end)
            same = dumped(again.messages) == last
            assert same or again.report.staleness_ran or cfg.include_path


def test_a_resumed_session_whose_trim_the_store_refused_reports_its_prefix_stable(
    tmp_path: Path,
) -> None:
    """A trim the store refuses shows the result as before: a resumed session reports the prefix
    stable, as the live one does (found by the odd-history property, under a quota of 1 byte)."""
    cfg = BudgetConfig(
        result_cap=3_000, preview_chars=2_999, stale_floor=0, stub_chars=40, protect_rounds=2,
        protect_turns=None, window=1, quota_bytes=1, fsync=False,
    )  # fmt: skip
    msgs = opening("anthropic")
    for r, text in enumerate(["a\n" * 1_400, "", ""]):
        msgs += anthropic_round(
            [(f"c{r}", "bash")], [Result(f"c{r}", "bash", (text,), "str", False)], ""
        )
    with Budget.open(tmp_path / "resumed", cfg) as b:
        first = b.prepare(msgs[:5], now=0).messages
    went_on = Budget.open(tmp_path / "went_on", cfg)
    assert went_on.prepare(msgs[:5], now=0).messages == first
    with Budget.open(tmp_path / "resumed", cfg) as resumed, went_on:
        for b in (went_on, resumed):
            req = b.prepare(msgs, now=1)
            assert req.report.decisions[0].kind == "kept_unspillable"
            assert dumped(req.messages[: len(first)]) == dumped(first)
            assert req.report.prefix_stable


def test_a_group_counts_an_empty_result_as_the_text_it_shows(tmp_path: Path) -> None:
    """An empty result shows ``(no output)``: a group that fits only without those characters is
    over its budget, and its largest result is spilled (found by the odd-history property)."""
    cfg = BudgetConfig(result_cap=3_000, preview_chars=1, group_budget=6_000, fsync=False)
    calls = [(f"c{j}", "bash") for j in range(3)]
    texts = ["", "a\n" * 1_499 + "a", "b\n" * 1_499 + "b"]  # 0 + 2,999 + 2,999 characters
    res = [
        Result(cid, "bash", (t,), "str", False) for (cid, _), t in zip(calls, texts, strict=True)
    ]
    msgs = opening("anthropic") + anthropic_round(calls, res, "")
    with Budget.open(tmp_path / "s", cfg) as b:
        shown = results("anthropic", b.prepare(msgs, now=0).messages)
    assert shown[0][2] == EMPTY_TEXT
    assert sum(len(text) for _, _, text, _ in shown) <= cfg.group_budget
