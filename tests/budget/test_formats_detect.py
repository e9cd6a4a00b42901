"""Format detection and selection, and the read-back tool in each format."""

from __future__ import annotations

import importlib
import typing
from itertools import permutations
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from budget import (
    Budget,
    BudgetConfig,
    FormatError,
    FormatUnknown,
    InputError,
    detect_format,
    get_format,
)
from budget.formats import ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES, detect
from budget.formats._shapes import LABELS
from tests.strategies import assistant, chat_assistant, chat_tool, conversation, results

SMALL = BudgetConfig(result_cap=1_000, preview_chars=200, fsync=False)

ANTHROPIC_MSGS = conversation([["ok"]])
CHAT_MSGS = [
    {"role": "user", "content": "hi"},
    chat_assistant(("c1", "bash")),
    chat_tool("c1", "ok"),
]
RESPONSES_MSGS = [
    {"role": "user", "content": "hi"},
    {"type": "function_call", "call_id": "c1", "name": "bash", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "ok"},
]


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        (ANTHROPIC_MSGS, ANTHROPIC),
        (CHAT_MSGS, OPENAI_CHAT),
        (RESPONSES_MSGS, OPENAI_RESPONSES),
        ([{"role": "user", "content": [{"type": "image", "source": {}}]}], ANTHROPIC),
        ([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}], OPENAI_CHAT),
        ([{"role": "user", "content": [{"type": "input_text", "text": "x"}]}], OPENAI_RESPONSES),
        ([{"role": "assistant", "content": None, "tool_calls": []}], OPENAI_CHAT),
        ([{"type": "reasoning", "summary": []}], OPENAI_RESPONSES),
    ],
)
def test_each_format_is_recognised_for_sure(messages: list[Any], expected: Any) -> None:
    """Tool calls, and shapes only one format has, settle the format."""
    assert detect(messages) == (expected, True)
    assert detect_format(messages) is expected


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([], ANTHROPIC),
        ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}], ANTHROPIC),
        ([{"role": "user", "content": [{"type": "text", "text": "hi"}]}], ANTHROPIC),
        (
            [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
            OPENAI_CHAT,
        ),
        (
            [
                {"role": "developer", "content": "x"},
                {"type": "message", "role": "user", "content": "y"},
            ],
            OPENAI_RESPONSES,
        ),
    ],
)
def test_shapes_every_format_allows_give_a_guess_that_is_not_fixed(
    messages: list[Any], expected: Any
) -> None:
    """Without tool calls, plain shapes give Anthropic when it fits, else Chat, and say so."""
    fmt, certain = detect(messages)
    assert fmt is expected
    assert certain is (expected is OPENAI_RESPONSES)


@pytest.mark.parametrize(
    ("messages", "needles"),
    [
        (
            [*ANTHROPIC_MSGS, chat_assistant(("c9", "bash"))],
            ["messages[1].content[1] is a 'tool_use' part", "messages[3] has tool_calls"],
        ),
        (
            [{"role": "system", "content": "x"}, assistant(("t1", "bash"))],
            ["messages[0] has role 'system'", "'tool_use'", "Anthropic Messages"],
        ),
        (
            [*CHAT_MSGS, RESPONSES_MSGS[1]],
            ["messages[1] has tool_calls", "messages[3] is a 'function_call' item"],
        ),
    ],
)
def test_mixed_formats_are_refused_naming_both_sides(
    messages: list[Any], needles: list[str]
) -> None:
    """Messages of two formats raise FormatError naming the message of each."""
    with pytest.raises(FormatError) as info:
        detect_format(messages)
    for needle in needles:
        assert needle in str(info.value)


def test_unknown_shapes_are_refused_naming_what_was_seen() -> None:
    """A string, an object of another library, an unknown role or item type: FormatError."""
    from langchain_core.messages import AIMessage

    cases: list[tuple[list[Any], str]] = [
        (["hello"], "messages[0] is a str"),
        ([AIMessage(content="hi")], "messages[0] (AIMessage) has type 'ai' and no role"),
        ([{"role": "critic", "content": "x"}], "messages[0].role is 'critic'"),
        ([{"type": "telepathy"}], "has type 'telepathy' and no role"),
        ([{"content": "x"}], "messages[0].role is missing"),
    ]
    for messages, needle in cases:
        with pytest.raises(FormatError) as info:
            detect_format(messages)
        assert needle in str(info.value), str(info.value)
        assert isinstance(info.value, InputError)


@pytest.mark.parametrize("messages", [None, 5, {"role": "user", "content": "hi"}])
def test_detect_format_of_what_is_no_list_of_messages_is_an_input_error(messages: Any) -> None:
    """detect_format(None), of a number or of one message dict is an InputError, as prepare's."""
    with pytest.raises(InputError, match=r"^messages must be a list of messages"):
        detect_format(messages)


def test_sdk_models_are_detected() -> None:
    """anthropic and openai response objects are recognised like their dict forms."""
    import anthropic.types
    from openai.types.responses import ResponseFunctionToolCall

    msg = anthropic.types.Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}}],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
    )
    assert detect([{"role": "user", "content": "hi"}, msg]) == (ANTHROPIC, True)
    fc = ResponseFunctionToolCall(type="function_call", call_id="c", name="x", arguments="{}")
    assert detect([fc]) == (OPENAI_RESPONSES, True)


