"""Token estimates persisted beside the log (issue 14, item 2): reused after a resume, never
trusted blindly, and the same bytes and decisions with or without them."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

import budget.tokens._estimates_cache as cache_module
import budget.tokens._textunits as textunits_module
import budget.tokens._tokens as tokens_module
from budget import Budget, Prepared
from budget.session._history import RESCAN
from budget.tokens._estimates_cache import (
    CACHE_MIN_CHARS,
    SIDECAR,
    EstimateCache,
    fingerprint,
)
from budget.tokens._tokens import DEFAULT_PROFILE, tokenizer_profile
from spill import LocalStore, gc_sessions
from spill._errors import StoreError
from tests._shared import SharedTraces

Message = dict[str, Any]


def _round(r: int) -> list[Message]:
    """A round with two results: one kept (3 KB), one over the cap every fifth round (spilled)."""
    ids = [f"toolu_{r:05d}_{j}" for j in range(2)]
    call: Message = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": c, "name": "bash", "input": {"n": r}} for c in ids],
    }
    blocks = []
    for j, cid in enumerate(ids):
        size = 51_000 if (r % 5 == 0 and j == 0) else 3_000
        line = f"{r:05d}:{j} collected 12 items; src/app/models.py line {r} passed Ünïcode 中文\n"
        blocks.append({"type": "tool_result", "tool_use_id": cid, "content": (line * size)[:size]})
    return [call, {"role": "user", "content": blocks}]


def _history(rounds: int) -> list[Message]:
    out: list[Message] = [{"role": "user", "content": "Find the regression."}]
    for r in range(rounds):
        out += _round(r)
    return out


def _build(path: Path, history: list[Message]) -> None:
    """A session that budgeted ``history`` in requests of 10 rounds, then closed."""
    with Budget.open(path, {"fsync": False}) as session:
        for end in range(21, len(history) + 1, 20):
            session.prepare(history[:end], now=float(end))


def _resumed_first(path: Path, history: list[Message]) -> Prepared:
    with Budget.open(path, {"fsync": False}) as session:
        return session.prepare(history, now=1e6)


def _same(a: Prepared, b: Prepared) -> None:
    assert a.messages == b.messages
    assert a.report.decisions == b.report.decisions
    for field in ("tokens_before", "tokens_after", "tokens_after_raw", "reclaimable_tokens"):
        assert getattr(a.report, field) == getattr(b.report, field), field


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Lengths of the texts the character-class estimator reads, as it is called."""
    seen: list[int] = []
    real = textunits_module.estimate_text_tokens

    def counting(text: str, profile: Any = DEFAULT_PROFILE) -> int:
        seen.append(len(text))
        return real(text, profile)

    monkeypatch.setattr(textunits_module, "estimate_text_tokens", counting)
    return seen


def test_resumed_first_prepare_estimates_no_cached_text_again(
    tmp_path: Path, counted: list[int]
) -> None:
    """After a resume, no text the closed session estimated is estimated again: the first
    prepare reads every long text's estimate from the sidecar (it re-estimated all on ee5f395)."""
    history = _history(60)
    _build(tmp_path / "s", history)
    assert (tmp_path / "s" / SIDECAR).is_file()
    assert any(n >= CACHE_MIN_CHARS for n in counted)  # the hook sees the estimator's calls
    counted.clear()
    _resumed_first(tmp_path / "s", history)
    long_ones = [n for n in counted if n >= CACHE_MIN_CHARS]
    # Only the fingerprint's probe text may be estimated at open; it is shorter than the floor.
    assert long_ones == []


@pytest.fixture
def walked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Roles of the messages the structural estimator walks, as it is called on them."""
    seen: list[str] = []
    real = tokens_module._value_tokens

    def counting(value: Any, text: Any, fr: Any) -> int:
        if type(value) is dict and "role" in value:
            seen.append(str(value["role"]))
        return real(value, text, fr)

    monkeypatch.setattr(tokens_module, "_value_tokens", counting)
    return seen


def test_resumed_first_prepare_walks_no_message_the_closed_session_estimated(
    tmp_path: Path, walked: list[str]
) -> None:
    """After a resume, no message of the history but the last ones, as given or as its
    decisions show it, is walked again: the first prepare reads their estimates from the
    sidecar by the hash of their JSON (on ad53091 it walked all 121 messages and the 60
    rewritten ones)."""
    history = _history(60)
    _build(tmp_path / "s", history)
    assert walked  # the hook sees the estimator's walks
    shutil.copytree(tmp_path / "s", tmp_path / "ref")
    (tmp_path / "ref" / SIDECAR).unlink()
    expected = _resumed_first(tmp_path / "ref", history)  # every message walked again
    with Budget.open(tmp_path / "s", {"fsync": False}) as session:
        walked.clear()  # opening walks the fingerprint's probe messages only
        got = session.prepare(history, now=1e6)
        # Only the last RESCAN messages (callers edit them in place), as given and as shown.
        assert len(walked) <= 2 * RESCAN
    _same(got, expected)


def test_a_message_key_never_answers_for_a_text() -> None:
    """A message's key is seeded apart from texts': a text equal to a message's JSON misses."""
    cache = EstimateCache(b"12345678")
    message = "m" * 300
    as_json = f'"{message}"'  # the bytes orjson gives for the message
    assert cache.tokens(as_json, lambda _: 11) == 11
    assert cache.message_tokens(message, lambda _: 22) == 22
    assert cache.message_tokens(message, lambda _: 33) == 22  # its own entry now
    assert cache.tokens(as_json, lambda _: 44) == 11


