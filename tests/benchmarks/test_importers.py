"""Trace importers: the public recorded traces and small hand-made files of every format."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.importers import FORMATS, detect, load_dir, load_file
from benchmarks.trace import Request, Trace, Usage
from budget._errors import FormatError, InputError
from tests._shared import SharedTraces

# Per file: (owner__repo directory, file name, traces, requests, tool results, requests with usage).
# Checked against ../shared/traces/README.md:
# - claude-code: requests are the distinct message.id values (568 in all, as the README says);
#   tool results equal the README's "tool calls" per file (625 in all).
# - mini-swe-agent: requests equal the README's steps (974). Tool results are fewer than the
#   README's 974 "observations" by 57: the final submit output is never sent to the model (10),
#   and an answer without exactly one bash block is not executed, so the agent's "Please always
#   provide EXACTLY ONE action" reply is a plain user message, not a tool result (47).
# - openhands: 126 tool results against the README's 128 observations: the 2 validation errors
#   without a cause have no call to answer and are sent as user messages, as OpenHands does.
#   basic_gui_mode's last request (a text answer) has no usage: that export carries no metrics.
# - codex-cli: 66 requests, one per token_count event; 99 function + 3 custom tool outputs.
# - gemini-cli: 11 requests (one per gemini message, each with tokens) and 10 tool results.
PINNED: list[tuple[str, str, int, int, int, int]] = [
    (
        "handgemacht-ai__claude-code-log",
        "7acd37a8-2745-4b58-a8a9-46164b22ad9e.jsonl",
        1,
        36,
        71,
        36,
    ),
    (
        "handgemacht-ai__claude-code-log",
        "07f2e15c-a38b-454b-9148-60edc06de401.jsonl",
        1,
        20,
        20,
        20,
    ),
    (
        "handgemacht-ai__claude-code-log",
        "12a546d1-83a7-49a6-abba-5400db340b43.jsonl",
        1,
        36,
        35,
        36,
    ),
    (
        "handgemacht-ai__claude-code-log",
        "37f83ec9-f2ea-42a9-925e-0d5c105cb6e8.jsonl",
        1,
        105,
        101,
        105,
    ),
    (
        "handgemacht-ai__claude-code-log",
        "fe869ecb-c176-478f-9734-7e4b8ef12cff.jsonl",
        1,
        34,
        32,
        34,
    ),
    ("handgemacht-ai__claude-code-log", "agent-668b5ac2.jsonl", 1, 5, 7, 5),
    ("handgemacht-ai__claude-code-log", "agent-9fa17969.jsonl", 1, 6, 5, 6),
    ("handgemacht-ai__claude-code-log", "agent-ea02459f.jsonl", 1, 5, 14, 5),
    (
        "handgemacht-ai__claude-code-log",
        "cb2e607c-c758-415a-8b45-c49e4631906a.jsonl",
        1,
        80,
        76,
        80,
    ),
    (
        "handgemacht-ai__claude-code-log",
        "9e953218-585f-4692-89df-9e0747a31c68.jsonl",
        1,
        101,
        92,
        101,
    ),
    (
        "handgemacht-ai__claude-code-log",
        "ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl",
        1,
        17,
        40,
        17,
    ),
    ("handgemacht-ai__claude-code-log", "agent-a4ca7529859c158c2.jsonl", 1, 20, 24, 20),
    (
        "handgemacht-ai__claude-code-log",
        "a7da6a22-facc-4fcd-8bab-f83c87862004.jsonl",
        1,
        103,
        108,
        103,
    ),
    (
        "codemie-ai__codemie-code",
        "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl",
        1,
        66,
        102,
        66,
    ),
    ("codemie-ai__codemie-code", "session-2025-12-01T21-45-5b959dae.json", 1, 11, 10, 11),
    ("gruckion__mini-swe-agent", "astropy__astropy-14369.traj.json", 1, 26, 23, 26),
    ("gruckion__mini-swe-agent", "django__django-11138.traj.json", 1, 115, 99, 115),
    ("gruckion__mini-swe-agent", "django__django-15957.traj.json", 1, 49, 48, 49),
    ("gruckion__mini-swe-agent", "django__django-16560.traj.json", 1, 145, 144, 145),
    ("gruckion__mini-swe-agent", "psf__requests-1142.traj.json", 1, 71, 68, 71),
    ("gruckion__mini-swe-agent", "pylint-dev__pylint-6528.traj.json", 1, 97, 94, 97),
    ("gruckion__mini-swe-agent", "pytest-dev__pytest-6197.traj.json", 1, 92, 90, 92),
    ("gruckion__mini-swe-agent", "sphinx-doc__sphinx-9229.traj.json", 1, 142, 131, 142),
    ("gruckion__mini-swe-agent", "sphinx-doc__sphinx-9258.traj.json", 1, 108, 97, 108),
    ("gruckion__mini-swe-agent", "sympy__sympy-13091.traj.json", 1, 129, 123, 129),
    ("All-Hands-AI__OpenHands", "output.jsonl", 3, 105, 103, 105),
    ("All-Hands-AI__OpenHands", "basic_gui_mode.json", 1, 5, 4, 4),
    ("nunu0404__Python_OpenHands", "output.jsonl", 1, 20, 19, 20),
]

# Per format: traces, requests, tool results, longest tool result (characters).
FORMAT_TOTALS = {
    "claude-code": (13, 568, 625, 58_050),
    "codex-cli": (1, 66, 102, 40_157),
    "gemini-cli": (1, 11, 10, 13_912),
    "mini-swe-agent": (10, 974, 917, 41_623),  # README: 41,623 excluding the final submit
    # Recorded in full (915,640 characters), sent cut to max_message_chars: 15,000 + 47 + 15,000.
    "openhands": (5, 130, 126, 30_047),
}


@pytest.fixture
def loaded(shared_trace_set: SharedTraces) -> SharedTraces:
    """Every shared trace (loaded once a worker)."""
    return shared_trace_set


def _results(trace: Trace) -> Iterator[dict[str, Any]]:
    for message in trace.messages:
        for block in message["content"]:
            if block["type"] == "tool_result":
                yield block


def _result_chars(block: dict[str, Any]) -> int:
    return sum(len(part.get("text", "")) for part in block["content"])


def _pairing_problems(trace: Trace) -> list[str]:
    """Every way the trace breaks tool pairing (empty when every result follows its call)."""
    problems: list[str] = []
    owner: dict[str, int] = {}
    answered: set[str] = set()
    for i, message in enumerate(trace.messages):
        if message["role"] not in ("user", "assistant"):
            problems.append(f"message {i} has role {message['role']!r}")
        for block in message["content"]:
            if block["type"] == "tool_use":
                if message["role"] != "assistant":
                    problems.append(f"tool_use in a {message['role']} message {i}")
                if block["id"] in owner:
                    problems.append(f"duplicate tool_use id {block['id']}")
                owner[block["id"]] = i
            elif block["type"] == "tool_result":
                at = owner.get(block["tool_use_id"])
                if at is None:
                    problems.append(f"orphan result {block['tool_use_id']} in message {i}")
                elif any(m["role"] != "user" for m in trace.messages[at + 1 : i]):
                    problems.append(f"result {block['tool_use_id']} not right after its call")
                if block["tool_use_id"] in answered:
                    problems.append(f"second result for {block['tool_use_id']}")
                answered.add(block["tool_use_id"])
                if message["role"] != "user":
                    problems.append(f"tool_result in an assistant message {i}")
    return problems


def test_every_shared_file_imports(shared_traces: Path, loaded: SharedTraces) -> None:
    """Every trace file in the public set loads, none is skipped, and each gives a trace."""
    traces, skipped = loaded
    assert skipped == ()
    files = {
        p.relative_to(shared_traces).as_posix()
        for p in shared_traces.rglob("*")
        if p.is_file() and p.name != "README.md" and not p.name.endswith(".meta.json")
    }
    assert {t.path for t in traces} == files
    assert len(files) == 28


@pytest.mark.parametrize(("repo", "name", "n_traces", "n_requests", "n_results", "n_usage"), PINNED)
def test_pinned_counts_per_file(
    loaded: SharedTraces,
    repo: str,
    name: str,
    n_traces: int,
    n_requests: int,
    n_results: int,
    n_usage: int,
) -> None:
    """Each shared file gives the traces, requests, tool results and usages computed once."""
    traces = [t for t in loaded[0] if Path(t.path).name == name and Path(t.path).parts[1] == repo]
    assert len(traces) == n_traces
    assert sum(len(t.requests) for t in traces) == n_requests
    assert sum(1 for t in traces for _ in _results(t)) == n_results
    assert sum(r.usage is not None for t in traces for r in t.requests) == n_usage


def test_format_totals(loaded: SharedTraces) -> None:
    """Per format, the totals and the longest tool result match the README's figures."""
    totals: dict[str, list[int]] = {}
    for trace in loaded[0]:
        row = totals.setdefault(trace.format, [0, 0, 0, 0])
        row[0] += 1
        row[1] += len(trace.requests)
        for block in _results(trace):
            row[2] += 1
            row[3] = max(row[3], _result_chars(block))
    assert {k: tuple(v) for k, v in totals.items()} == FORMAT_TOTALS


