"""The history cache: what the session keeps per message of the last history it saw.

The work per request is proportional to what is new: per message, the session keeps its scan,
the results it holds, its rounds and its token estimates (as given, and as shown), with running
sums, and reuses them when the next history starts with the same message objects
(:meth:`History.reusable`). Only the last :data:`RESCAN` messages are looked at again
(callers move ``cache_control`` markers there in place). A history that diverges earlier is
rebuilt from the frozen decisions, which gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from budget._config import BudgetConfig
from budget._ledger import Decision, Ledger
from budget._log import Events
from budget._view import Call, Format, Scanned, ToolResult
from budget.session._keys import call_of
from budget.session._placing import frozen_prior, place_result
from budget.session._turns import Turns
from budget.tokens._memo import TextTokens
from budget.tokens._tokens import TokenizerProfile, estimate_tokens

__all__ = ["BULK", "RESCAN", "History"]

RESCAN = 2
"""Trailing messages of the previous history looked at again: callers mutate those in place."""
BULK = 64
"""A scan of more messages than this (a resume, a diverged history) looks their estimates up in
the saved ones by the hash of their JSON; a request's few new messages are walked, as hashing
them would cost a steady-state request more than it saves (budget/tokens/_estimates_cache.py)."""


@dataclass(slots=True)
class _Msg:
    """What the session remembers of one message of the last history it saw."""

    scanned: Scanned
    results: tuple[ToolResult, ...]
    round_after: int
    group_after: int
    tokens_in: int


class History:
    """Per message of the last history scanned: its scan, its results, its rounds and its token
    estimates (as given, and as shown by the decisions frozen before it), with running sums.

    Its state is those per-message caches and the calls and results they register; the request
    copy made from them is the :class:`budget.session._copies.Copies`' own.
    """

    def __init__(
        self,
        config: BudgetConfig,
        ledger: Ledger,
        log: Events,
        profile: TokenizerProfile,
        text_tokens: TextTokens,
    ) -> None:
        self._config, self._ledger, self._log = config, ledger, log
        self._profile, self._tt = profile, text_tokens
        self.reset()

    def reset(self) -> None:
        """Forget the per-message caches (not the decisions): the next request rebuilds them."""
        self.inputs: list[Any] = []
        """The messages scanned (the caller's objects)."""
        self._msgs: list[_Msg] = []
        self.cum_in: list[int] = [0]
        """Running sums of the messages' tokens as given (``cum_in[i]``: the first ``i``)."""
        self.cum_pre: list[int] = [0]
        """The same as shown with the decisions frozen before the request that scanned it."""
        self._calls: dict[str, list[tuple[str, int, int, str]]] = {}
        """Per call id, the calls made with it (tool, group, round, key), the latest last."""
        self._occ: dict[str, int] = {}
        """Per call id, how many results answer it in the history scanned so far."""
        self.stale = False
        """The last scan met a result edited after it was decided."""
        self.mentions: list[tuple[str, str, int]] = []
        """The (call id, ref, message index) of each ref the last scan's calls name."""
        self._members: dict[int, dict[str, ToolResult]] = {}
        self._by_key: dict[str, list[tuple[int, str]]] = {}
        """Per call key, the (order, call id) of the results of the history answering a call
        with that key, in order: a re-run finds its earlier runs without a walk of the history."""
        self.seen: list[Any] | None = None
        """The list the last request that completed was given (None while caches may not match)."""
        self.turns = Turns()
        self._shown_now: dict[int, tuple[Any, int]] = {}
        """Per message scanned by this request and shown rewritten by earlier decisions: that
        copy and its tokens. The copy takes them for messages this request decides nothing in
        (rebuilding a long history after a resume is mostly such messages)."""

    def __len__(self) -> int:
        return len(self._msgs)

    def results(self, i: int) -> tuple[ToolResult, ...]:
        """The results message ``i`` holds."""
        return self._msgs[i].results

    def calls(self, i: int) -> tuple[Call, ...]:
        """The calls message ``i`` makes."""
        return self._msgs[i].scanned.calls

    def tokens_in(self, i: int) -> int:
        """Tokens of message ``i`` as given."""
        return self._msgs[i].tokens_in

    def members(self, group: int) -> Mapping[str, ToolResult]:
        """The results of round group ``group`` by call id."""
        return self._members.get(group, {})

    def same_call(self, key: str, before: int) -> Iterator[str]:
        """Call ids of the results in this history answering a call with ``key`` placed before
        order ``before``, the latest first (the runs a re-run may be a delta against)."""
        for order, call_id in reversed(self._by_key.get(key, ())):
            if order < before:
                yield call_id

    def take_shown(self) -> dict[int, tuple[Any, int]]:
        """The copies (and tokens) the scan made of messages earlier decisions rewrite, once."""
        shown, self._shown_now = self._shown_now, {}
        return shown

    def current_round(self) -> int:
        """The round of the last message of the history scanned (-1 before any)."""
        return self._msgs[-1].round_after if self._msgs else -1

    def round_of(self, length: int) -> int:
        """The round of the last of the first ``length`` messages (-1 for none)."""
        return self._msgs[min(length, len(self._msgs)) - 1].round_after if length > 0 else -1

    def reusable(self, messages: list[Any]) -> int:
        """How many leading messages keep their cached state; -1 when the history diverged."""
        n = len(self.inputs)
        if n == 0:
            return 0
        if len(messages) < n:
            return -1
        inputs = self.inputs
        # The list passed last time, grown, is taken as extended (see budget.session._budget);
        # else the previous history must be a prefix of this one, by identity or by value.
        grown = messages is self.seen and messages[n - 1] is inputs[n - 1]
        if (grown and messages[0] is inputs[0]) or messages[:n] == inputs:
            return max(n - RESCAN, 0)
        return -1

    def fingerprint(self, length: int) -> int:
        """Tokens of a history of ``length`` messages but its last ``RESCAN`` (callers edit
        those in place): what tells a history from another of the same length."""
        return self.cum_in[max(length - RESCAN, 0)]

    def same_history(self, length: int, last_f: int | None) -> bool:
        """Whether this history of the last request's length is that history: its tokens but
        the last messages (which callers edit in place) are the ones the last request logged."""
        if last_f is None:
            return True  # a log written before the tokens were recorded: the length only
        return self.fingerprint(length) == last_f

    def anchor_holds(self, length: int, last_n: int, last_f: int | None) -> bool:
        """Whether a usage reported now was measured on a prefix of this history: the last
        request's history (its length, and its tokens but the last messages, which callers edit
        in place) must lead this one. The same answer live and after a resume."""
        return length >= last_n and self.same_history(last_n, last_f)

    def truncate(self, k: int) -> None:
        """Forget the messages from ``k`` on (their calls and results with them)."""
        for i in range(len(self._msgs) - 1, k - 1, -1):
            m = self._msgs[i]
            for call in m.scanned.calls:
                made = self._calls.get(call.call_id)
                if made:
                    made.pop()
                    if not made:
                        del self._calls[call.call_id]
            for r in m.results:
                runs = self._by_key.get(r.call_key) if r.call_key else None
                if runs:
                    runs.pop()  # appended in history order: this message's are the last
                    if not runs:
                        del self._by_key[r.call_key]
                raw = call_of(r.call_id)
                left = self._occ.get(raw, 0) - 1
                if left > 0:
                    self._occ[raw] = left
                else:
                    self._occ.pop(raw, None)
        del self.inputs[k:], self._msgs[k:]
        del self.cum_in[k + 1 :], self.cum_pre[k + 1 :]
        self.turns.truncate(k)

    def scan(
        self, messages: list[Any], k: int, fmt: Format
    ) -> tuple[list[ToolResult], list[ToolResult]]:
        """Scan messages from ``k``: register calls, place results; return (fresh, all new)."""
        bulk = len(messages) - k > BULK
        rnd = self._msgs[k - 1].round_after if k else -1
        group = self._msgs[k - 1].group_after if k else -1
        fresh: list[ToolResult] = []
        placed: list[ToolResult] = []
        self._shown_now = {}
        self.stale = False
        self.mentions = mentions = list[tuple[str, str, int]]()
        # Bound once: a resume runs this loop for every message of a long history.
        scan_in = fmt.scan_in
        calls_of, members = self._calls, self._members
        place = partial(place_result, self._calls, self._occ, self._config.image_chars)
        prior_of = self._prior
        remember = self._remember
        for i in range(k, len(messages)):
            scanned = scan_in(messages, i)
            if scanned.opens_round:
                rnd += 1
                group = i
            for call in scanned.calls:
                if call.refs:
                    mentions.extend((call.call_id, ref, i) for ref in call.refs)
                made = calls_of.get(call.call_id)
                if made is None:
                    calls_of[call.call_id] = [(call.tool, group, rnd, call.key)]
                else:
                    made.append((call.tool, group, rnd, call.key))
            if not scanned.results:
                remember(messages[i], _Msg(scanned, (), rnd, group, 0), None, i, fmt, bulk)
                continue
            results = []
            shown: dict[int, str] | None = None
            for raw in scanned.results:
                result = place(i, raw)
                results.append(result)
                if result.call_key:
                    runs = self._by_key.get(result.call_key)
                    if runs is None:
                        self._by_key[result.call_key] = [(result.order, result.call_id)]
                    else:
                        runs.append((result.order, result.call_id))
                in_group = members.get(result.group)
                if in_group is None:
                    members[result.group] = {result.call_id: result}
                else:
                    in_group[result.call_id] = result
                prior = prior_of(result)
                if prior is None:
                    fresh.append(result)
                elif prior.text is not None:
                    if shown is None:
                        shown = {}
                    shown[raw.slot] = prior.text
            placed.extend(results)
            remember(messages[i], _Msg(scanned, tuple(results), rnd, group, 0), shown, i, fmt, bulk)
        return fresh, placed

    def _remember(
        self,
        message: Any,
        m: _Msg,
        shown: dict[int, str] | None,
        i: int,
        fmt: Format,
        bulk: bool,
    ) -> None:
        """Keep message ``i``'s scan and its tokens, as given and as earlier decisions show it."""
        tokens = self.estimate(message, bulk=bulk)
        pre = tokens
        if shown:
            # Decided in an earlier request or process: counted as it is shown.
            out = fmt.rewrite(message, shown)
            pre = self.estimate(out, bulk=bulk)
            self._shown_now[i] = (out, pre)
        m.tokens_in = tokens
        self.turns.see(i, m.scanned, m.round_after)
        self._msgs.append(m)
        self.inputs.append(message)
        cum_in, cum_pre = self.cum_in, self.cum_pre
        cum_in.append(cum_in[-1] + tokens)
        cum_pre.append(cum_pre[-1] + pre)

    def estimate(self, message: Any, *, bulk: bool) -> int:
        """Tokens of ``message``; in a bulk scan (a resume) looked up in the saved estimates by
        the hash of the message's JSON (budget/tokens/_estimates_cache.py) rather than walked."""
        known = self._tt.known
        if known is None or not bulk:
            return estimate_tokens(message, model=self._profile, text=self._tt)
        return known.message_tokens(message, partial(self.estimate, bulk=False))

    def given(self, end: int) -> Iterator[tuple[Any, int]]:
        """The first ``end`` messages with their tokens as given (for the saved estimates)."""
        inputs, msgs = self.inputs, self._msgs
        return ((inputs[i], msgs[i].tokens_in) for i in range(end))

    def _prior(self, result: ToolResult) -> Decision | None:
        """The frozen decision of ``result``, unless its text changed since (then: stale)."""
        prior, edited = frozen_prior(self._ledger, self._log, result)
        self.stale |= edited
        return prior