def test_get_format_knows_the_builtin_names() -> None:
    """Names map to the adapters; a Format passes through; anything else is a FormatError."""
    assert get_format("anthropic") is ANTHROPIC
    assert get_format("openai_chat") is OPENAI_CHAT
    assert get_format("openai_responses") is OPENAI_RESPONSES
    assert get_format(OPENAI_CHAT) is OPENAI_CHAT
    with pytest.raises(FormatError, match="'anthropic', 'openai_chat', 'openai_responses'"):
        get_format("gemini")
    with pytest.raises(FormatError):
        get_format(3)  # type: ignore[arg-type]


def test_the_format_is_fixed_once_certain_and_remembered_on_resume(tmp_path: Path) -> None:
    """A guess is not binding; a certain detection is, also after resume; another one is refused."""
    with Budget.open(tmp_path / "s", SMALL) as b:
        r = b.prepare([{"role": "system", "content": "x"}, {"role": "user", "content": "hi"}])
        assert r.report.format == "openai_chat"  # a guess: nothing to budget yet
        r = b.prepare(RESPONSES_MSGS)  # the same session turns out to be Responses
        assert r.report.format == "openai_responses"
        with pytest.raises(FormatError, match=r"has tool_calls .* \('openai_responses'\)"):
            b.prepare(CHAT_MSGS)
        with pytest.raises(FormatError, match="cannot be prepared as 'anthropic'"):
            b.prepare(RESPONSES_MSGS, format="anthropic")
    with Budget.open(tmp_path / "s", SMALL) as b:
        assert b.prepare(RESPONSES_MSGS).report.format == "openai_responses"
        assert b.read_tool()["type"] == "function" and "name" in b.read_tool()
    with pytest.raises(FormatError, match="openai_responses"):
        Budget.open(tmp_path / "s", SMALL, format="openai_chat")


def test_a_named_format_is_used_as_is(tmp_path: Path) -> None:
    """format= on the constructor or on prepare skips detection and validates in that format."""
    with Budget.open(tmp_path / "a", SMALL, format=OPENAI_CHAT) as b:
        # role/content dicts that detection would take for Anthropic are Chat messages here.
        assert b.prepare([{"role": "user", "content": "hi"}]).report.format == "openai_chat"
    bad_role = r"messages\[0\]\.role must be 'user' or 'assistant'"
    with Budget.open(tmp_path / "b", SMALL) as b, pytest.raises(InputError, match=bad_role):
        b.prepare([{"role": "system", "content": "x"}], format="anthropic")


HISTORIES = {
    "anthropic": ANTHROPIC_MSGS,
    "openai_chat": [{"role": "system", "content": "Be brief."}, *CHAT_MSGS],
    "openai_responses": RESPONSES_MSGS,
}


@pytest.mark.parametrize(("session_format", "history_format"), list(permutations(HISTORIES, 2)))
def test_a_history_of_another_format_than_the_sessions_is_a_format_error(
    session_format: str, history_format: str
) -> None:
    """A history in another format than the session's is a FormatError naming both formats,
    whichever field of it the session's adapter refuses first."""
    with Budget.in_memory(SMALL, format=session_format) as b:
        with pytest.raises(FormatError) as info:
            b.prepare(HISTORIES[history_format])
        assert f"the session's format, {LABELS[session_format]}" in str(info.value)
        assert LABELS[history_format] in str(info.value)
        assert b.prepare(HISTORIES[session_format]).report.format == session_format


@pytest.mark.parametrize(
    ("session_format", "history", "needle"),
    [
        ("anthropic", [{"role": "user", "content": 3}], "messages[0].content must be"),
        ("anthropic", [{"role": "developer", "content": "x"}], "messages[0].role must be"),
        ("openai_chat", [*CHAT_MSGS, {"role": "critic", "content": "x"}], "messages[3].role"),
        ("openai_responses", [*RESPONSES_MSGS, {"content": "x"}], "neither a type nor a role"),
    ],
)
def test_a_malformed_message_of_the_sessions_format_keeps_its_input_error(
    session_format: str, history: list[Any], needle: str
) -> None:
    """A message that may be the session's format, fits none, or sits in a history of no
    certain format gets the adapter's own InputError, not a FormatError."""
    with Budget.in_memory(SMALL, format=session_format) as b, pytest.raises(InputError) as info:
        b.prepare(history)
    assert type(info.value) is InputError
    assert needle in str(info.value)


def test_a_format_error_leaves_the_session_usable(tmp_path: Path) -> None:
    """A refused history does not fix anything; the next good one is prepared normally."""
    with Budget.open(tmp_path / "s", SMALL) as b:
        with pytest.raises(FormatError):
            b.prepare([*ANTHROPIC_MSGS, *RESPONSES_MSGS[1:]])
        assert b.prepare(CHAT_MSGS).report.format == "openai_chat"


def _typed_dict_keys(td: Any) -> set[str]:
    return set(typing.get_type_hints(td))


