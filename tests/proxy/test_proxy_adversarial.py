"""A hostile review of the proxy with real agents' requests: what the SDKs and Claude Code send
(query strings, bodiless requests, server-side conversation state) reaches the upstream framed
and budgeted as the contract says."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import structlog

from budget import Budget
from budget.proxy._keys import session_keys
from tests.proxy._kit import BUDGET, Stack, anthropic_history, library_copies, steady_clock
from tests.strategies import big

_ANTHROPIC = {"x-api-key": "k", "anthropic-version": "2023-06-01"}


def _framing(stack: Stack) -> tuple[str | None, str | None]:
    """The last request's framing headers as the upstream received them."""
    last = stack.upstream.received[-1]
    return last.header("transfer-encoding"), last.header("content-length")


def test_a_request_passed_through_keeps_its_framing(stack: Stack) -> None:
    """A GET or HEAD without a body goes upstream without one (not as an empty chunked body),
    and a POST with a Content-Length keeps it (not turned into a chunked upload)."""
    with httpx.Client(base_url=stack.url, headers=_ANTHROPIC) as client:
        assert client.get("/v1/models?beta=true").status_code == 200
        assert _framing(stack) == (None, None)
        assert client.head("/v1/models").status_code == 200
        assert _framing(stack) == (None, None)
        body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
        answer = client.post("/v1/messages/count_tokens?beta=true", content=body)
        assert answer.status_code == 200
        assert _framing(stack) == (None, str(len(body)))
        assert stack.upstream.received[-1].body == body

        def chunks() -> Any:
            yield body[:10]
            yield body[10:]

        # A body the agent itself sent chunked goes on chunked: its length is not known ahead.
        client.post("/v1/messages/count_tokens", content=chunks())
        assert _framing(stack) == ("chunked", None)
        assert stack.upstream.received[-1].body == body


def _passthroughs(events: list[Any]) -> list[Any]:
    return [e["reason"] for e in events if e["event"] == "toolbudget.proxy.passthrough"]


def test_a_responses_request_in_a_stored_conversation_is_passed_through(stack: Stack) -> None:
    """A Responses request naming a ``conversation`` carries only its new items (the rest is
    stored upstream, as with ``previous_response_id``): it goes upstream as sent, with its own
    passthrough reason, and opens no session for what is not the conversation's start."""
    import openai

    client = openai.OpenAI(base_url=f"{stack.url}/v1", api_key="sk-test", max_retries=0)
    turns: list[Any] = [
        [{"role": "user", "content": "List it."}],
        [{"type": "function_call_output", "call_id": "f1", "output": big(150, "conv")}],
    ]
    with structlog.testing.capture_logs() as events:
        for items in turns:
            done = client.responses.create(model="gpt-5", conversation="conv_1", input=items)
            assert done.output_text == "ok"
    assert [sent["input"] for sent in stack.sent("/v1/responses")] == turns
    assert _passthroughs(events) == ["conversation", "conversation"]
    assert not stack.root.exists() or not any(stack.root.iterdir())


def _same_start(tag: str, rounds: int) -> list[Any]:
    """A conversation opening as every run of one task does (the same first message), then
    going its own way: its own calls, its own outputs."""
    history: list[Any] = [{"role": "user", "content": "Fix the failing test."}]
    for i in range(rounds):
        call = {"type": "tool_use", "id": f"{tag}{i}", "name": "Bash", "input": {"command": tag}}
        out = {"type": "tool_result", "tool_use_id": f"{tag}{i}", "content": big(150 + 40 * i, tag)}
        history += [{"role": "assistant", "content": [call]}, {"role": "user", "content": [out]}]
    return history


def _copies(root: Path, tags: str, rounds: int) -> dict[str, list[Any]]:
    """Each conversation's request copies when ``tags``' conversations run side by side, a
    round each in turn, through one proxy (paths in envelopes made root-free)."""
    with Stack(root, usage_for=lambda _api, _body: None, clock=steady_clock(step=0.0)) as stack:
        for i in range(1, rounds + 1):
            for tag in tags:
                body = orjson.dumps({"model": "m", "messages": _same_start(tag, i)})
                httpx.post(f"{stack.url}/v1/messages", content=body, headers=_ANTHROPIC)
        sent = [
            b.replace(str(root).encode(), b"ROOT") for b in stack.upstream.bodies("/v1/messages")
        ]
    return {
        tag: [orjson.loads(b)["messages"] for b in sent[k :: len(tags)]]
        for k, tag in enumerate(tags)
    }


def test_two_runs_of_one_task_side_by_side_are_budgeted_as_each_alone(tmp_path: Path) -> None:
    """Two runs of one task (pass@k: the same first message, then each its own calls) through
    one proxy get the copies each gets alone: each forks its own session at its first answer
    (keyed by the conversation's start alone they shared one, and one run's staleness trims
    came at other rounds or never)."""
    rounds = 16
    alone = _copies(tmp_path / "a", "a", rounds)["a"] + _copies(tmp_path / "b", "b", rounds)["b"]
    both = _copies(tmp_path / "ab", "ab", rounds)
    assert both["a"] + both["b"] == alone


