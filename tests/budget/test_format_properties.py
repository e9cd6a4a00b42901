"""Hypothesis properties of prepare over OpenAI Responses and Chat conversations grown request by
request: input untouched, pairing and order kept, prefixes stable outside batches, the same copy
again and after a resume, every replaced text read back exactly, shell outputs' chunks kept."""

from __future__ import annotations

import copy
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import Budget, BudgetConfig
from budget.formats.openai_responses import CALL_TYPES, OUTPUT_TYPES
from spill import ref_for
from tests._lanes import examples
from tests.conversations import CONFIG
from tests.strategies import (
    SMALL,
    chat_conversations,
    responses_conversations,
    responses_text,
    text_of,
)

Item = dict[str, Any]

PROPS = settings(
    max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
GAPS = st.lists(st.sampled_from([1.0, 30.0, 400.0]), min_size=40, max_size=40)
"""Seconds between requests: warm, lukewarm, past the cache TTL (a cold cache: a batch may run)."""
USAGES = st.lists(st.booleans(), min_size=40, max_size=40)
"""Whether each request passes the previous response's usage (a cached prompt)."""
CONFIGS = st.sampled_from(
    [
        SMALL,
        BudgetConfig(
            **SMALL.model_dump(exclude={"tools", "preview_shape"}),
            preview_shape="head_tail",
            tools={
                "grep": {"cap": 300, "preview": "head"},
                "read": {"exempt": True},
                "shell": {"cap": 3_000},
            },
        ),
        CONFIG.model_copy(update={"fsync": False}),
    ]
)
"""The session's settings: small caps, per-tool policies (an exempt tool), the replay's caps."""
RESTARTS = st.integers(0, 12)
"""The request before which the twin session is closed and resumed."""


# -- OpenAI Responses ---------------------------------------------------------------------------


def r_call_id(item: Item) -> str | None:
    """The call id a call or output item names (a local shell item's ``call_id``, else ``id``)."""
    kind = item.get("type")
    if kind in ("local_shell_call", "local_shell_call_output"):
        return str(item.get("call_id") or item["id"])
    if kind in CALL_TYPES or kind in OUTPUT_TYPES or kind == "shell_call_output":
        return str(item["call_id"])
    return None


def r_is_result(item: Item) -> bool:
    """Whether the item holds a tool result (a shell output with no chunk holds none)."""
    kind = item.get("type")
    return kind in OUTPUT_TYPES or (kind == "shell_call_output" and bool(item["output"]))


def r_calls(item: Item) -> list[str]:
    """The call ids a call item makes (none for any other item)."""
    return [r_call_id(item) or ""] if item.get("type") in CALL_TYPES else []


def r_answers(item: Item) -> str | None:
    """The call id an output item answers (None for any other item)."""
    kind = item.get("type")
    return r_call_id(item) if kind in OUTPUT_TYPES or kind == "shell_call_output" else None


def r_kept_around(orig: Item, sent: Item) -> None:
    """A sent output keeps every field but its output; a shell output keeps its chunk count, each
    chunk's outcome, and shows its text in the first chunk's stdout, the other streams emptied."""
    assert {k: v for k, v in sent.items() if k != "output"} == {
        k: v for k, v in orig.items() if k != "output"
    }
    if orig["type"] != "shell_call_output":
        return
    before, after = orig["output"], sent["output"]
    assert len(after) == len(before)
    assert [c["outcome"] for c in after] == [c["outcome"] for c in before]
    if after != before:
        streams = [s for c in after for s in (c["stdout"], c["stderr"])]
        assert all(s == "" for s in streams[1:])
        assert responses_text(sent) == after[0]["stdout"]


def r_usage(prompt: int) -> dict[str, Any]:
    """A Responses usage of ``prompt`` input tokens, most of them read from the cache."""
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": prompt * 9 // 10},
        "output_tokens": 40,
        "total_tokens": prompt + 40,
    }


# -- OpenAI Chat Completions --------------------------------------------------------------------


def c_calls(m: Item) -> list[str]:
    """The call ids an assistant message makes."""
    return [c["id"] for c in m.get("tool_calls") or []]


def c_answers(m: Item) -> str | None:
    """The call id a tool message answers."""
    return m["tool_call_id"] if m["role"] == "tool" else None


def c_text(m: Item) -> str:
    """A tool message's text: its string, or its text parts joined by newlines."""
    return text_of(m["content"])


def c_kept_around(orig: Item, sent: Item) -> None:
    """A sent tool message keeps every field but its content, and its content's type."""
    assert {k: v for k, v in sent.items() if k != "content"} == {
        k: v for k, v in orig.items() if k != "content"
    }
    assert type(sent["content"]) is type(orig["content"])