def _sdk_type(dotted: str) -> Any:
    """The SDK type named ``module:name``, imported here so collecting this module imports no SDK."""
    module, _, name = dotted.partition(":")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize(
    ("fmt", "schema_name", "params_key"),
    [
        ("anthropic", "anthropic.types:ToolParam", "input_schema"),
        ("openai_chat", "openai.types.chat:ChatCompletionFunctionToolParam", "parameters"),
        ("openai_responses", "openai.types.responses:FunctionToolParam", "parameters"),
    ],
)
def test_read_tool_is_valid_in_each_format(
    tmp_path: Path, fmt: str, schema_name: str, params_key: str
) -> None:
    """The read-back tool validates as the SDK's own tool type, with only keys that type has."""
    schema_type = _sdk_type(schema_name)
    with Budget.open(tmp_path / "s", SMALL) as b:
        tool = b.read_tool(format=fmt)
    TypeAdapter(schema_type).validate_python(tool)
    assert set(tool) <= _typed_dict_keys(schema_type)
    body = tool["function"] if fmt == "openai_chat" else tool
    assert (
        set(body) - {"type"} <= _typed_dict_keys(typing.get_type_hints(schema_type)["function"])
        if fmt == "openai_chat"
        else True
    )
    assert body["name"] == "toolbudget_read"
    assert body[params_key]["required"] == ["ref"]


def test_read_tool_refuses_to_guess_until_the_format_is_known(tmp_path: Path) -> None:
    """Before any request, and after one every format allows (no tool call), read_tool() raises
    FormatUnknown (it gave the Anthropic shape to a Chat session); once a Chat request fixes
    the format, the tool is Chat-shaped, also after a resume."""
    with Budget.open(tmp_path / "s", SMALL) as b:
        with pytest.raises(FormatUnknown, match="format='openai_chat'"):
            b.read_tool()
        b.prepare([{"role": "user", "content": "hi"}])  # Anthropic and Chat alike
        with pytest.raises(FormatUnknown, match="no request has shown it yet"):
            b.read_tool()
        assert "input_schema" in b.read_tool(format="anthropic")  # named: no guess
        b.prepare(CHAT_MSGS)
        assert b.read_tool()["function"]["name"] == "toolbudget_read"
    with Budget.open(tmp_path / "s", SMALL) as b:
        assert b.read_tool()["type"] == "function"


@pytest.mark.parametrize(
    ("fmt", "key"),
    [
        ("openai_chat", "function"),
        ("openai_responses", "parameters"),
        ("anthropic", "input_schema"),
    ],
)
def test_a_format_named_at_open_shapes_the_first_requests_tool(
    tmp_path: Path, fmt: str, key: str
) -> None:
    """``Budget.open(..., format=...)`` gives the read-back tool its format's shape before any
    request, and the first request (plain text, no tool call yet) keeps it."""
    with Budget.open(tmp_path / "s", SMALL, format=fmt) as b:
        assert key in b.read_tool()
        b.prepare([{"role": "user", "content": "hi"}])
        assert key in b.read_tool()


def test_the_read_tool_takes_json_string_arguments(tmp_path: Path) -> None:
    """OpenAI formats pass arguments as a JSON string: handled, and bad JSON is an error text."""
    text = "".join(f"line {i}\n" for i in range(400))
    msgs = [*CHAT_MSGS[:2], chat_tool("c1", text)]
    with Budget.open(tmp_path / "s", SMALL) as b:
        [d] = b.prepare(msgs).report.decisions
        assert d.ref is not None
        page = b.handle_read_tool(f'{{"ref": "{d.ref}", "offset": 10, "limit": 2}}')
        assert "line 10" in page and "line 11" in page and "line 12" not in page
        assert b.handle_read_tool("{not json").startswith("Error: the tool input is not valid JSON")


def test_results_are_matched_across_formats_by_their_own_ids(tmp_path: Path) -> None:
    """The same outputs in the three formats get the same decisions and envelopes."""
    outs = ["x" * 1_500, "small"]
    anth = [
        {"role": "user", "content": "go"},
        assistant(("c0", "bash"), ("c1", "bash")),
        results(("c0", outs[0]), ("c1", outs[1])),
    ]
    chat = [
        {"role": "user", "content": "go"},
        chat_assistant(("c0", "bash"), ("c1", "bash")),
        chat_tool("c0", outs[0]),
        chat_tool("c1", outs[1]),
    ]
    resp = [
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "c0", "name": "bash", "arguments": "{}"},
        {"type": "function_call", "call_id": "c1", "name": "bash", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c0", "output": outs[0]},
        {"type": "function_call_output", "call_id": "c1", "output": outs[1]},
    ]
    seen: list[Any] = []
    for name, msgs in (("a", anth), ("c", chat), ("r", resp)):
        with Budget.open(tmp_path / name, SMALL) as b:
            rep = b.prepare(msgs).report
            d = b.decision("c0")
            assert d is not None and d.kind == "spilled"
            seen.append(([(d.call_id, d.kind, d.ref) for d in rep.decisions], d.text))
    assert seen[0] == seen[1] == seen[2]
