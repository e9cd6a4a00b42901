"""The session's estimate of its prompt: the calibration learned from reported usage, the
anchored estimate the next usage is measured against, and the context window.

One part of the session, with its state behind these methods: the calibration (a frozen
:class:`budget.tokens._calibration.Calibration`, replaced as it learns), the pending anchor, and
the window (resolved once: setting, then discovery kept in the session's metadata, then table;
capped by the smallest window a prompt-too-long error stated).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from budget._config import BudgetConfig
from budget.session._journal import Journal
from budget.tokens._calibration import Anchor, Calibration, learn
from budget.tokens._usage import ProviderUsage
from budget.tokens._windows import resolve_window

__all__ = ["Estimator", "anchor"]


class Estimator:
    """Calibration, anchor and window of one session (see the module doc)."""

    def __init__(
        self,
        config: BudgetConfig,
        journal: Journal,
        discover: Callable[[], int | None] | None,
        calibration: Calibration,
        window_cap: int | None,
        anchor: Anchor | None = None,
    ) -> None:
        self._config, self._journal, self._discover = config, journal, discover
        self._calib = calibration
        self._anchor = anchor
        """The last request's anchored estimate, for the usage the next request reports
        (logged with the request record, restored by a resumed session)."""
        self._window: int | None = None
        self._window_cap = window_cap
        """The smallest window a prompt-too-long error stated (logged, so a resume keeps it)."""

    def learn(self, reported: ProviderUsage | None, length: int, *, diverged: bool) -> bool:
        """Calibrate the estimate on the usage the last request's response reported; whether
        that taught it something (a calibration record is then logged)."""
        self._calib, learned = learn(self._calib, self._anchor, reported, length, diverged=diverged)
        self._anchor = None
        return learned

    def correct(self, raw: int, floor: int, usage: ProviderUsage | None) -> int:
        """The calibrated form of an anchored estimate (see ``Calibration.correct``)."""
        return self._calib.correct(raw, floor, usage)

    def to_record(self, request: int) -> dict[str, Any]:
        """The calibration's decision-log record as ``request`` left it."""
        return self._calib.to_record(request)

    def anchor(self, usage: ProviderUsage, growth: int, length: int) -> None:
        """Remember this request's anchored estimate for the usage its response reports."""
        self._anchor = Anchor(usage, growth, length)

    @property
    def pending(self) -> Anchor | None:
        """The anchor the next request's usage will be measured against (what its record
        logs: ``budget.session._resumed``)."""
        return self._anchor

    def window(self) -> int:
        """The context window in tokens: setting, discovery (kept in the session), then table."""
        if self._window is None:
            known = self._journal.read_meta().get("windows")
            known = known if isinstance(known, dict) else {}
            cache = {k: v for k, v in known.items() if isinstance(v, int)}
            before = dict(cache)
            self._window = resolve_window(
                self._config.model,
                explicit=self._config.window,
                discover=self._discover,
                cache=cache,
            )
            if cache != before:
                self._journal.write_meta(windows=cache)
            if self._window_cap is not None:
                self._window = min(self._window, self._window_cap)
        return self._window

    def stated(self, limit: int | None) -> bool:
        """A prompt-too-long error stated ``limit`` as the window: believed from now on (also
        after a resume: the overflow record keeps it) when it is below the window known."""
        if limit is not None and 0 < limit < self.window():
            self._window = self._window_cap = limit
            return True
        return False


def anchor(usage: ProviderUsage | None, messages: list[Any], since: int, cum: list[int]) -> int:
    """Last reported usage plus what was added after the first ``since`` messages (0 when
    no usage was given)."""
    if usage is None:
        return 0
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


def _role(message: Any) -> str | None:
    return message.get("role") if isinstance(message, dict) else None
