"""The documented defaults (SPEC §3, docs/settings.md) run end to end with ``BudgetConfig()``.

Every other budget test passes small explicit limits; these open sessions with the shipped
defaults and sit on each one's boundary, so a changed default fails here. The figures are worked
out by hand in each docstring: outputs are lines of a fixed width, so characters, lines and cuts
are exact; token counts that depend on the estimator's weights are pinned once and the test then
holds the threshold against them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from budget import Budget, BudgetConfig, Prepared, ToolPolicy
from spill import ref_for
from tests.strategies import assistant, big, conversation, results

Message = dict[str, Any]


def lines(chars: int, tag: str = "x") -> str:
    """``chars`` characters of 60-character lines (59 ``tag`` and a newline), the rest unterminated."""
    return (tag * 59 + "\n") * (chars // 60) + "y" * (chars % 60)


def shown(req: Prepared, call_id: str) -> str:
    """The text the request copy shows for ``call_id`` (string contents only, as built here)."""
    for m in req.messages:
        if isinstance(m["content"], list):
            for block in m["content"]:
                if block.get("type") == "tool_result" and block["tool_use_id"] == call_id:
                    content = block["content"]
                    assert isinstance(content, str)
                    return content
    raise KeyError(call_id)


def kinds(req: Prepared) -> dict[str, tuple[str, str]]:
    """call id -> (kind, reason) of the decisions this request made or changed."""
    return {d.call_id: (d.kind, d.reason) for d in req.report.decisions}


def trimmed(req: Prepared) -> list[str]:
    """Call ids this request trimmed, in order."""
    return [d.call_id for d in req.report.decisions if d.kind == "trimmed"]


def test_the_shipped_config_is_the_documented_one() -> None:
    """The defaults the boundary tests below rely on, read off the model the public API gives."""
    cfg = BudgetConfig()
    assert (cfg.result_cap, cfg.preview_chars, cfg.group_budget) == (50_000, 2_000, 200_000)
    assert (cfg.protect_rounds, cfg.stale_floor, cfg.stub_chars) == (5, 2_000, 300)
    assert (cfg.min_reclaim_tokens, cfg.cache_ttl_s, cfg.pressure) == (10_000, 300.0, 0.6)


# --- Pass 1: the per-result cap, 50,000 characters ---------------------------------------------


CAPPED = {"tools": {"bash": ToolPolicy(cap=50_000)}}
"""The caller's own cap for bash: a hard limit, the cost model left out (the passes alone)."""


def test_a_result_of_50000_characters_is_kept_and_one_of_50001_spilled(tmp_path: Path) -> None:
    """An explicit cap spills only strictly longer results: 50,000 stays inline, 50,001 goes."""
    at_cap, over = lines(50_000), lines(50_001)
    assert (len(at_cap), len(over)) == (50_000, 50_001)
    msgs = conversation([[at_cap], [over]])  # one result per round: no group budget involved
    with Budget.open(tmp_path / "s", CAPPED) as b:
        req = b.prepare(msgs, now=0)
        assert kinds(req) == {"call_0_0": ("kept", "fits"), "call_1_0": ("spilled", "cap")}
        assert shown(req, "call_0_0") is at_cap
        assert b.read(ref_for(over)) == over


def test_a_result_over_its_cap_kept_whole_says_its_envelope_was_not_shorter(tmp_path: Path) -> None:
    """A 2,100-character result over a tool cap of 1 stays whole (the 2,000-character preview and
    its frame would be longer) and its decision says so (`not_shorter`), not `fits`."""
    msgs = conversation([[lines(2_100)], [lines(100)]])
    with Budget.open(tmp_path / "s", {"tools": {"bash": ToolPolicy(cap=1)}}) as b:
        req = b.prepare(msgs, now=0)
    assert kinds(req)["call_0_0"] == ("kept", "not_shorter")


