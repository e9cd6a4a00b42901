"""The providers' published prompt-cache prices by model (``budget.policy.price_list``), a
session told its model pricing with them unless the caller set prices of its own, and writes
made for an hour (Anthropic's 1-hour entries: 2x, and a cache warm for an hour)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from budget import Budget, BudgetConfig
from budget.policy import ANTHROPIC_PRICES, PriceList, price_list
from tests.strategies import chat_conversation, conversation


@pytest.mark.parametrize(
    ("model", "write", "read", "explicit"),
    [
        ("claude-sonnet-4-5-20250929", 1.25, 0.1, True),
        ("anthropic/claude-3-5-sonnet-20241022", 1.25, 0.1, True),
        ("gpt-5.5", 1.0, 0.1, False),
        ("gpt-5-mini", 1.0, 0.1, False),
        ("gpt-4.1-mini", 1.0, 0.25, False),
        ("openai/gpt-4o-mini", 1.0, 0.5, False),
        ("gpt-4o-2024-08-06", 1.0, 0.5, False),
        ("o3-mini", 1.0, 0.5, False),
        ("o1-preview", 1.0, 0.5, False),
        ("o3", 1.0, 0.25, False),
        ("openrouter/o4-mini", 1.0, 0.25, False),
        ("openai/o4-mini-high", 1.0, 0.25, False),
        ("google/gemini-3-pro-preview", 1.0, 0.1, False),
        ("gemini-2.5-flash", 1.0, 0.1, False),
        ("gemini-2.0-flash", 1.0, 0.25, False),
    ],
)
def test_each_makers_list_by_model_name(
    model: str, write: float, read: float, explicit: bool
) -> None:
    """A model name, bare or behind a router's prefix, gets its maker's published prices:
    Anthropic 1.25 / 0.1 with explicit breakpoints, OpenAI and Google automatic caching with no
    write surcharge and the family's cached-input price."""
    got = price_list(model)
    assert (got.write, got.read, got.explicit) == (write, read, explicit)


@pytest.mark.parametrize("model", [None, "", "openrouter/llama-4-maverick", "opus-mistral-7b"])
def test_a_model_whose_maker_the_name_does_not_tell_is_priced_as_anthropic(
    model: str | None,
) -> None:
    """Unknown: Anthropic's prices, the careful side (a read price taken too low leaves a saving
    unclaimed; one taken too high would trim what never pays back), marked as not known; an
    unlisted OpenAI model caches automatically at the careful 0.1x."""
    got = price_list(model)
    assert (got.write, got.read, got.write_long, got.explicit) == (1.25, 0.1, 2.0, True)
    assert not got.known and ANTHROPIC_PRICES.known
    other = price_list("gpt-3.5-turbo")
    assert (other.write, other.read, other.explicit, other.known) == (1.0, 0.1, False, False)


def test_the_callers_prices_replace_the_lists() -> None:
    """A write or read price the caller set wins over the list; the other stays the list's; a
    write price sets the 1-hour write in the list's proportion."""
    assert price_list("gpt-4o", read=0.1) == PriceList(
        1.0, 0.1, 1.0, explicit=False, source="openai gpt-4o, the caller's prices"
    )
    assert price_list(None, write=2.0).write == 2.0
    assert price_list(None, write=2.0).read == 0.1
    # The 1-hour write in the list's proportion: 1.25 stays 2.0 (the old default written out).
    assert price_list("claude-opus-4-7", write=1.25).write_long == 2.0
    assert price_list("claude-opus-4-7", write=2.5).write_long == 4.0


def test_the_caching_style_is_the_callers_else_the_makers_else_the_messages_api() -> None:
    """The caller's ``breakpoints`` restyle any list (automatic: no write surcharge; explicit:
    Anthropic's writes); a name that tells its maker keeps the maker's style whatever the
    messages' API; a name that does not takes that API's (OpenAI's formats: automatic)."""
    auto = price_list("claude-sonnet-4-5", breakpoints=False)
    assert (auto.write, auto.read, auto.write_long, auto.explicit) == (1.0, 0.1, 1.0, False)
    marked = price_list("gpt-4o", breakpoints=True)
    assert (marked.write, marked.read, marked.write_long, marked.explicit) == (1.25, 0.5, 2.0, True)
    assert price_list("claude-sonnet-4-5", wire=False) == ANTHROPIC_PRICES
    assert price_list("gpt-4o", wire=True).explicit is False
    unknown = price_list(None, wire=False)
    assert (unknown.write, unknown.read, unknown.explicit, unknown.known) == (
        1.0,
        0.1,
        False,
        False,
    )
    assert price_list(None, wire=False, breakpoints=True).explicit is True
    # The caller's own write price wins over the style's.
    assert price_list(None, wire=False, write=1.1).write == 1.1