def _sized_usage(_api: str, body: Any) -> dict[str, int]:
    """A usage growing with the request, as answers report one."""
    return {"input_tokens": len(orjson.dumps(body)) // 3, "output_tokens": 5}


async def _side_by_side(url: str, tags: str, rounds: int) -> None:
    """Each round, every run's request at once (the first round: one request, sent by all)."""
    async with httpx.AsyncClient(timeout=60) as client:
        for i in range(rounds):
            sent = [
                client.post(
                    f"{url}/v1/messages",
                    content=orjson.dumps({"model": "m", "messages": _same_start(tag, i)}),
                    headers=_ANTHROPIC,
                )
                for tag in tags
            ]
            for answer in await asyncio.gather(*sent):
                assert answer.status_code == 200


def test_runs_whose_requests_arrive_at_once_each_fork_their_own_session(tmp_path: Path) -> None:
    """Six runs of one task whose requests arrive together (their second ones forking from one
    start session at once): each run's copies are those it gets alone, the start's session and
    each run's stay sound sessions, one directory each."""
    tags, rounds = "abcdef", 6
    budget = {**BUDGET, "include_path": False}  # the copies then name no directory

    def copies(root: Path, run: str) -> dict[str, list[Any]]:
        with Stack(root, usage_for=_sized_usage, clock=steady_clock(step=0.0), budget=budget) as s:
            asyncio.run(_side_by_side(s.url, run, rounds))
            got: dict[str, list[Any]] = {"": [], **{tag: [] for tag in run}}
            for body in s.sent("/v1/messages"):
                calls = [m for m in body["messages"] if m["role"] == "assistant"]
                got[calls[0]["content"][0]["input"]["command"] if calls else ""].append(body)
        return got

    together = copies(tmp_path / "all", tags)
    for tag in tags:
        alone = copies(tmp_path / tag, tag)
        assert together[""] == alone[""] * len(tags)  # the first requests, all alike
        assert together[tag] == alone[tag], tag
    assert b"[toolbudget]" in orjson.dumps(together)
    names = sorted(p.name for p in (tmp_path / "all").iterdir())
    assert len(names) == 1 + len(tags)
    for name in names:
        with Budget.open(tmp_path / "all" / name, budget, format="anthropic") as session:
            session.prepare(_same_start("a", 0))  # each resumes from its log


def test_a_conversation_keyed_by_its_start_alone_goes_on_forked_with_identical_copies(
    tmp_path: Path,
) -> None:
    """A conversation under way when the proxy is upgraded (its whole state in the session of
    its start, as proxies keying by the start alone kept it) goes on forked from that one: every
    copy, before and after, is one library session's."""
    budget = {**BUDGET, "include_path": False, "model": "claude-sonnet-4-5", "window": 1_500}
    history = anthropic_history(10, lines=300)
    steps = [history[:1], *(history[:upto] for upto in range(3, len(history) + 1, 2))]
    expected = library_copies(tmp_path / "library", steps, fmt="anthropic", budget=budget)
    root = tmp_path / "sessions"
    start = session_keys("anthropic", {}, {}, steps[0]).key
    clock = steady_clock()
    before = library_copies(root / start, steps[:6], fmt="anthropic", budget=budget, clock=clock)
    with Stack(root, usage_for=lambda _api, _body: None, clock=clock, budget=budget) as stack:
        for step in steps[6:]:
            body = orjson.dumps({"model": "claude-sonnet-4-5", "messages": step})
            httpx.post(f"{stack.url}/v1/messages", content=body, headers=_ANTHROPIC)
        after = [sent["messages"] for sent in stack.sent("/v1/messages")]
    assert before + after == expected
    assert "Old output" in orjson.dumps(after[-1]).decode()  # decisions made before the upgrade
    own = session_keys("anthropic", {}, {}, history)
    assert own.parent == start
    assert sorted(p.name for p in root.iterdir()) == sorted([start, own.key])


def test_gc_collects_idle_start_sessions_their_forks_and_a_half_made_fork(tmp_path: Path) -> None:
    """Once idle, ``gc`` removes a start's session, the runs forked from it, and a fork a killed
    proxy left half copied (its lock and ``session.json`` are copied first)."""
    from spill import gc_sessions

    root = tmp_path / "ab"
    with Stack(root, usage_for=_sized_usage) as stack:
        asyncio.run(_side_by_side(stack.url, "ab", 2))
    names = sorted(p.name for p in root.iterdir())
    assert len(names) == 3
    half = root / f".fork-0123456789abcdef-{names[0]}"
    half.mkdir()
    for name in ("lock", "session.json"):
        (half / name).write_bytes((root / names[0] / name).read_bytes())
    removed = gc_sessions(root, older_than_s=0, now=time.time() + 60)
    assert sorted(p.name for p in removed) == sorted([*names, half.name])
    assert not any(root.iterdir())
