"""The history cache: what the session keeps per message of the last history it saw.

The work per request is proportional to what is new: per message, the session keeps its scan,
the results it holds, its rounds and its token estimates (as given, and as shown), with running
sums, and reuses them when the next history starts with the same message objects
(:meth:`HistoryCache._reusable`). Only the last :data:`RESCAN` messages are looked at again
(callers move ``cache_control`` markers there in place). A history that diverges earlier is
rebuilt from the frozen decisions, which gives the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from budget._candidates import StalenessCandidates, _Cand
from budget._errors import InputError
from budget._ledger import Decision
from budget._markers import Markers
from budget._tokens import TokenizerProfile, estimate_tokens
from budget._usage import ProviderUsage
from budget._view import Format, RawResult, Scanned, ToolResult, build_result
from spill import ref_for

__all__ = ["RESCAN", "HistoryCache", "call_of", "result_key"]

RESCAN = 2
"""Trailing messages of the previous history looked at again: callers mutate those in place."""
BULK = 64
"""A scan of more messages than this (a resume, a diverged history) looks their estimates up in
the saved ones by the hash of their JSON; a request's few new messages are walked, as hashing
them would cost a steady-state request more than it saves (budget/_estimates_cache.py)."""


@dataclass(slots=True)
class _Msg:
    """What the session remembers of one message of the last history it saw."""

    scanned: Scanned
    results: tuple[ToolResult, ...]
    round_after: int
    group_after: int
    tokens_in: int
    tokens_out: int


@dataclass(slots=True)
class _Totals:
    results: int = 0
    chars_before: int = 0
    chars_after: int = 0
    kept: int = 0
    spilled: int = 0
    trimmed: int = 0
    unspillable: int = 0

    def add(self, d: Decision, original_chars: int, sign: int) -> None:
        self.results += sign
        self.chars_before += sign * original_chars
        self.chars_after += sign * d.shown_chars()
        if d.kind == "kept":
            self.kept += sign
        elif d.kind == "spilled":
            self.spilled += sign
        elif d.kind == "trimmed":
            self.trimmed += sign
        else:
            self.unspillable += sign


@dataclass(frozen=True, slots=True)
class Scan:
    """What a request's scan of its history found."""

    k: int
    """Leading messages whose cached state (and request copy) was reused."""
    old_outputs: list[Any]
    """The copies from ``k`` on handed out by the last request (to tell a stable prefix)."""
    fresh: list[ToolResult]
    """Results with no frozen decision: what the passes decide."""
    results: list[ToolResult]
    """Every result of the messages scanned."""
    diverged: bool
    """The history is not the last one grown (rebuilt, or shorter)."""


