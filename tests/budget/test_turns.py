"""The user's turns: results from before the user's previous prompt leave the protected rounds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from budget import Budget, BudgetConfig
from budget.formats import ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES

LOG = "a line of the build log, as it was printed\n" * 140  # 6,160 characters


def _call(cid: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": cid, "name": "bash", "input": {"cmd": cid}}],
    }


def _result(cid: str) -> dict[str, Any]:
    text = f"{cid}\n{LOG}"
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": cid, "content": text}],
    }


def _turns(*rounds: int) -> list[tuple[list[dict[str, Any]], bool]]:
    """A conversation of one user turn per entry of ``rounds`` (that many tool rounds each, then
    a reply): every request's history, and whether it is the one a new prompt opened."""
    history: list[dict[str, Any]] = []
    requests: list[tuple[list[dict[str, Any]], bool]] = []
    for t, n in enumerate(rounds):
        history.append({"role": "user", "content": f"Task {t}: build target {t}, please."})
        requests.append((list(history), True))
        for r in range(n):
            cid = f"toolu_{t}_{r}"
            history += [_call(cid), _result(cid)]
            requests.append((list(history), False))
        history.append({"role": "assistant", "content": [{"type": "text", "text": f"Done {t}."}]})
    return requests


def _run(path: Path, **config: Any) -> list[Any]:
    """Prepare every request of a three-turn session (3, 1 and 1 rounds) with usage that never
    reads a cache: every request's report."""
    reports = []
    with Budget.open(path, BudgetConfig(fsync=False, **config)) as session:
        for i, (history, _) in enumerate(_turns(3, 1, 1)):
            usage = {"input_tokens": 1_000 + 2_000 * i, "output_tokens": 10}
            reports.append(session.prepare(history, usage=usage, now=5.0 * i).report)
    return reports


def test_the_formats_mark_a_users_prompt_and_nothing_else() -> None:
    """A user message that answers no call is a prompt in every format; a result, an assistant
    or a system message is not."""
    assert ANTHROPIC.scan(0, {"role": "user", "content": "Fix it."}).prompt
    assert ANTHROPIC.scan(0, {"role": "user", "content": [{"type": "text", "text": "Go"}]}).prompt
    assert not ANTHROPIC.scan(0, _result("toolu_1")).prompt
    assert not ANTHROPIC.scan(0, {"role": "assistant", "content": "Sure."}).prompt
    assert OPENAI_CHAT.scan(0, {"role": "user", "content": "Fix it."}).prompt
    for message in (
        {"role": "system", "content": "Be brief."},
        {"role": "assistant", "content": "Sure."},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ):
        assert not OPENAI_CHAT.scan(0, message).prompt
    assert OPENAI_RESPONSES.scan(0, {"role": "user", "content": "Fix it."}).prompt
    assert OPENAI_RESPONSES.scan(0, {"type": "message", "role": "user", "content": "Go"}).prompt
    output = {"type": "function_call_output", "call_id": "c1", "output": "ok"}
    assert not OPENAI_RESPONSES.scan(0, output).prompt
    assert not OPENAI_RESPONSES.scan(0, {"role": "developer", "content": "Be brief."}).prompt


def test_results_before_the_previous_prompt_are_trimmed_inside_the_protected_rounds(
    tmp_path: Path,
) -> None:
    """Five rounds in all, all inside the 5 protected rounds: once the third prompt comes, the
    first turn's three results were answered two prompts ago and are trimmed (the usage shows
    no cache, so the trim pays now); with ``protect_turns=None`` the rounds alone keep them."""
    reports = _run(tmp_path / "turns")
    third = [i for i, (_, prompt) in enumerate(_turns(3, 1, 1)) if prompt][2]
    assert [r.trimmed_now for r in reports[:third]] == [0] * third
    assert reports[third].trimmed_now == 3 and reports[third].staleness_reason == "no_cache"
    rounds_only = _run(tmp_path / "rounds", protect_turns=None)
    assert sum(r.trimmed_now for r in rounds_only) == 0


def test_a_resumed_session_finds_the_same_turns(tmp_path: Path) -> None:
    """The prompts are found again from the history a resumed session is given: the copy of the
    last request is the same bytes in a new process as in the first."""
    requests = _turns(3, 1, 1)
    with Budget.open(tmp_path / "s", BudgetConfig(fsync=False)) as session:
        for i, (history, _) in enumerate(requests):
            usage = {"input_tokens": 1_000 + 2_000 * i, "output_tokens": 10}
            last = session.prepare(history, usage=usage, now=5.0 * i).messages
    with Budget.open(tmp_path / "s", BudgetConfig(fsync=False)) as again:
        assert again.prepare(requests[-1][0], now=100.0).messages == last


def test_protect_turns_is_validated() -> None:
    """At least one turn is protected: zero is refused when the settings are built."""
    with pytest.raises(ValueError, match="protect_turns"):
        BudgetConfig(protect_turns=0)