def test_pairing_invariant_on_shared_traces(loaded: SharedTraces) -> None:
    """Every tool result follows the assistant message holding its call; ids are unique."""
    for trace in loaded[0]:
        assert _pairing_problems(trace) == [], trace.name


def test_requests_are_growing_prefixes(loaded: SharedTraces) -> None:
    """Request prefixes never shrink, fit the messages, and each ends before an assistant turn."""
    for trace in loaded[0]:
        sizes = [r.n_messages for r in trace.requests]
        assert sizes == sorted(sizes), trace.name
        assert sizes[0] > 0, trace.name
        assert sizes[-1] <= len(trace.messages), trace.name
        for n in sizes:
            assert trace.messages[n - 1]["role"] == "user", trace.name
            if n < len(trace.messages):
                assert trace.messages[n]["role"] == "assistant", trace.name


def test_shared_traces_have_plausible_usage_and_times(
    loaded: SharedTraces,
) -> None:
    """Recorded usage grows with the history and every request has an epoch timestamp."""
    first_2024, end_2026 = 1_704_067_200, 1_798_761_600
    for trace in loaded[0]:
        for request in trace.requests:
            assert request.timestamp is not None, trace.name
            assert first_2024 <= request.timestamp < end_2026, trace.name
        prompts = [r.usage.prompt_tokens for r in trace.requests if r.usage]
        assert all(p > 0 for p in prompts), trace.name
        assert prompts[-1] > prompts[0], trace.name


