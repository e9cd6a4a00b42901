"""The prompt-cache simulator on hand-made request sequences, with figures worked out by hand."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import xxhash

from benchmarks.cache import CacheResult, CacheRules, CacheSim, Segment, Segmenter, segment_of
from budget._errors import ConfigError


def assert_result(got: CacheResult, expected: CacheResult) -> None:
    """Equal results, the billed figure compared with float tolerance."""
    assert replace(got, billed_tokens=0.0) == replace(expected, billed_tokens=0.0)
    assert got.billed_tokens == pytest.approx(expected.billed_tokens)


def seg(name: str, tokens: int) -> Segment:
    """A segment whose content is identified by ``name``."""
    return Segment(xxhash.xxh3_128_digest(name.encode()), tokens)


S = seg("system", 600)
A = seg("a", 500)
B = seg("b", 300)
C = seg("c", 200)
X = seg("x", 500)


def test_anthropic_writes_whole_request_then_reads_breakpoint_prefix() -> None:
    """Anthropic: the first request is written whole, the next reads it and writes its tail."""
    sim = CacheSim("anthropic")
    # 600 + 500 = 1100 >= 1024: all written. billed = 1.25 * 1100 = 1375.
    first = sim.feed([S, A], 0.0)
    assert first == CacheResult(1100, 0, 1100, 0, 1375.0, False)
    # Reads the 1100 written before, writes B's 300: 0.1*1100 + 1.25*300 = 110 + 375 = 485.
    second = sim.feed([S, A, B], 100.0)
    assert second == CacheResult(1400, 1100, 300, 0, 485.0, False)
    # Same again plus C: reads 1400, writes 200: 140 + 250 = 390.
    third = sim.feed([S, A, B, C], 200.0)
    assert third == CacheResult(1600, 1400, 200, 0, 390.0, False)


def test_anthropic_only_breakpoints_are_hit() -> None:
    """Anthropic: a prefix that never ended a request (S alone) is not a cache entry."""
    sim = CacheSim("anthropic")
    sim.feed([S, A, B], 0.0)
    # [S, X] shares only S (600) with the earlier request, and S never ended a request:
    # nothing read, 1100 written (1375).
    result = sim.feed([S, X], 1.0)
    assert result == CacheResult(1100, 0, 1100, 0, 1375.0, True)


def test_anthropic_ttl_expiry_and_refresh_on_read() -> None:
    """Anthropic: entries die 300 s after their last write or read; a read keeps one alive."""
    sim = CacheSim("anthropic")
    sim.feed([S, A], 0.0)
    # At 299 s the [S, A] entry (written at 0) is alive: read 1100, write 300; the read
    # refreshes [S, A] to 299 and [S, A, B] is written at 299.
    assert sim.feed([S, A, B], 299.0).cached_tokens == 1100
    # At 598 s both are 299 s old: [S, A, B] is read (1400), [S, A, B, C] written (200).
    assert sim.feed([S, A, B, C], 598.0) == CacheResult(1600, 1400, 200, 0, 390.0, False)
    # 300 s after the last touch (598 + 300) everything has expired: all 1600 written again,
    # billed 1.25 * 1600 = 2000.
    assert sim.feed([S, A, B, C], 898.0) == CacheResult(1600, 0, 1600, 0, 2000.0, False)


def test_anthropic_without_timestamps_never_expires() -> None:
    """Anthropic: with no timestamps entries live forever."""
    sim = CacheSim("anthropic")
    sim.feed([S, A], None)
    assert sim.feed([S, A, B], None).cached_tokens == 1100


def test_anthropic_minimum_size() -> None:
    """Anthropic: a request under 1,024 tokens is neither read nor written."""
    sim = CacheSim("anthropic")
    small = seg("small", 400)
    # 600 + 400 = 1000 < 1024: billed at base price, nothing stored.
    assert sim.feed([S, small], 0.0) == CacheResult(1000, 0, 0, 1000, 1000.0, False)
    # 1000 + 200 = 1200: nothing to read (the small request was not written), all written:
    # 1.25 * 1200 = 1500.
    assert sim.feed([S, small, C], 1.0) == CacheResult(1200, 0, 1200, 0, 1500.0, False)
    # A lower configured minimum caches the small request.
    low = CacheSim("anthropic", CacheRules(min_tokens=500))
    low.feed([S, small], 0.0)
    assert low.feed([S, small, C], 1.0).cached_tokens == 1000


def test_anthropic_lookback_limits_how_far_back_a_breakpoint_is_found() -> None:
    """Anthropic: an earlier breakpoint more than ``lookback`` segments back is not found."""
    rules = CacheRules(lookback=2)
    sim = CacheSim("anthropic", rules)
    sim.feed([S, A], 0.0)
    # The [S, A] breakpoint ends 3 segments before the end of [S, A, B, C, X]: out of reach.
    assert sim.feed([S, A, B, C, X], 1.0).cached_tokens == 0
    sim3 = CacheSim("anthropic", CacheRules(lookback=3))
    sim3.feed([S, A], 0.0)
    # With lookback 3 it is within reach: 1100 read.
    assert sim3.feed([S, A, B, C, X], 1.0).cached_tokens == 1100


def test_anthropic_a_marked_system_prompt_is_read_when_the_messages_changed() -> None:
    """Anthropic with ``system_breakpoint``: a request whose messages changed reads the header's
    own entry (1,500 tokens) and writes the rest; without the mark it writes everything."""
    header = seg("system and tools", 1500)
    for marked, read in ((True, 1500), (False, 0)):
        sim = CacheSim("anthropic", CacheRules(system_breakpoint=marked))
        sim.feed([header, A, B], 0.0)
        changed = sim.feed([header, X, B], 1.0)
        # 1500 + 500 + 300 = 2300: the header read (0.1x) when marked, the rest written (1.25x).
        assert changed == CacheResult(
            2300, read, 2300 - read, 0, 0.1 * read + 1.25 * (2300 - read), True
        )
        # The conversation's own entry still wins when it is found: all 2300 read.
        assert sim.feed([header, X, B], 2.0).cached_tokens == 2300


def test_anthropic_a_marked_system_prompt_under_the_minimum_or_expired_is_not_read() -> None:
    """The header's entry obeys the minimum size and the TTL as any entry does."""
    small = CacheSim("anthropic", CacheRules(system_breakpoint=True))
    small.feed([S, A, B], 0.0)
    assert small.feed([S, X, B], 1.0).cached_tokens == 0  # S is 600 < 1,024 tokens
    header = seg("system and tools", 1500)
    late = CacheSim("anthropic", CacheRules(system_breakpoint=True))
    late.feed([header, A], 0.0)
    assert late.feed([header, X], 400.0).cached_tokens == 0  # 400 s > the 300 s TTL