def _saving_per_hidden_token(
    tmp_path: Path, messages: Any = None, **cfg: Any
) -> tuple[float, float]:
    """(the verdict's saving per hidden token, its expected later requests) for a first request
    whose one result (10,000 characters) the cost model weighs."""
    text = "".join(f"{i:05d} " + "y" * 53 + "\n" for i in range(166))  # 9,960 characters
    with Budget.open(tmp_path, BudgetConfig(fsync=False, **cfg)) as session:
        msgs = (messages or conversation)([[text]])
        (decision,) = session.prepare(msgs, now=0).report.decisions
    verdict = decision.cost
    assert verdict is not None and verdict.reclaim_tokens > 0
    return verdict.saving / verdict.reclaim_tokens, verdict.expected_requests


def test_a_session_prices_with_its_models_list_unless_the_caller_set_prices(
    tmp_path: Path,
) -> None:
    """Before any usage a fresh result's saving is its hidden tokens at the write price now plus
    the read price on each later request: Anthropic's 1.25 + 0.1n for Claude (and for a model
    not given), GPT-4o's 1.0 + 0.5n, and the caller's read price over the model's."""
    claude, n = _saving_per_hidden_token(tmp_path / "a", model="claude-sonnet-4-5")
    assert claude == pytest.approx(1.25 + 0.1 * n)
    assert _saving_per_hidden_token(tmp_path / "b")[0] == pytest.approx(claude)
    gpt, m = _saving_per_hidden_token(tmp_path / "c", model="gpt-4o")
    assert m == n
    assert gpt == pytest.approx(1.0 + 0.5 * n)
    own, _ = _saving_per_hidden_token(tmp_path / "d", model="gpt-4o", cache_read_price=0.1)
    assert own == pytest.approx(1.0 + 0.1 * n)


def test_a_session_of_openai_messages_and_no_known_model_prices_automatic_caching(
    tmp_path: Path,
) -> None:
    """Chat Completions messages with no model given: automatic caching's write at the base
    price (1.0 + 0.1n, not Anthropic's 1.25 + 0.1n), unless the caller says breakpoints."""
    claude, n = _saving_per_hidden_token(tmp_path / "a")
    chat, m = _saving_per_hidden_token(tmp_path / "b", chat_conversation)
    assert m == n
    assert claude == pytest.approx(1.25 + 0.1 * n)
    assert chat == pytest.approx(1.0 + 0.1 * n)
    marked, _ = _saving_per_hidden_token(tmp_path / "c", chat_conversation, cache_breakpoints=True)
    assert marked == pytest.approx(claude)


def _usage(written: int, one_hour: int | None) -> dict[str, Any]:
    """An Anthropic usage writing ``written`` tokens, ``one_hour`` of them for an hour (None:
    no ``cache_creation`` breakdown, as older API versions answer)."""
    usage: dict[str, Any] = {
        "input_tokens": 10,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": written,
        "output_tokens": 40,
    }
    if one_hour is not None:
        usage["cache_creation"] = {
            "ephemeral_5m_input_tokens": written - one_hour,
            "ephemeral_1h_input_tokens": one_hour,
        }
    return usage


def test_anthropic_usage_tells_the_writes_made_for_an_hour() -> None:
    """``cache_creation.ephemeral_1h_input_tokens`` is read (never above the writes); without
    the breakdown none is; a count that is not one is refused."""
    from budget import BudgetError
    from budget.tokens._usage import normalize_usage

    def one_hour(usage: dict[str, Any]) -> int:
        got = normalize_usage(usage)
        assert got is not None
        return got.cache_write_1h_tokens

    assert one_hour(_usage(9_000, 9_000)) == 9_000
    assert one_hour(_usage(9_000, 1_000)) == 1_000
    assert one_hour(_usage(9_000, None)) == 0
    assert (
        one_hour({**_usage(100, None), "cache_creation": {"ephemeral_1h_input_tokens": 500}}) == 100
    )
    with pytest.raises(BudgetError, match="ephemeral_1h_input_tokens"):
        one_hour({**_usage(100, None), "cache_creation": {"ephemeral_1h_input_tokens": -1}})