def test_trace_identity(loaded: SharedTraces) -> None:
    """Names are unique, traces are sorted by path then name, and providers follow the format."""
    traces = loaded[0]
    assert len({t.name for t in traces}) == len(traces)
    assert list(traces) == sorted(traces, key=lambda t: (t.path, t.name))
    providers = {(t.format, t.provider) for t in traces}
    assert providers == {
        ("claude-code", "anthropic"),
        ("codex-cli", "openai"),
        ("gemini-cli", "google"),
        ("mini-swe-agent", "openai"),
        ("openhands", "openai"),
        ("openhands", "anthropic"),  # basic_gui_mode ran Claude 3.5 Sonnet with cache writes
    }
    names = {t.name for t in traces}
    assert {"claude-code/37f83ec9", "claude-code/agent-a4ca7529", "codex-cli/019e1625"} <= names


def test_detect_on_shared_traces(shared_traces: Path) -> None:
    """Each shared file is recognized as the format of its top-level directory."""
    for path in shared_traces.rglob("*"):
        if path.is_file() and path.name != "README.md" and not path.name.endswith(".meta.json"):
            assert detect(path) == path.relative_to(shared_traces).parts[0], path.name


def test_shared_details(loaded: SharedTraces) -> None:
    """System prompts, metadata and canonical blocks come through as each format records them."""
    by_name = {t.name: t for t in loaded[0]}
    codex = by_name["codex-cli/019e1625"]
    assert codex.system.startswith("You are Codex")
    assert codex.model == "gpt-5.5"
    assert codex.requests[0].usage == Usage(18703, 0, 0, 167)
    mini = by_name["mini-swe-agent/astropy__astropy-14369"]
    assert mini.system.startswith("You are a helpful assistant")
    assert mini.meta["dropped_final_output"] is True
    assert "diff --git" not in json.dumps(mini.messages[-1])
    call = mini.messages[1]["content"][-1]
    assert call == {
        "type": "tool_use",
        "id": "call_1",
        "name": "bash",
        "input": {"command": "ls -R"},
    }
    gpt5 = by_name["openhands/alibaba__fastjson2-2775"]
    assert gpt5.meta["max_message_chars"] == 30000
    assert gpt5.meta["import_notes"]["results_truncated_to_max_message_chars"] == 2
    agent = by_name["claude-code/agent-a4ca7529"]
    assert agent.meta["agent"]["agentType"] == "general-purpose"
    for trace in loaded[0]:
        for message in trace.messages:
            assert message["content"], trace.name
            for block in message["content"]:
                assert block["type"] in ("text", "tool_use", "tool_result", "image"), trace.name
                if block["type"] == "tool_result":
                    assert all(p["type"] in ("text", "image") for p in block["content"])