def c_usage(prompt: int) -> dict[str, Any]:
    """A Chat Completions usage of ``prompt`` prompt tokens, most of them read from the cache."""
    return {
        "prompt_tokens": prompt,
        "prompt_tokens_details": {"cached_tokens": prompt * 9 // 10},
        "completion_tokens": 40,
        "total_tokens": prompt + 40,
    }


# -- the properties, for either format ----------------------------------------------------------


class Spec:
    """How the properties read one format's items."""

    def __init__(
        self,
        name: str,
        calls: Callable[[Item], list[str]],
        answers: Callable[[Item], str | None],
        is_result: Callable[[Item], bool],
        text: Callable[[Item], str],
        kept_around: Callable[[Item, Item], None],
        usage: Callable[[int], dict[str, Any]],
    ) -> None:
        self.name, self.calls, self.answers, self.is_result = name, calls, answers, is_result
        self.text, self.kept_around, self.usage = text, kept_around, usage

    def shape(self, items: list[Item]) -> list[Any]:
        """Each item's type, role, the call ids it makes and the one it answers, in order."""
        return [(i.get("type"), i.get("role"), self.calls(i), self.answers(i)) for i in items]

    def cuts(self, items: list[Item]) -> list[int]:
        """History lengths at which a request is made: after the outputs of a turn's calls (all of
        them answered) or a user turn."""
        return [
            n
            for n in range(3, len(items) + 1)
            if (self.answers(items[n - 1]) is not None or items[n - 1].get("role") == "user")
            and (n == len(items) or self.answers(items[n]) is None)
            and self.all_answered(items[:n])
        ]

    def all_answered(self, items: list[Item]) -> bool:
        """Whether every call made in ``items`` is answered there."""
        made = {c for i in items for c in self.calls(i)}
        return made == {a for i in items if (a := self.answers(i)) is not None}


RESPONSES = Spec(
    "openai_responses", r_calls, r_answers, r_is_result, responses_text, r_kept_around, r_usage
)
CHAT = Spec(
    "openai_chat", c_calls, c_answers, lambda m: m["role"] == "tool", c_text, c_kept_around, c_usage
)


def paired(spec: Spec, items: list[Item]) -> bool:
    """Whether every call is answered exactly once, after it, and every answer follows its call."""
    made: set[str] = set()
    answered: list[str] = []
    for item in items:
        made.update(spec.calls(item))
        a = spec.answers(item)
        if a is not None:
            if a not in made:
                return False
            answered.append(a)
    return sorted(answered) == sorted(made)


def assert_recoverable(b: Budget, spec: Spec, orig: Item, sent: Item) -> None:
    """A result shown changed was decided, names its ref, and the ref reads the original back
    exactly (an empty one is shown as ``(no output)``, with no ref)."""
    original, shown = spec.text(orig), spec.text(sent)
    if shown == original:
        return
    call_id = spec.answers(orig)
    assert call_id is not None
    dec = b.decision(call_id)
    assert dec is not None, (call_id, shown[:200])
    if dec.ref is None:
        assert original == "" and shown == "(no output)"
        return
    assert dec.ref in shown
    assert b.read(dec.ref) == original


def grow(
    spec: Spec,
    cfg: BudgetConfig,
    items: list[Item],
    gaps: list[float],
    usages: list[bool],
    restart: int,
) -> None:
    """Prepare ``items`` request by request, checking every property at each, in a session that
    goes on and in one closed and resumed before request ``restart`` (and after the last)."""
    pristine = copy.deepcopy(items)
    with tempfile.TemporaryDirectory() as d:
        b = Budget.open(Path(d) / "s", cfg)
        twin = Budget.open(Path(d) / "t", cfg)
        prev: list[Any] | None = None
        last: bytes = b""
        hist: list[Item] = []
        now = 0.0
        tokens = 0
        for k, (n, gap, use) in enumerate(zip(spec.cuts(items), gaps, usages, strict=False)):
            now += gap
            hist = items[:n]
            usage = spec.usage(tokens) if use and tokens else None
            req = b.prepare(hist, now=now, usage=usage)
            out = req.messages
            tokens = req.report.tokens_after
            # 1. the input is untouched
            assert items == pristine
            assert req.report.format == spec.name
            # 2. order, count and pairing kept; every item but a result is the caller's own
            assert spec.shape(out) == spec.shape(hist)
            assert paired(spec, out)
            for orig, sent in zip(hist, out, strict=True):
                if not spec.is_result(orig):
                    assert sent is orig
                    continue
                spec.kept_around(orig, sent)
                # 5. every replaced text reads back exactly
                assert_recoverable(b, spec, orig, sent)
            # 3. the prefix is stable outside staleness batches and compactions
            last = orjson.dumps(out)
            if prev is not None:
                same = orjson.dumps(out[: len(prev)]) == orjson.dumps(prev)
                batch = req.report.staleness_ran or req.report.compacted
                assert same or batch
                assert same == req.report.prefix_stable or batch
            prev = out
            # 4. the same history again, as a new list, gives the same bytes; so does a session
            # resumed on the way
            assert orjson.dumps(b.prepare(list(hist), now=now).messages) == last
            if k == restart:
                twin.close()
                twin = Budget.open(Path(d) / "t", cfg)
            twin_out = twin.prepare(copy.deepcopy(hist), now=now, usage=usage).messages
            assert orjson.dumps(twin_out) == last, k
            twin.prepare(hist, now=now)
            assert items == pristine
        b.close()
        twin.close()
        if not hist:
            return
        with Budget.open(Path(d) / "s", cfg) as resumed:
            assert orjson.dumps(resumed.prepare(copy.deepcopy(hist), now=now).messages) == last


@PROPS
@given(responses_conversations(), CONFIGS, GAPS, USAGES, RESTARTS)
def test_responses_invariants_hold_request_after_request(
    items: list[Item], cfg: BudgetConfig, gaps: list[float], usages: list[bool], restart: int
) -> None:
    """Responses: input untouched, pairing kept, prefixes stable, same copy again and resumed,
    replaced texts read back, shell outputs' chunks and outcomes kept."""
    grow(RESPONSES, cfg, items, gaps, usages, restart)


@PROPS
@given(chat_conversations(), CONFIGS, GAPS, USAGES, RESTARTS)
def test_chat_invariants_hold_request_after_request(
    items: list[Item], cfg: BudgetConfig, gaps: list[float], usages: list[bool], restart: int
) -> None:
    """Chat Completions: input untouched, pairing kept, prefixes stable, same copy again and
    resumed, replaced texts read back."""
    grow(CHAT, cfg, items, gaps, usages, restart)


def _pair(cid: str, output: str, arguments: str = "{}") -> list[Item]:
    """A bash function call and its output."""
    return [
        {"type": "function_call", "call_id": cid, "name": "bash", "arguments": arguments},
        {"type": "function_call_output", "call_id": cid, "output": output},
    ]


def test_a_session_resumed_after_a_cold_batch_trims_as_one_that_went_on(tmp_path: Path) -> None:
    """Resumed after a cold-cache batch, a session gives the copies of one that went on (found by
    the Responses property's twin session)."""
    stdout, stderr = "0" * 603, "Traceback\n" * 40
    shell = {"stdout": stdout, "stderr": stderr, "outcome": {"type": "exit", "exit_code": 0}}
    # Calls naming the ref of the shell output, which its tool's cap keeps (read-back evidence).
    reads = json.dumps({"ref": ref_for(stdout + "\n" + stderr)})
    items: list[Item] = [
        {"role": "developer", "content": "Be brief."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Go."}]},
        *_pair("c0", ""),
        {"type": "shell_call", "call_id": "c1", "action": {"commands": ["bash"]}},
        {"type": "shell_call_output", "call_id": "c1", "output": [shell]},
        *_pair("c2", "x" * 934, reads),
        *_pair("c3", "x" * 934, reads),
        *_pair("c4", ""),
        *_pair("c5", ""),
        *_pair("c6", ""),
        {"type": "local_shell_call", "id": "c7", "action": {"type": "exec", "command": ["bash"]}},
        {"type": "local_shell_call_output", "id": "c7", "output": ""},
        {"type": "local_shell_call", "id": "c8", "action": {"type": "exec", "command": ["bash"]}},
        {"type": "local_shell_call_output", "id": "c8", "output": "0" * 462},
        *_pair("c9", ""),
        *_pair("c10", ""),
    ]
    cfg = BudgetConfig(**SMALL.model_dump(exclude={"tools"}), tools={"shell": {"cap": 3_000}})
    went_on, resumed = Budget.open(tmp_path / "a", cfg), Budget.open(tmp_path / "b", cfg)
    now = 0.0
    for k, n in enumerate(range(4, len(items) + 1, 2)):
        now += 400.0 if k == 7 else 1.0
        if k == 8:
            resumed.close()
            resumed = Budget.open(tmp_path / "b", cfg)
        a = went_on.prepare(items[:n], now=now)
        b = resumed.prepare(items[:n], now=now)
        went_on.prepare(items[:n], now=now)  # each request retried once
        resumed.prepare(items[:n], now=now)
        assert (k, b.report.staleness_reason) == (k, a.report.staleness_reason)
        assert b.messages == a.messages, k
    went_on.close()
    resumed.close()