def test_the_default_cap_is_a_ceiling_under_which_the_cost_model_decides(tmp_path: Path) -> None:
    """By default 50,001 characters are over the ceiling (cap); 50,000 are priced and spilled."""
    msgs = conversation([[lines(50_000)], [lines(50_001)]])
    with Budget.open(tmp_path / "s") as b:
        req = b.prepare(msgs, now=0)
    assert kinds(req) == {"call_0_0": ("spilled", "pays"), "call_1_0": ("spilled", "cap")}
    cost = {d.call_id: d.cost for d in req.report.decisions}
    assert cost["call_1_0"] is None  # the ceiling, not a price, decided it
    verdict = cost["call_0_0"]
    assert verdict is not None and verdict.choice == "spill" and verdict.net > 0


def test_the_default_preview_is_66_head_and_66_tail_lines_of_15_characters(tmp_path: Path) -> None:
    """2,000 preview characters at tail share 0.5: 1,000 each side, 66 whole 15-char lines (990).

    3,334 lines of 15 characters = 50,010 characters is not errors, JSON, a table or a diff: its
    preview is head + tail. The head keeps lines 1-66, the tail lines 3,269-3,334, and lines
    67-3,268 are left out, as the marker line says with their count: 3,202 lines of 50,010 - 2 x
    990 = 48,030 characters (it and the block headers are not counted in the 2,000, as version
    0's marker lines were not).
    """
    text = big(3_334)
    with Budget.open(tmp_path / "s") as b:
        env = shown(b.prepare(conversation([[text]]), now=0), "call_0_0")
    markers = [line for line in env.splitlines() if line.startswith("--- ")]
    assert markers == [
        "--- preview: head_tail; left out: lines 67–3,268 (3,202 lines, 48,030 characters) ---",
        "--- lines 1–66 ---",
        "--- lines 3,269–3,334 ---",
    ]
    head = env.split("--- lines 1–66 ---\n")[1].split("\n--- lines 3,269")[0]
    assert head + "\n" == text[:990]
    assert env.endswith(text[-990:].removesuffix("\n"))
    assert "File:" not in env  # include_path is off by default


def test_an_error_results_preview_gives_three_quarters_to_the_tail(tmp_path: Path) -> None:
    """Error tail share 0.75: 500 head characters hold 33 lines (495), the 1,500 tail exactly 100;
    the 3,201 lines between them, 50,010 - 495 - 1,500 = 48,015 characters, are left out."""
    text = big(3_334)
    msgs = [
        {"role": "user", "content": "Run the tests."},
        assistant(("e", "pytest")),
        results(("e", text), is_error=True),
    ]
    with Budget.open(tmp_path / "s") as b:
        env = shown(b.prepare(msgs, now=0), "e")
    markers = [line for line in env.splitlines() if line.startswith("--- ")]
    assert markers == [
        "--- preview: head_tail; left out: lines 34–3,234 (3,201 lines, 48,015 characters) ---",
        "--- lines 1–33 ---",
        "--- lines 3,235–3,334 ---",
    ]


# --- Pass 2: the group budget, 200,000 characters ----------------------------------------------


def test_a_group_of_five_45000_character_results_spills_exactly_the_first(tmp_path: Path) -> None:
    """5 x 45,000 = 225,000 > 200,000; one envelope (~2.4k) leaves 182k, under: one spill, ties earliest."""
    outs = [lines(45_000, tag) for tag in "abcde"]
    with Budget.open(tmp_path / "s", CAPPED) as b:
        req = b.prepare(conversation([outs]), now=0)
    spilled = [cid for cid, (kind, _) in kinds(req).items() if kind == "spilled"]
    assert spilled == ["call_0_0"]
    assert kinds(req)["call_0_0"] == ("spilled", "aggregate")
    assert req.report.chars_after <= 200_000 < req.report.chars_after + 45_000
    assert req.report.chars_before == 225_000


def test_a_group_of_exactly_200000_characters_is_left_whole(tmp_path: Path) -> None:
    """Four 45,000 and one 20,000: 200,000 together, at the budget, so nothing is spilled."""
    outs = [lines(45_000, tag) for tag in "abcd"] + [lines(20_000, "e")]
    with Budget.open(tmp_path / "s", CAPPED) as b:
        req = b.prepare(conversation([outs]), now=0)
    assert req.report.chars_before == 200_000
    assert req.report.spilled == 0 and req.report.chars_after == 200_000