# -- hand-made files --------------------------------------------------------------------------


def _write(path: Path, doc: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _write_lines(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def _cc(
    kind: str, uuid: str, parent: str | None, content: Any = None, **extra: Any
) -> dict[str, Any]:
    line: dict[str, Any] = {
        "type": kind,
        "uuid": uuid,
        "parentUuid": parent,
        "isSidechain": False,
        "sessionId": "5e55e55e-0000-0000-0000-000000000000",
        "timestamp": "2025-07-01T10:00:00.000Z",
    }
    if kind in ("user", "assistant"):
        line["message"] = {"role": kind, "content": content}
    line.update(extra)
    return line


def _reply(
    uuid: str, parent: str, mid: str, content: list[dict[str, Any]], out: int = 1
) -> dict[str, Any]:
    line = _cc("assistant", uuid, parent, content)
    line["message"].update(
        id=mid,
        model="claude-sonnet-4-5",
        usage={
            "input_tokens": 3,
            "cache_read_input_tokens": 50,
            "cache_creation_input_tokens": 20,
            "output_tokens": out,
        },
    )
    return line


def _use(call: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call, "name": "Bash", "input": {"command": call}}


def _result(call: str, text: str = "ok") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call, "content": text}


def test_claude_code_handmade_session(tmp_path: Path) -> None:
    """Split lines merge, bookkeeping and side data drop, and a compaction starts a new trace."""
    path = _write_lines(
        tmp_path / "5e55e55e-0000-0000-0000-000000000000.jsonl",
        [
            {"type": "summary", "summary": "a title", "leafUuid": "u9"},
            _cc("user", "u1", None, "fix the bug"),
            _reply("u2", "u1", "msg_1", [{"type": "thinking", "thinking": "hm", "signature": "s"}]),
            _reply("u3", "u2", "msg_1", [{"type": "text", "text": "Looking."}]),
            _reply("u4", "u3", "msg_1", [_use("t1")], out=42),
            _cc("user", "u5", "u4", [_result("t1", "a\nb")], toolUseResult={"stdout": "RAW"}),
            _cc("user", "s1", "u5", "subagent prompt", isSidechain=True),
            _cc("system", "u6", "u5", subtype="turn_duration", content="x"),
            _cc("attachment", "u7", "u6"),
            _cc("system", "c1", None, subtype="compact_boundary", logicalParentUuid="u7"),
            _cc("user", "u8", "c1", "Summary of earlier work", isCompactSummary=True),
            _reply("u9", "u8", "msg_2", [{"type": "text", "text": "Done."}]),
        ],
    )
    first, second = load_file(path, tmp_path)
    assert first.name == "claude-code/5e55e55e"
    assert second.name == "claude-code/5e55e55e#2"
    assert first.messages == (
        {"role": "user", "content": [{"type": "text", "text": "fix the bug"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Looking."}, _use("t1")]},
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": [{"type": "text", "text": "a\nb"}],
                }
            ],
        },
    )
    assert first.requests == (Request(1, Usage(3, 50, 20, 42), 1751364000.0),)
    assert first.meta["import_notes"] == {"dropped_thinking_blocks": 1}
    assert second.messages[0]["content"] == [{"type": "text", "text": "Summary of earlier work"}]
    assert [r.n_messages for r in second.requests] == [1]
    assert "RAW" not in json.dumps(first.messages)
    assert "subagent" not in json.dumps(first.messages)


def test_claude_code_parallel_calls_and_rewinds(tmp_path: Path) -> None:
    """Results hung off sibling lines of one response come back; an abandoned branch stays out."""
    path = _write_lines(
        tmp_path / "cafe0000-0000-0000-0000-000000000000.jsonl",
        [
            _cc("user", "u1", None, "go"),
            _reply("a1", "u1", "msg_p", [_use("p1")]),
            _reply("a2", "a1", "msg_p", [_use("p2")]),
            _cc("user", "r2", "a2", [_result("p2")]),
            _cc("user", "r1", "a1", [_result("p1")]),
            _reply("a3", "r1", "msg_q", [{"type": "text", "text": "both done"}]),
            _cc("user", "x1", "a3", "abandoned follow-up"),
            _reply("x2", "x1", "msg_x", [{"type": "text", "text": "abandoned answer"}]),
            _cc("user", "u2", "a3", "real follow-up"),
            _reply("a4", "u2", "msg_r", [{"type": "text", "text": "ok"}]),
        ],
    )
    (trace,) = load_file(path, tmp_path)
    roles = [(m["role"], [b["type"] for b in m["content"]]) for m in trace.messages]
    assert roles == [
        ("user", ["text"]),
        ("assistant", ["tool_use", "tool_use"]),
        ("user", ["tool_result", "tool_result"]),
        ("assistant", ["text"]),
        ("user", ["text"]),
        ("assistant", ["text"]),
    ]
    assert "abandoned" not in json.dumps(trace.messages)
    assert [r.n_messages for r in trace.requests] == [1, 3, 5]
    assert _pairing_problems(trace) == []


def test_mini_swe_agent_handmade(tmp_path: Path) -> None:
    """A bash block becomes a call, a format error stays text, and the submit output is dropped."""

    def answer(text: str, prompt: int) -> dict[str, Any]:
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": 5,
            "prompt_tokens_details": {"cached_tokens": 40},
        }
        return {
            "role": "assistant",
            "content": text,
            "extra": {"response": {"created": 1_763_509_057, "usage": usage}},
        }

    path = _write(
        tmp_path / "t.traj.json",
        {
            "trajectory_format": "mini-swe-agent-1",
            "instance_id": "demo__demo-1",
            "info": {"exit_status": "Submitted"},
            "messages": [
                {"role": "system", "content": "be terse"},
                {"role": "user", "content": "the task"},
                answer("THOUGHT: look\n\n```bash\nls\n```", 100),
                {"role": "user", "content": "<returncode>0</returncode><output>a</output>"},
                answer("```bash\nls\n```\n```bash\npwd\n```", 120),
                {"role": "user", "content": "Please always provide EXACTLY ONE action"},
                answer("```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```", 140),
                {"role": "user", "content": "diff --git a/x b/x"},
            ],
        },
    )
    assert detect(path) == "mini-swe-agent"
    (trace,) = load_file(path, tmp_path)
    assert trace.name == "mini-swe-agent/demo__demo-1"
    assert trace.system == "be terse"
    assert [r.n_messages for r in trace.requests] == [1, 3, 5]
    assert trace.requests[0].usage == Usage(60, 40, 0, 5)
    assert trace.messages[1]["content"][-1]["input"] == {"command": "ls"}
    assert trace.messages[2]["content"][0]["type"] == "tool_result"
    assert [b["type"] for b in trace.messages[3]["content"]] == ["text"]
    assert trace.messages[4]["role"] == "user"
    assert "diff --git" not in json.dumps(trace.messages)
    assert trace.meta["import_notes"] == {
        "answers_without_one_action": 1,
        "unanswered_tool_uses": 1,
    }


