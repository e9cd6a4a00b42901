"""From the agent's request body to the one the proxy sends upstream: the body parsed against its
conversation's last one (:mod:`budget.proxy._incremental`) and keyed to its session
(:mod:`budget.proxy._keys`), then the session's copy of its history encoded from the agent's
bytes (:mod:`budget.proxy._encode`)."""

from __future__ import annotations

from collections.abc import Mapping
from operator import is_
from typing import Any

import orjson

from budget._report import Report
from budget.proxy._encode import encode
from budget.proxy._incremental import Bodies, Parsed
from budget.proxy._keys import SESSION_HEADER, lead_of, session_key
from budget.proxy._pool import Slot
from budget.proxy._routes import RESPONSES, Api

__all__ = ["copy_body", "parse_body"]


def parse_body(
    bodies: Bodies,
    api: Api,
    headers: Mapping[str, str],
    raw: bytes,
    *,
    at_most: int | None = None,
) -> Parsed | str | None:
    """The body with its history and its session's key (``key``); or why the request is not
    budgeted. Parsed against the conversation's last body where it starts the same; None if
    that means parsing more than ``at_most`` new bytes."""
    try:
        got = bodies.parse_within(api.field, raw, at_most)
    except orjson.JSONDecodeError:
        return "body is not JSON"
    if got is None:
        return None
    parsed, prev = got
    body, history = parsed.body, parsed.history
    if history is None:
        return f"no {api.field} list"
    if api is RESPONSES:
        # The rest of the conversation is stored upstream (a response to go on from, or a
        # conversation whose items the API puts before these): this is not the whole history.
        for stored in ("previous_response_id", "conversation"):
            if body.get(stored) is not None:
                return stored
    explicit = headers.get(SESSION_HEADER)
    # The key depends on the header, the body's other keys and the first messages: where those
    # are the very objects the last body had, it is the last body's key.
    key = parsed.key_for(explicit, prev) or session_key(api.format, headers, body, history)
    parsed.key, parsed.lead = (explicit, key), lead_of(history)
    return parsed


def copy_body(
    slot: Slot, parsed: Parsed, history: list[Any], raw: bytes, now: float
) -> tuple[bytes, Report]:
    """The body to send for ``history`` (its request copy in place) and the prepare's report.

    The last request's decisions are made durable first (done already, unless its fsync is
    still running or failed): nothing is decided upon a decision a power loss could take."""
    slot.sync()
    prepared = slot.budget.prepare(history, usage=slot.usage, now=now)
    copy = prepared.messages
    if len(copy) == len(history) and all(map(is_, copy, history)):
        return raw, prepared.report  # nothing replaced: the very bytes the agent sent
    # The agent's bytes, the replaced messages swapped for orjson's encoding of their copies.
    return encode(parsed, copy), prepared.report