def test_prefix_break_is_measured_on_the_previous_request() -> None:
    """A request that does not start with the whole previous request is a prefix break."""
    sim = CacheSim("openai")
    assert not sim.feed([S, A], None).prefix_break
    assert not sim.feed([S, A, B], None).prefix_break
    assert sim.feed([S, X, B], None).prefix_break
    assert sim.feed([S], None).prefix_break  # shorter than the previous request
    assert not sim.feed([S, C], None).prefix_break


def test_openai_rounds_to_128_token_steps_above_1024() -> None:
    """OpenAI: cached = 1024 + k*128 of the longest common prefix, no write surcharge."""
    sim = CacheSim("openai")
    s = seg("s", 1000)
    a = seg("a", 100)
    b = seg("b", 500)
    c = seg("c", 10)
    # Nothing earlier: all 1100 at base price.
    assert sim.feed([s, a], 0.0) == CacheResult(1100, 0, 0, 1100, 1100.0, False)
    # Common prefix 1100 -> 1024 + (76 // 128) * 128 = 1024. billed = 576 + 102.4 = 678.4.
    assert_result(sim.feed([s, a, b], 10.0), CacheResult(1600, 1024, 0, 576, 678.4, False))
    # Common prefix 1600 -> 1024 + (576 // 128) * 128 = 1536. billed = 74 + 153.6 = 227.6.
    assert_result(sim.feed([s, a, b, c], 20.0), CacheResult(1610, 1536, 0, 74, 227.6, False))
    # A request diverging after s shares 1000 < 1024 tokens: nothing cached.
    assert sim.feed([s, b], 30.0).cached_tokens == 0


def test_openai_ttl_and_google_uses_openai_rules() -> None:
    """OpenAI rules apply to Google too, and expire after 300 s without use."""
    sim = CacheSim("google")
    s = seg("s", 2000)
    sim.feed([s], 0.0)
    # 2000 common -> 1024 + (976 // 128) * 128 = 1920.
    assert sim.feed([s, seg("t", 5)], 299.0).cached_tokens == 1920
    # Last used at 299: alive until 599.
    assert sim.feed([s], 598.0).cached_tokens == 1920
    assert sim.feed([s], 898.0).cached_tokens == 0


def test_rules_are_validated() -> None:
    """Invalid cache settings raise ConfigError naming the field."""
    with pytest.raises(ConfigError, match="ttl"):
        CacheRules(ttl=0)
    with pytest.raises(ConfigError, match="step"):
        CacheRules(step=0)
    with pytest.raises(ConfigError, match="provider"):
        CacheSim("mistral")  # type: ignore[arg-type]


def _chars4(obj: Any) -> int:
    return len(str(obj)) // 4


def test_segment_hash_is_canonical_and_counter_is_injected() -> None:
    """Segments hash sorted-key JSON, and their token count comes from the injected counter."""
    one = segment_of({"role": "user", "content": "abcd" * 10}, _chars4)
    two = segment_of({"content": "abcd" * 10, "role": "user"}, _chars4)
    assert one.digest == two.digest
    assert len(one.digest) == 16
    assert one.tokens == len(str({"role": "user", "content": "abcd" * 10})) // 4
    assert segment_of({"role": "user", "content": "abce"}, _chars4).digest != one.digest


def test_segmenter_reuses_known_objects_and_prepends_header() -> None:
    """The segmenter puts system+tools first and does not re-count a message object it saw."""
    calls: list[Any] = []

    def counting(obj: Any) -> int:
        calls.append(obj)
        return 7

    segmenter = Segmenter(counting)
    m1 = {"role": "user", "content": "hi"}
    m2 = {"role": "assistant", "content": "yo"}
    first = segmenter.segments([m1], system="sys", tools=[{"name": "t"}])
    assert len(first) == 2
    assert first[0] == segment_of({"system": "sys", "tools": [{"name": "t"}]}, lambda _: 7)
    calls.clear()
    second = segmenter.segments([m1, m2], system="sys", tools=[{"name": "t"}])
    # Only the header and the new message are counted again.
    assert calls == [{"system": "sys", "tools": [{"name": "t"}]}, m2]
    assert second[1] == first[1]