def test_anthropic_list(tmp_path: Path) -> None:
    """A plain Anthropic list: a request per assistant turn plus one for the trailing user turn."""
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "reading"}, _use("t1")]},
        {"role": "user", "content": [_result("t1", "file body")]},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
        {"role": "user", "content": "thanks"},
    ]
    path = _write(tmp_path / "conv.json", messages)
    assert detect(path) == "anthropic"
    (trace,) = load_file(path, tmp_path)
    assert (trace.name, trace.path, trace.format, trace.provider) == (
        "anthropic/conv",
        "conv.json",
        "anthropic",
        "anthropic",
    )
    assert [r.n_messages for r in trace.requests] == [1, 3, 5]
    assert all(r.usage is None for r in trace.requests)
    assert trace.messages[2]["content"][0]["content"] == [{"type": "text", "text": "file body"}]
    assert trace.messages[0]["content"] == [{"type": "text", "text": "hi"}]


def test_anthropic_object_with_system(tmp_path: Path) -> None:
    """``{"system", "messages"}`` puts the system prompt aside, even for plain text messages, and
    a request body's ``model`` is the trace's."""
    path = _write(
        tmp_path / "sys.json",
        {
            "model": "claude-sonnet-4-5",
            "system": [{"type": "text", "text": "rules"}],
            "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
        },
    )
    assert detect(path) == "anthropic"
    (trace,) = load_file(path, tmp_path)
    assert (trace.system, trace.model) == ("rules", "claude-sonnet-4-5")
    assert [r.n_messages for r in trace.requests] == [1]