def test_a_message_that_is_not_plain_json_is_estimated_every_time() -> None:
    """A message orjson would serialize otherwise than the estimator weighs it (a dict subclass,
    a dataclass, an int beyond 64 bits) is estimated each time and never kept, also at close."""

    class Message(dict[str, Any]):
        pass

    cache = EstimateCache(b"12345678")
    calls: list[object] = []

    def estimate(value: object) -> int:
        calls.append(value)
        return 5

    for value in (Message(role="user", content="x"), {"role": "user", "n": 1 << 70}):
        assert cache.message_tokens(value, estimate) == 5
        assert cache.message_tokens(value, estimate) == 5
    assert len(calls) == 4
    cache.keep_messages([(Message(role="user", content="x"), 5), ({"n": 1 << 70}, 5)])
    assert len(cache) == 0
    cache.keep_messages([({"role": "user", "content": "x"}, 9)])
    assert cache.message_tokens({"role": "user", "content": "x"}, estimate) == 9
    assert len(calls) == 4


def test_bytes_and_decisions_identical_with_and_without_the_cache(tmp_path: Path) -> None:
    """The first request after a resume gives the same copy, decisions and token figures with
    the sidecar, without it, and in the session that never closed."""
    history = _history(80)
    _build(tmp_path / "a", history)
    _build(tmp_path / "b", history)
    (tmp_path / "b" / SIDECAR).unlink()
    grown = history + _round(80)
    with_cache = _resumed_first(tmp_path / "a", grown)
    without = _resumed_first(tmp_path / "b", grown)
    with Budget.open(tmp_path / "live", {"fsync": False}) as live:
        for end in range(21, len(history) + 1, 20):
            live.prepare(history[:end], now=float(end))
        went_on = live.prepare(grown, now=1e6)
    _same(with_cache, without)
    _same(with_cache, went_on)