# --- Pass 3: staleness -------------------------------------------------------------------------


def nine_rounds() -> list[Message]:
    """Nine rounds of one 12,000-character result each (~3,300 tokens reclaimable apiece)."""
    return conversation([[lines(12_000, chr(ord("a") + r))] for r in range(9)])


def cold_batch(tmp_path: Path, pause: float) -> Prepared:
    """Rounds 0-7 at t=0, then round 8 after ``pause`` seconds, in a default session."""
    msgs = nine_rounds()
    with Budget.open(tmp_path / "s") as b:
        first = b.prepare(msgs[:-2], now=0)
        # 3 eligible results (rounds 0-2) reclaim under 10,000 tokens: no batch yet.
        assert not first.report.staleness_ran and first.report.reclaimable_tokens < 10_000
        return b.prepare(msgs, now=pause)


def test_a_cold_cache_batch_protects_the_last_five_rounds(tmp_path: Path) -> None:
    """Round 8 is current: rounds 4-8 are protected, 0-3 trimmed (4 x ~3.3k tokens >= 10,000)."""
    req = cold_batch(tmp_path, 300)
    assert req.report.staleness_ran and req.report.staleness_reason == "cold_cache"
    assert trimmed(req) == ["call_0_0", "call_1_0", "call_2_0", "call_3_0"]
    for r in range(4, 9):
        assert shown(req, f"call_{r}_0") == lines(12_000, chr(ord("a") + r))


def test_a_pause_of_exactly_the_ttl_is_cold_and_a_shorter_one_is_not(tmp_path: Path) -> None:
    """TTL 300 s: a pause of 299.999 s keeps the cache warm (no batch, nothing else fires)."""
    warm = cold_batch(tmp_path / "warm", 299.999)
    assert not warm.report.staleness_ran and trimmed(warm) == []
    assert warm.report.reclaimable_tokens >= 10_000  # it would have run, had the cache been cold
    cold = cold_batch(tmp_path / "cold", 300)
    assert cold.report.staleness_reason == "cold_cache"


def test_stubs_are_300_characters(tmp_path: Path) -> None:
    """A trimmed 12,000-character result becomes a stub of exactly stub_chars (300) characters."""
    req = cold_batch(tmp_path, 300)
    stub = shown(req, "call_0_0")
    assert stub.startswith("[toolbudget] Old output of bash trimmed (12,000 characters, 200 lines)")
    assert len(stub) == 300


def test_results_at_the_2000_character_floor_are_never_trimmed(tmp_path: Path) -> None:
    """In a batch, an old result of 2,000 characters stays; one of 2,001 beside it is trimmed."""
    old = [lines(2_000, "f"), lines(2_001, "g"), lines(40_000, "h")]
    msgs = conversation([old] + [[f"ok {r}"] for r in range(6)])
    with Budget.open(tmp_path / "s") as b:
        b.prepare(msgs[:-2], now=0)
        req = b.prepare(msgs, now=300)
    assert req.report.staleness_reason == "cold_cache"
    assert trimmed(req) == ["call_0_1", "call_0_2"]
    assert shown(req, "call_0_0") == old[0]


# --- Read-back ---------------------------------------------------------------------------------


def test_a_read_back_page_holds_909_rows_of_22_characters(tmp_path: Path) -> None:
    """read_page_chars 20,000: rows of 6-digit number, tab, 14 characters and a newline (22 each).

    909 x 22 = 19,998 fits and 910 x 22 = 20,020 does not, so a read without a limit shows lines
    1-909 and says where to go on.
    """
    text = big(3_334)
    with Budget.open(tmp_path / "s") as b:
        b.prepare(conversation([[text]]), now=0)
        page = b.handle_read_tool({"ref": ref_for(text)})
    rows = page.splitlines()
    assert rows[0] == f"[toolbudget] ref {ref_for(text)}: lines 1-909 of 3334"
    assert rows[-1] == "[more: call again with offset=909]"
    assert len(rows) == 911 and rows[-2].endswith("\tout line 00908")