def test_writes_made_for_an_hour_cost_twice_and_keep_the_cache_warm_an_hour() -> None:
    """A usage writing mostly for an hour: explicit writes priced at the list's 2x and a TTL of
    an hour; mostly for 5 minutes, or automatic caching: the list's write price, 300 s."""
    from budget.policy import ONE_HOUR_S, Observed, prices_for

    listed = price_list("claude-opus-4-7")
    cfg: dict[str, Any] = {
        "write": listed.write, "read": listed.read, "ttl_s": 300.0,
        "write_long": listed.write_long,
    }  # fmt: skip

    def seen(written: int, one_hour: int, reads: int = 1) -> Observed:
        return Observed(chances=1, reads=reads).after_usage(
            prompt=20_000, cache_read=0, cache_write=written, answered=1, ttl_s=300.0,
            cache_write_1h=one_hour,
        )  # fmt: skip

    long = prices_for(seen(9_000, 6_000), **cfg)
    assert long.ttl_s == ONE_HOUR_S == 3_600.0
    assert (long.regime, long.write, long.explicit) == ("cached", 2.0, True)
    short = prices_for(seen(9_000, 4_000), **cfg)
    assert (short.ttl_s, short.write) == (300.0, 1.25)
    # Before any read: priced as cached (the careful side), at the hour's write price.
    assert prices_for(seen(9_000, 9_000, reads=0), **cfg).write == 2.0
    # Automatic caching (no write ever reported) writes at the base price however long it keeps.
    automatic = Observed(chances=2, reads=2, warm_pause_s=ONE_HOUR_S)
    assert prices_for(automatic, **cfg).write == 1.0
    assert listed.bill(10, 1_000, 9_000, 6_000) == 10 + 100 + 3_000 * 1.25 + 6_000 * 2.0


def test_a_pause_of_minutes_is_no_cold_cache_when_the_writes_live_an_hour(tmp_path: Path) -> None:
    """Nine rounds of 12,000 characters, then a 10-minute pause: with 5-minute writes the cache
    is cold and a free batch trims the old rounds; with 1-hour writes it is still warm (an hour
    not over), so no cold-cache batch runs."""
    msgs = conversation([["".join(chr(97 + r) * 59 + "\n" for _ in range(200))] for r in range(9)])
    reasons = {}
    for name, one_hour in (("5m", 0), ("1h", 20_000)):
        with Budget.open(tmp_path / name, BudgetConfig(fsync=False)) as session:
            session.prepare(msgs[:-2], now=0)
            req = session.prepare(msgs, usage=_usage(20_000, one_hour), now=600)
            reasons[name] = req.report.staleness_reason if req.report.staleness_ran else None
    assert reasons == {"5m": "cold_cache", "1h": None}


def test_a_session_spills_for_the_requests_until_the_stale_trim(tmp_path: Path) -> None:
    """A result kept whole would be trimmed once it leaves the protected rounds, as soon as that
    pays back (``stale_trim_after``): after 30 rounds of short outputs, one of 9,960 characters
    is priced as carried for fewer requests than the session expects to make, and for fewer
    still at GPT-4o's 0.5x reads than at Claude's 0.1x (its re-write pays back sooner)."""
    text = "".join(f"{i:05d} " + "y" * 53 + "\n" for i in range(166))
    msgs = conversation([[f"ok {r} " + "z" * 400] for r in range(30)] + [[text]])
    carried = {}
    for model in ("gpt-4o", "claude-sonnet-4-5"):
        with Budget.open(tmp_path / model, BudgetConfig(fsync=False, model=model)) as session:
            for end in range(3, len(msgs) + 1, 2):
                req = session.prepare(msgs[:end], now=float(end))
        verdict = next(d.cost for d in req.report.decisions if d.call_id == "call_30_0")
        assert verdict is not None and verdict.reclaim_tokens > 0
        listed = price_list(model)
        # saving = hidden x (write + read x requests carried): the requests carried.
        n = (verdict.saving / verdict.reclaim_tokens - listed.write) / listed.read
        carried[model] = n
        assert 5 < n < verdict.expected_requests
    assert carried["gpt-4o"] < carried["claude-sonnet-4-5"]