def test_real_trace_resumes_identically_with_the_cache(
    tmp_path: Path, shared_trace_set: SharedTraces
) -> None:
    """On a recorded agent trace, a resume with the sidecar gives the copy one without it gives."""
    traces, _ = shared_trace_set
    trace = max(traces, key=lambda t: len(t.messages))
    history = list(trace.messages)
    half = history[: max(2, len(history) // 2)]
    for name in ("with", "without"):
        with Budget.open(tmp_path / name, {"fsync": False, "model": trace.model}) as session:
            session.prepare(half, now=0.0)
    (tmp_path / "without" / SIDECAR).unlink(missing_ok=True)
    out = []
    for name in ("with", "without"):
        with Budget.open(tmp_path / name, {"fsync": False, "model": trace.model}) as session:
            out.append(session.prepare(history, now=1e6))
    _same(out[0], out[1])


@pytest.mark.parametrize("damage", ["truncated", "flipped", "empty", "garbage"])
def test_torn_or_damaged_sidecar_is_ignored(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture, structlog_defaults: None
) -> None:
    """A torn, flipped, empty or foreign sidecar is ignored (logged), and the copy is the same."""
    history = _history(40)
    _build(tmp_path / "ref", history)
    expected = _resumed_first(tmp_path / "ref", history)
    _build(tmp_path / "s", history)
    path = tmp_path / "s" / SIDECAR
    data = path.read_bytes()
    damaged = {
        "truncated": data[: len(data) // 2],
        "flipped": data[:40] + bytes([data[40] ^ 1]) + data[41:],
        "empty": b"",
        "garbage": os.urandom(len(data)),
    }[damage]
    path.write_bytes(damaged)
    # structlog at its defaults: a CLI test in the same worker may have configured it with a
    # level filter that capture_logs keeps (it swaps the processors only).
    with caplog.at_level(logging.INFO, logger="toolbudget"), capture_logs() as logs:
        got = _resumed_first(tmp_path / "s", history)
    _same(got, expected)
    assert any(e["event"] == "toolbudget.session.estimates_ignored" for e in logs)


def test_sidecar_of_another_estimator_is_stale(tmp_path: Path, counted: list[int]) -> None:
    """A sidecar written for another tokenizer family is not used: every text is estimated again."""
    history = _history(20)
    _build(tmp_path / "s", history)
    counted.clear()
    with Budget.open(tmp_path / "s", {"fsync": False, "model": "gpt-4o"}) as session:
        session.prepare(history, now=1e6)
    assert any(n >= CACHE_MIN_CHARS for n in counted)


def test_a_wrong_entry_cannot_answer_for_another_text() -> None:
    """Entries are keyed by the text's hash: an edit of the text (same length) misses the cache."""
    profile = tokenizer_profile(None)
    fp = fingerprint(profile, profile.text_tokens)
    cache = EstimateCache(fp)
    text = "x" * 1_000
    assert cache.tokens(text, profile.text_tokens) == profile.text_tokens(text)
    edited = "y" + text[1:]
    assert cache.tokens(edited, lambda _: 7) == 7  # computed, not the entry of ``text``
    decoded = EstimateCache.decode(cache.encode(), fp)
    assert decoded is not None and len(decoded) == 2
    assert EstimateCache.decode(cache.encode(), b"\0" * 8) is None


def test_exact_counter_sessions_keep_no_sidecar(tmp_path: Path) -> None:
    """A session counting with the caller's tokenizer writes no sidecar: its answers cannot be
    fingerprinted, so they are never reused."""
    with Budget.open(tmp_path / "s", {"fsync": False}, text_tokens=lambda t: len(t) // 3) as s:
        s.prepare(_history(5), now=0.0)
    assert not (tmp_path / "s" / SIDECAR).exists()


def test_sidecar_names_are_checked_and_symlinks_refused(tmp_path: Path) -> None:
    """Only the known sidecar names are read or written, and a planted symlink is not followed."""
    with LocalStore(tmp_path / "s") as store:
        with pytest.raises(StoreError, match="not a sidecar name"):
            store.write_sidecar("../x.bin", b"")
        with pytest.raises(StoreError, match="not a sidecar name"):
            store.read_sidecar("session.json")
        assert store.read_sidecar(SIDECAR) is None
        store.write_sidecar(SIDECAR, b"abc")
        assert store.read_sidecar(SIDECAR) == b"abc"
        assert oct((tmp_path / "s" / SIDECAR).stat().st_mode & 0o777) == "0o600"
    (tmp_path / "outside").write_bytes(b"secret")
    (tmp_path / "s" / SIDECAR).unlink()
    (tmp_path / "s" / SIDECAR).symlink_to(tmp_path / "outside")
    with LocalStore(tmp_path / "s") as store, pytest.raises(StoreError):
        store.read_sidecar(SIDECAR)


def test_gc_removes_an_old_session_with_a_sidecar(tmp_path: Path) -> None:
    """gc knows the sidecar as a session's own file: an old session holding one is removed."""
    _build(tmp_path / "root" / "old", _history(20))
    assert (tmp_path / "root" / "old" / SIDECAR).exists()
    past = 1_000_000_000
    for dirpath, dirnames, filenames in os.walk(tmp_path / "root" / "old"):
        for name in dirnames + filenames:
            os.utime(os.path.join(dirpath, name), (past, past), follow_symlinks=False)
    os.utime(tmp_path / "root" / "old", (past, past))
    gc_sessions(tmp_path / "root", older_than_s=3600)
    assert not (tmp_path / "root" / "old").exists()


def test_cache_stops_growing_at_its_cap_and_saves_periodically(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past MAX_ENTRIES texts are estimated without being kept; tick() hands the encoded cache
    to its sink once SAVE_EVERY new estimates were added, and not again until more are."""
    monkeypatch.setattr(cache_module, "MAX_ENTRIES", 2)
    monkeypatch.setattr(cache_module, "SAVE_EVERY", 2)
    saved: list[bytes] = []
    fp = b"12345678"
    cache = EstimateCache(fp, sink=saved.append)
    assert cache.tokens("a" * 300, len) == 300
    cache.tick()
    assert saved == []  # one new estimate: below SAVE_EVERY
    assert cache.tokens("b" * 301, len) == 301
    assert cache.tokens("c" * 302, len) == 302  # answered, but past the cap: not kept
    assert len(cache) == 2
    cache.tick()
    assert len(saved) == 1
    assert EstimateCache.decode(saved[0], fp) == EstimateCache.decode(cache.encode(), fp)
    cache.tick()
    cache.save()
    assert len(saved) == 1  # nothing new since