def _text(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def _prepare_all(path: Path, requests: list[list[Any]], fmt: str | None = None) -> list[Any]:
    """Every request prepared in order, with usage that never reads a cache: the reports."""
    reports = []
    with Budget.open(path, BudgetConfig(fsync=False), format=fmt) as session:
        for i, history in enumerate(requests):
            usage = {"input_tokens": 1_000 + 2_000 * i, "output_tokens": 10}
            reports.append(session.prepare(history, usage=usage, now=5.0 * i).report)
    return reports


# Claude Code's own user messages that follow a tool result with no answer in between.
INTERRUPTED = [_text("[Request interrupted by user for tool use]")]
LOCAL_COMMAND = [
    _text("<local-command-caveat>Caveat: The messages below were generated by the user while "
          "running local commands.</local-command-caveat>"),
    _text("<command-name>/context</command-name>"),
    _text("<local-command-stdout>Context usage: 41%</local-command-stdout>"),
]  # fmt: skip


@pytest.mark.parametrize("between", [INTERRUPTED, LOCAL_COMMAND], ids=["interrupt", "command"])
def test_a_marker_before_the_next_prompt_opens_no_answered_turn(
    tmp_path: Path, between: list[dict[str, Any]]
) -> None:
    """One task of three reads (all in the 5 protected rounds), an edit the user interrupts, and
    a follow-up question about those reads: no turn was answered, so nothing is trimmed."""
    history: list[Any] = [_text("Fix the HTML generation, please.")]
    requests: list[list[Any]] = [list(history)]
    for r in range(3):
        history += [_call(f"toolu_{r}"), _result(f"toolu_{r}")]
        requests.append(list(history))
    history += [_call("toolu_edit")]
    edit = _result("toolu_edit")
    edit["content"][0].update(content="The user doesn't want to proceed.", is_error=True)
    history += [edit, *between, _text("Do we even need _generate_html_with_combined_link then?")]
    requests.append(list(history))
    reports = _prepare_all(tmp_path / "s", requests)
    assert [r.trimmed_now for r in reports] == [0] * len(reports)


def test_an_image_sent_after_a_tool_result_is_no_new_turn_in_chat(tmp_path: Path) -> None:
    """A Chat agent that shows each screenshot in a user message after the tool's answer (a tool
    message holds text only) has one turn: its results stay in the 5 protected rounds."""
    history: list[Any] = [
        {"role": "system", "content": "You drive a browser."},
        {"role": "user", "content": "Book the cheapest flight to Oslo."},
    ]
    requests: list[list[Any]] = [list(history)]
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    for r in range(4):
        cid = f"call_{r}"
        call = {"id": cid, "type": "function", "function": {"name": "browse", "arguments": "{}"}}
        history.append({"role": "assistant", "content": None, "tool_calls": [call]})
        history.append({"role": "tool", "tool_call_id": cid, "content": f"{cid}\n{LOG}"})
        history.append({"role": "user", "content": [{"type": "text", "text": "Shot:"}, image]})
        requests.append(list(history))
    reports = _prepare_all(tmp_path / "s", requests, "openai_chat")
    assert [r.trimmed_now for r in reports] == [0] * len(reports)


def _chat_turns(between: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """Chat requests of three user messages, one round before the second: ``between`` sits
    between the second and the third (what is said between them)."""
    call = {"id": "c0", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "Task 0."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c0", "content": f"c0\n{LOG}"},
        {"role": "assistant", "content": "Done 0."},
        {"role": "user", "content": "Task 1."},
    ]
    requests = [history[:3], list(history)]
    history += [between, {"role": "user", "content": "Task 2."}]
    return [*requests, history]


def test_only_an_answer_between_two_user_messages_makes_them_two_turns(tmp_path: Path) -> None:
    """An assistant's answer between the second and third user message makes three turns (the
    first one's result trimmed); a system note there changes nothing (two turns, kept)."""
    for name, between, trimmed in (
        ("answer", {"role": "assistant", "content": "Noted."}, 1),
        ("system", {"role": "system", "content": "Be brief."}, 0),
        ("developer", {"role": "developer", "content": "Be brief."}, 0),
    ):
        reports = _prepare_all(tmp_path / name, _chat_turns(between), "openai_chat")
        assert [r.trimmed_now for r in reports] == [0, 0, trimmed], name


def test_a_request_after_a_long_run_of_neutral_items_reads_few_scans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A computer-use Responses agent (computer_call items, neutral to the turns) appending
    items: each request weighs the turns of its new items only, not the history back to the
    prompt."""
    import budget.session._turns as turns_mod

    def computer(i: str) -> list[dict[str, Any]]:
        call: dict[str, Any] = {"type": "computer_call", "call_id": f"cu{i}", "id": f"cc{i}"}
        call |= {"status": "completed"}
        call |= {"action": {"type": "screenshot"}, "pending_safety_checks": []}
        shot = {"type": "computer_screenshot", "image_url": "data:,"}
        return [call, {"type": "computer_call_output", "call_id": f"cu{i}", "output": shot}]

    history: list[dict[str, Any]] = [{"role": "user", "content": "Book a flight to Oslo."}]
    for i in range(3_000):
        history += computer(str(i))
    calls = 0
    real = turns_mod._answered

    def counted(scanned: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(scanned)

    with Budget.open(tmp_path / "s", {"fsync": False}, format="openai_responses") as session:
        session.prepare(history, now=0.0)
        monkeypatch.setattr(turns_mod, "_answered", counted)
        for step in range(1, 4):
            history += computer(f"x{step}")
            session.prepare(history, now=float(step))
    assert calls < 100, calls