class HistoryCache(StalenessCandidates):
    """Per message of the last history: its scan, results, rounds and token sums."""

    _format: Format
    _profile: TokenizerProfile

    def _reset(self) -> None:
        """Forget the per-message caches (not the decisions): the next request rebuilds them."""
        self._inputs: list[Any] = []
        self._outputs: list[Any] = []
        self._msgs: list[_Msg] = []
        self._cum_out: list[int] = [0]
        self._cum_in: list[int] = [0]
        # Tokens of each message as shown with the decisions frozen before the request that
        # scanned it: what the request is estimated at before its passes run.
        self._cum_pre: list[int] = [0]
        self._calls: dict[str, list[tuple[str, int, int, str]]] = {}
        """Per call id, the calls made with it (tool, group, round, key), the latest last."""
        self._occ: dict[str, int] = {}
        """Per call id, how many results answer it in the history scanned so far."""
        self._stale = False
        self._members: dict[int, dict[str, ToolResult]] = {}
        self._totals = _Totals()
        self._cands: list[_Cand] = []
        self._cand_rounds: list[int] = []
        self._cand_cum: list[int] = [0]
        self._cand_results: dict[str, ToolResult] = {}
        self._cand_start = 0
        self._seen: list[Any] | None = None
        self._bulk = False
        self._marks: dict[int, tuple[Markers, Markers]] = {}
        """Per rewritten message that carried ``cache_control`` markers when its copy was made
        (in the caller's message or in the copy): both, as :func:`budget._markers.markers` lists
        them. Checked on every request, so a marker removed or changed anywhere is seen."""
        self._shown_now: dict[int, tuple[Any, int]] = {}
        """Per message scanned by this request and shown rewritten by earlier decisions: that
        copy and its tokens. _apply takes them for messages this request decides nothing in
        (rebuilding a long history after a resume is mostly such messages)."""

    def _current_round(self) -> int:
        return self._msgs[-1].round_after if self._msgs else -1

    def _scan_history(self, messages: list[Any]) -> Scan:
        """Reuse what the last history left, scan the rest."""
        k = self._reusable(messages)
        diverged = k < 0 or len(messages) < self._last_n
        # Until this request completes, the caches may not match the list passed last time.
        self._seen = None
        if k < 0:
            old_outputs = self._outputs
            self._reset()
            k = 0
        else:
            old_outputs = self._outputs[k:]
            self._truncate(k)
        fresh, new_results = self._scan(messages, k)
        if self._stale and k > 0:
            # A result was edited after it was decided: it is a new result, and the caches of
            # earlier requests (its staleness candidate holds the old text) must not outlive
            # its old decision. Rebuilt from the frozen decisions, as a resumed session would.
            old_outputs = self._outputs[:k] + old_outputs
            self._reset()
            k = 0
            fresh, new_results = self._scan(messages, k)
        return Scan(k, old_outputs, fresh, new_results, diverged)

    def _reusable(self, messages: list[Any]) -> int:
        """How many leading messages keep their cached state; -1 when the history diverged."""
        n = len(self._inputs)
        if n == 0:
            return 0
        if len(messages) < n:
            return -1
        inputs = self._inputs
        if messages is self._seen and messages[n - 1] is inputs[n - 1] and messages[0] is inputs[0]:
            # The list passed last time, grown: taken as extended (see budget._session).
            return max(n - RESCAN, 0)
        if messages[:n] == inputs:
            # Equal by identity (or by value): the previous history is a prefix of this one.
            return max(n - RESCAN, 0)
        return -1

    def _fingerprint(self, length: int) -> int:
        """Tokens of a history of ``length`` messages but its last ``RESCAN`` (callers edit
        those in place): what tells a history from another of the same length."""
        return self._cum_in[max(length - RESCAN, 0)]

    def _same_history(self, length: int, last_f: int | None) -> bool:
        """Whether this history of the last request's length is that history: its tokens but
        the last messages (which callers edit in place) are the ones the last request logged."""
        if last_f is None:
            return True  # a log written before the tokens were recorded: the length only
        return self._fingerprint(length) == last_f

    def _anchor_holds(self, length: int) -> bool:
        """Whether a usage reported now was measured on a prefix of this history: the last
        request's history (its length, and its tokens but the last messages, which callers edit
        in place) must lead this one. The same answer live and after a resume."""
        if length < self._last_n:
            return False
        if self._last_f is None:
            return True  # a log written before the tokens were recorded: the length only
        return self._fingerprint(self._last_n) == self._last_f

    def _truncate(self, k: int) -> None:
        for i in range(len(self._msgs) - 1, k - 1, -1):
            m = self._msgs[i]
            for call in m.scanned.calls:
                made = self._calls.get(call.call_id)
                if made:
                    made.pop()
                    if not made:
                        del self._calls[call.call_id]
            for r in m.results:
                raw = call_of(r.call_id)
                left = self._occ.get(raw, 0) - 1
                if left > 0:
                    self._occ[raw] = left
                else:
                    self._occ.pop(raw, None)
                d = self._ledger.get(r.call_id)
                if d is not None:
                    self._totals.add(d, len(r.text), -1)
        del self._inputs[k:], self._outputs[k:], self._msgs[k:]
        del self._cum_out[k + 1 :], self._cum_in[k + 1 :], self._cum_pre[k + 1 :]
        if self._marks:
            for i in [i for i in self._marks if i >= k]:
                del self._marks[i]

    def _scan(self, messages: list[Any], k: int) -> tuple[list[ToolResult], list[ToolResult]]:
        """Scan messages from ``k``: register calls, place results; return (fresh, all new)."""
        fmt = self._format
        self._bulk = len(messages) - k > BULK
        rnd = self._msgs[k - 1].round_after if k else -1
        group = self._msgs[k - 1].group_after if k else -1
        fresh: list[ToolResult] = []
        placed: list[ToolResult] = []
        self._shown_now = {}
        self._stale = False
        # Bound once: a resume runs this loop for every message of a long history.
        scan_in = fmt.scan_in
        calls_of, members = self._calls, self._members
        place, prior_of, remember = self._place, self._prior, self._remember
        for i in range(k, len(messages)):
            scanned = scan_in(messages, i)
            if scanned.opens_round:
                rnd += 1
                group = i
            for call in scanned.calls:
                made = calls_of.get(call.call_id)
                if made is None:
                    calls_of[call.call_id] = [(call.tool, group, rnd, call.key)]
                else:
                    made.append((call.tool, group, rnd, call.key))
            if not scanned.results:
                remember(messages[i], _Msg(scanned, (), rnd, group, 0, 0), None, i)
                continue
            results = []
            shown: dict[int, str] | None = None
            for raw in scanned.results:
                result = place(i, raw)
                results.append(result)
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
            remember(messages[i], _Msg(scanned, tuple(results), rnd, group, 0, 0), shown, i)
        return fresh, placed

    def _remember(self, message: Any, m: _Msg, shown: dict[int, str] | None, i: int) -> None:
        """Keep message ``i``'s scan and its tokens, as given and as earlier decisions show it."""
        tokens = self._estimate(message)
        pre = tokens
        if shown:
            # Decided in an earlier request or process: counted as it is shown.
            out = self._format.rewrite(message, shown)
            pre = self._estimate(out)
            self._shown_now[i] = (out, pre)
        m.tokens_in = tokens
        self._msgs.append(m)
        self._inputs.append(message)
        cum_in, cum_pre = self._cum_in, self._cum_pre
        cum_in.append(cum_in[-1] + tokens)
        cum_pre.append(cum_pre[-1] + pre)

    def _estimate(self, message: Any) -> int:
        """Tokens of ``message``; in a bulk scan (a resume) looked up in the saved estimates by
        the hash of the message's JSON (budget/_estimates_cache.py) rather than walked."""
        known = self._tt.known
        if known is None or not self._bulk:
            return estimate_tokens(message, model=self._profile, text=self._tt)
        return known.message_tokens(message, self._estimate_walked)

    def _estimate_walked(self, message: Any) -> int:
        return estimate_tokens(message, model=self._profile, text=self._tt)

    def _keep_estimates(self) -> None:
        """Hand the saved estimates every message's tokens, as given and as its copy shows it,
        but the last ``RESCAN`` (callers edit those in place: their tokens may be stale): what
        a resume's bulk scan of the same history looks up. Done at close, in one pass (~15 ms
        for 5,201 messages), not per request."""
        known = self._tt.known
        if known is None or self._seen is None:
            return  # no saved estimates, or caches a failed request left half updated
        end = max(len(self._msgs) - RESCAN, 0)
        inputs, outputs, msgs = self._inputs, self._outputs, self._msgs
        given = ((inputs[i], msgs[i].tokens_in) for i in range(end))
        # A copy's markers may have been made again since it was counted (_sync_markers):
        # cache_control is never counted, so its tokens are still the copy's.
        shown = (
            (outputs[i], msgs[i].tokens_out) for i in range(end) if outputs[i] is not inputs[i]
        )
        known.keep_messages(given)
        known.keep_messages(shown)

    def _place(self, i: int, raw: RawResult) -> ToolResult:
        """Result ``raw`` of message ``i``, placed under the call it answers."""
        placed_call = self._calls.get(raw.call_id)
        if not placed_call:
            raise InputError(
                f"messages[{i}] has a tool result for call id {raw.call_id!r}, "
                "but no earlier message makes that call"
            )
        tool, g, r_round, key = placed_call[-1]
        # Servers that number calls per turn repeat ids: each result answering an id is
        # its own result, keyed by how many answered that id before it.
        occ = self._occ.get(raw.call_id, 0) + 1
        self._occ[raw.call_id] = occ
        return build_result(
            result_key(raw.call_id, occ), tool, i, raw.slot, g, r_round, raw.text, raw.is_error,
            raw.other_blocks * self.config.image_chars, (i << 16) + raw.slot, key,
        )  # fmt: skip

    def _prior(self, result: ToolResult) -> Decision | None:
        """The frozen decision of ``result``, unless its text changed since."""
        prior = self._ledger.get(result.call_id)
        if prior is not None and not prior.same_text(
            len(result.text), None if prior.digest is None else ref_for(result.text)
        ):
            # Edited after it was decided (a redaction): a new result, decided anew.
            self._log.warning(
                "toolbudget.session.decision_stale",
                call_id=result.call_id,
                logged_chars=prior.chars,
                chars=len(result.text),
            )
            prior = None
            self._stale = True
        return prior

    def _anchor(
        self, usage: ProviderUsage | None, messages: list[Any], since: int, *, out: bool
    ) -> int:
        """Last reported usage plus what was added after the first ``since`` messages (0 when
        no usage was given)."""
        if usage is None:
            return 0
        cum = self._cum_out if out else self._cum_in
        total = usage.total
        start = min(since, len(messages))
        if start < len(messages) and _role(messages[start]) == "assistant":
            # The reply is in the usage already, as its output; but it counts at no less than
            # its own estimate, since a streamed response's first event reports an output of a
            # token or so, and callers (and some recorders) keep that usage.
            if len(cum) > start + 1:
                total = usage.prompt_tokens + max(usage.output_tokens, cum[start + 1] - cum[start])
            start += 1
        if start >= len(messages):
            return total
        if len(cum) > len(messages):
            return total + cum[len(messages)] - cum[start]
        return total


_REPEAT = "\x00"
"""Separates a call id from the number of a repeated result answering it in result keys."""


def result_key(call_id: str, occurrence: int) -> str:
    """The key of the ``occurrence``-th result (from 1) answering ``call_id``: the call id
    itself for the first (what logs have always used), else ``call id + NUL + n``. A call id
    holding NUL always gets the suffix, so two keys never collide."""
    if occurrence == 1 and _REPEAT not in call_id:
        return call_id
    return f"{call_id}{_REPEAT}{occurrence}"


def call_of(key: str) -> str:
    """The call id a result key names."""
    return key.rpartition(_REPEAT)[0] if _REPEAT in key else key


def _role(message: Any) -> str | None:
    return message.get("role") if isinstance(message, dict) else None