def test_openai_chat_list(tmp_path: Path) -> None:
    """OpenAI tool calls become tool_use blocks and consecutive tool messages one user message."""
    call = {"id": "c1", "type": "function", "function": {"name": "read", "arguments": '{"p": 1}'}}
    bad = {"id": "c2", "type": "function", "function": {"name": "grep", "arguments": "{oops"}}
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": [{"type": "text", "text": "look"}]},
        {"role": "assistant", "content": None, "tool_calls": [call, bad]},
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
        {"role": "tool", "tool_call_id": "c2", "content": "two"},
        {"role": "assistant", "content": "found it"},
    ]
    path = _write(tmp_path / "chat.json", {"model": "gpt-x", "messages": messages})
    assert detect(path) == "openai-chat"
    (trace,) = load_file(path, tmp_path)
    assert (trace.system, trace.model, trace.provider) == ("sys", "gpt-x", "openai")
    assert trace.messages[1]["content"] == [
        {"type": "tool_use", "id": "c1", "name": "read", "input": {"p": 1}},
        {"type": "tool_use", "id": "c2", "name": "grep", "input": {"input": "{oops"}},
    ]
    assert [b["tool_use_id"] for b in trace.messages[2]["content"]] == ["c1", "c2"]
    assert len(trace.messages) == 4
    assert [r.n_messages for r in trace.requests] == [1, 3]


