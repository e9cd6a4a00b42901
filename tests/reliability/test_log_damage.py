"""Torn and corrupt logs, line by line: skipped with a warning naming the line, the rest restored.

A real session's decision log is damaged at every one of its lines in turn: truncated in the
middle of the record (as a crash mid-append leaves it), one byte flipped, the record duplicated,
the record rewritten under an unknown version (with a valid checksum). Each time the session
must open with a ``toolbudget.log.line_skipped`` warning naming that line, restore every other
decision, budget the conversation, lose nothing, keep appending valid records after the damage,
and resume from there showing the same bytes.
"""

from __future__ import annotations

import functools
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import xxhash
from structlog.testing import capture_logs

from budget import Budget
from budget._envelope import EMPTY_TEXT
from budget._ledger import Decision, Ledger
from spill._log import decode_log
from tests.conversations import CONFIG, Step, conversation, digest, result_texts

pytestmark = pytest.mark.slow  # replays a conversation per damaged log line

FAST = CONFIG.model_copy(update={"fsync": False})
SEED, ROUNDS = 6, 10


@functools.cache
def clean_session() -> tuple[Path, list[bytes], list[Any], list[Step]]:
    """A finished 10-round session (kept for the test run), its log lines and conversation."""
    msgs, steps = conversation(SEED, ROUNDS)
    path = Path(tempfile.mkdtemp(prefix="toolbudget-log-")) / "s"
    with Budget.open(path, FAST) as session:
        for step in steps:
            session.prepare(msgs[: step.length], usage=step.usage, now=step.now)
    lines = (path / "decisions.jsonl").read_bytes().splitlines(keepends=True)
    return path, lines, msgs, steps


def reversion(line: bytes) -> bytes:
    """The same record under version 2, with a checksum that matches."""
    record = orjson.loads(line)
    del record["crc"]
    record["v"] = 2
    payload = orjson.dumps(record, option=orjson.OPT_SORT_KEYS)
    return b'%s,"crc":"%s"}\n' % (payload[:-1], xxhash.xxh32_hexdigest(payload).encode())


def flip(line: bytes) -> bytes:
    middle = len(line) // 2
    return line[:middle] + bytes([line[middle] ^ 0x20]) + line[middle + 1 :]


# kind -> (damage the lines at index i, the line number warned about, reason, lines restored)
Damage = Callable[[list[bytes], int], tuple[list[bytes], int, str, list[int]]]
DAMAGES: dict[str, Damage] = {
    "truncated": lambda ls, i: (
        [*ls[:i], ls[i][: len(ls[i]) // 2]],
        i + 1,
        "torn last line",
        list(range(i)),
    ),
    "flipped": lambda ls, i: (
        [*ls[:i], flip(ls[i]), *ls[i + 1 :]],
        i + 1,
        "",
        [j for j in range(len(ls)) if j != i],
    ),
    "duplicated": lambda ls, i: (
        [*ls[: i + 1], ls[i], *ls[i + 1 :]],
        i + 2,
        "duplicate of an earlier record",
        list(range(len(ls))),
    ),
    "unknown version": lambda ls, i: (
        [*ls[:i], reversion(ls[i]), *ls[i + 1 :]],
        i + 1,
        "unknown version v=2",
        [j for j in range(len(ls)) if j != i],
    ),
}


def expected_ledger(lines: list[bytes], keep: list[int]) -> Ledger:
    """The decisions the kept lines hold, frozen by the session's own rule: those after the
    last request record are a request a crash cut off, and are made again instead."""
    records = [decode_log(lines[j], source="one line")[0] for j in keep]  # surrogates untagged
    while records and records[-1].get("t") not in ("req", "ovf"):
        records.pop()
    ledger = Ledger()
    for record in records:
        if record.get("t") == "d":
            ledger.record(Decision.from_record(record))
    return ledger


@pytest.mark.parametrize("kind", list(DAMAGES))
def test_every_damaged_line_is_skipped_by_number_and_the_rest_restored(
    tmp_path: Path, kind: str, record_property: Any
) -> None:
    """For each line of a real log, damaged this way: a warning names it, every other decision
    is restored, the session budgets its conversation losing nothing, appends valid records
    after the damage, and resumes from there with the same bytes."""
    clean, lines, msgs, steps = clean_session()
    texts = result_texts(msgs)
    last = steps[-1]
    for i in range(len(lines)):
        damaged, warned, reason, keep = DAMAGES[kind](lines, i)
        path = tmp_path / f"line-{i + 1}"
        shutil.copytree(clean, path)
        (path / "decisions.jsonl").write_bytes(b"".join(damaged))
        where = f"{kind} line {i + 1}"
        with capture_logs() as logs, Budget.open(path, FAST) as session:
            skipped = [e for e in logs if e["event"] == "toolbudget.log.line_skipped"]
            assert [e["line"] for e in skipped] == [warned], where
            assert reason in skipped[0]["reason"] and skipped[0]["log_level"] == "warning", where
            expected = expected_ledger(lines, keep)
            for cid in texts:
                assert session.decision(cid) == expected.get(cid), (where, cid)
            req = session.prepare(msgs[: last.length], usage=last.usage, now=last.now + 1)
            for cid, shown in result_texts(req.messages).items():
                if shown == texts[cid] or (shown == EMPTY_TEXT and not texts[cid]):
                    continue
                d = session.decision(cid)
                assert d is not None and d.ref is not None, (where, cid)
                assert session.read(d.ref) == texts[cid], (where, cid)
        with capture_logs() as logs, Budget.open(path, FAST) as session:
            assert [e["line"] for e in logs if e["event"] == "toolbudget.log.line_skipped"] == [
                warned
            ]
            again = session.prepare(msgs[: last.length], usage=last.usage, now=last.now + 1)
        assert digest(again.messages) == digest(req.messages), where
        tail = (path / "decisions.jsonl").read_bytes().splitlines()[len(damaged) :]
        assert tail and all(json.loads(line)["crc"] for line in tail), where
    record_property(f"reliability.log_damage.{kind.replace(' ', '_')}", len(lines))
