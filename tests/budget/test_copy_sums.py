"""The request copy's running token sums are kept incrementally (``Copies._count_out``: a copy
made again shifts the sums after it, a copy left alone keeps the tokens last counted): after
every request they equal the sums counted from scratch over the copy, and a session reopened
from its directory sends the same copy."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import Budget
from tests._lanes import examples
from tests.strategies import SMALL, conversations


def _recounted(session: Budget, messages: list[Any]) -> list[int]:
    """The copy's running sums counted from scratch: each copy's tokens, the caller's own
    message counted as scanned."""
    parts = session._turns.parts
    history, outputs = parts.history, parts.copies.outputs
    sums = [0]
    for i, out in enumerate(outputs):
        tokens = history.tokens_in(i) if out is messages[i] else history.estimate(out, bulk=False)
        sums.append(sums[-1] + tokens)
    return sums


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(history=conversations(max_rounds=14), data=st.data())
def test_the_copy_sums_equal_a_recount_after_every_request(
    tmp_path_factory: pytest.TempPathFactory, history: list[Any], data: st.DataObject
) -> None:
    """Requests over a growing history, some after a pause over the cache's TTL (batches trim
    old results, several at once): the sums kept equal a recount after each, and a session
    reopened before the last request sends the same copy."""
    path = tmp_path_factory.mktemp("s")
    ends = sorted(data.draw(st.sets(st.integers(2, len(history)), min_size=1, max_size=6)))
    gaps = data.draw(st.lists(st.sampled_from([1.0, 400.0]), min_size=len(ends)))
    now, sent = 0.0, b""
    with Budget.open(path, SMALL) as session:
        for end, gap in zip(ends, gaps, strict=False):
            now += gap
            messages = history[:end]
            sent = orjson.dumps(session.prepare(messages, now=now).messages)
            assert session._turns.parts.copies.cum_out == _recounted(session, messages)
    with Budget.open(path, SMALL) as reopened:
        again = reopened.prepare(history[: ends[-1]], now=now)
        assert orjson.dumps(again.messages) == sent