def test_openai_responses_list(tmp_path: Path) -> None:
    """A Responses input list: each run of output items (message, parallel calls) is one model
    call's assistant message, outputs are results, reasoning is left out, ``model`` is read."""
    items = [
        {"role": "developer", "content": "sys"},
        {"role": "user", "content": [{"type": "input_text", "text": "look"}]},
        {"type": "reasoning", "id": "rs", "summary": []},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "ok"}],
        },
        {"type": "function_call", "call_id": "c1", "name": "read", "arguments": '{"p": 1}'},
        {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "*** x"},
        {"type": "function_call_output", "call_id": "c1", "output": "one"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": "two"},
        {"role": "assistant", "content": "found it"},
    ]
    path = _write(tmp_path / "resp.json", {"model": "gpt-4.1", "input": items})
    assert detect(path) == "openai-responses"
    assert detect(_write(tmp_path / "bare.json", items)) == "openai-responses"
    (trace,) = load_file(path, tmp_path)
    assert (trace.system, trace.model, trace.provider) == ("sys", "gpt-4.1", "openai")
    assert trace.messages[1]["content"] == [
        {"type": "text", "text": "ok"},
        {"type": "tool_use", "id": "c1", "name": "read", "input": {"p": 1}},
        {"type": "tool_use", "id": "c2", "name": "apply_patch", "input": {"input": "*** x"}},
    ]
    assert [b["tool_use_id"] for b in trace.messages[2]["content"]] == ["c1", "c2"]
    assert [r.n_messages for r in trace.requests] == [1, 3]
    assert _pairing_problems(trace) == []
    odd = _write(tmp_path / "odd.json", [*items, {"type": "web_search_call", "id": "w"}])
    with pytest.raises(InputError, match=r"item 9 is of type 'web_search_call'"):
        load_file(odd, tmp_path)


def test_openai_responses_odd_items(tmp_path: Path) -> None:
    """An output for no call is kept as text, an ``input_image`` part is an image, and an
    Anthropic list of SDK message dumps (``type: message``) is still Anthropic."""
    image = {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}
    items = [
        {"role": "user", "content": [{"type": "input_text", "text": "see"}, image]},
        {"type": "function_call_output", "call_id": "zz", "output": "orphan text"},
        {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "one"},
    ]
    (trace,) = load_file(_write(tmp_path / "odd.json", items), tmp_path)
    blocks = [b for m in trace.messages for b in m["content"]]
    assert {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
    } in blocks
    assert any("orphan text" in json.dumps(b) for b in blocks if b["type"] == "text")
    assert _pairing_problems(trace) == []
    dump = [
        {"role": "user", "content": "hi"},
        {"id": "msg_01", "type": "message", "role": "assistant", "content": [_use("t1")]},
        {"role": "user", "content": [_result("t1", "body")]},
    ]
    path = _write(tmp_path / "dump.json", dump)
    assert detect(path) == "anthropic"
    assert len(load_file(path, tmp_path)[0].requests) == 2


def test_reused_call_ids_are_made_unique(tmp_path: Path) -> None:
    """A call id reused in a later turn is renamed, and its result follows the renamed call."""

    def turn(text: str) -> list[dict[str, Any]]:
        fn = {"name": "run", "arguments": "{}"}
        return [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "toolu_01", "function": fn}],
            },
            {"role": "tool", "tool_call_id": "toolu_01", "content": text},
        ]

    path = _write(
        tmp_path / "reuse.json", [{"role": "user", "content": "go"}, *turn("a"), *turn("b")]
    )
    (trace,) = load_file(path, tmp_path)
    ids = [b["id"] for m in trace.messages for b in m["content"] if b["type"] == "tool_use"]
    assert ids == ["toolu_01", "toolu_01~2"]
    assert trace.messages[4]["content"][0]["tool_use_id"] == "toolu_01~2"
    assert _pairing_problems(trace) == []
    assert trace.meta["import_notes"] == {"renamed_tool_ids": 1}


def test_orphan_result_becomes_text(tmp_path: Path) -> None:
    """A result with no earlier call is kept as user text and counted, never left unpaired."""
    messages = [
        {"role": "user", "content": [_result("ghost", "boo")]},
        {"role": "assistant", "content": "?"},
    ]
    (trace,) = load_file(_write(tmp_path / "orphan.json", messages), tmp_path)
    assert trace.messages[0]["content"] == [
        {"type": "text", "text": "[tool result for unknown call ghost]\nboo"}
    ]
    assert trace.meta["import_notes"] == {"orphan_results": 1}


def test_load_dir_skips_bad_files_with_reasons(tmp_path: Path) -> None:
    """Corrupt, unknown and ambiguous files are skipped with a reason; others still load."""
    good = [
        {"role": "user", "content": "task"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "x", "name": "t", "input": {}}],
        },
        {"role": "user", "content": [_result("x")]},
    ]
    _write(tmp_path / "a" / "good.json", good)
    (tmp_path / "a" / "corrupt.json").write_text("{not json", encoding="utf-8")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "notes.txt").write_text("hello", encoding="utf-8")
    _write(tmp_path / "b" / "plain.json", [{"role": "user", "content": "hi"}])
    _write_lines(tmp_path / "b" / "bookkeeping.jsonl", [{"type": "summary", "leafUuid": "x"}])
    (tmp_path / "README.md").write_text("# traces", encoding="utf-8")
    _write(tmp_path / "b" / "x.meta.json", {"agentType": "y"})
    (tmp_path / ".hidden.json").write_text("[]", encoding="utf-8")

    traces, skipped = load_dir(tmp_path)
    assert [t.path for t in traces] == ["a/good.json"]
    reasons = {s.path: s.reason for s in skipped}
    assert sorted(reasons) == [
        "a/corrupt.json",
        "b/bookkeeping.jsonl",
        "b/notes.txt",
        "b/plain.json",
    ]
    for rel, reason in reasons.items():
        assert rel in reason  # each reason names its file
    assert "not valid JSON" in reasons["a/corrupt.json"]
    assert "not a .json or .jsonl file" in reasons["b/notes.txt"]
    assert "name the format" in reasons["b/plain.json"]
    assert "no user or assistant lines" in reasons["b/bookkeeping.jsonl"]


def test_load_file_errors(tmp_path: Path) -> None:
    """Unknown formats and malformed content raise InputError subclasses naming the problem."""
    plain = _write(tmp_path / "plain.json", [{"role": "user", "content": "hi"}])
    assert detect(plain) is None
    with pytest.raises(FormatError, match="unrecognized trace format"):
        load_file(plain, tmp_path)
    with pytest.raises(FormatError, match="unknown trace format 'nope'"):
        load_file(plain, tmp_path, format="nope")
    (trace,) = load_file(plain, tmp_path, format="openai-chat")
    assert trace.provider == "openai"
    wrong = _write(tmp_path / "wrong.json", [{"role": "robot", "content": "beep"}])
    with pytest.raises(InputError, match=r"wrong\.json: message 0 has role 'robot'"):
        load_file(wrong, tmp_path, format="anthropic")
    broken = _write(tmp_path / "broken.json", {"trajectory_format": "mini-swe-agent-1"})
    with pytest.raises(InputError, match=r"broken\.json"):
        load_file(broken, tmp_path)
    assert set(FORMATS) == {
        "claude-code",
        "codex-cli",
        "gemini-cli",
        "mini-swe-agent",
        "openhands",
        "anthropic",
        "openai-chat",
        "openai-responses",
    }


def test_missing_directory_is_an_input_error(tmp_path: Path) -> None:
    """Loading a directory that does not exist fails with a message naming it."""
    with pytest.raises(InputError, match="does not exist"):
        load_dir(tmp_path / "nowhere")
