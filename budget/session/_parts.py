"""The parts one session is made of, built once by ``Budget`` and handed to the steps of a
request (:mod:`budget.session._pipeline`).

Each part owns its state behind its own methods; this value only names them, so a step's
constructor shows what it works with. None of them inherits from another.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from budget._config import BudgetConfig
from budget._ledger import Ledger
from budget._log import Events
from budget.compaction._compactor import Compactor
from budget.passes._context import stub_text
from budget.policy import floor_at
from budget.session._bodies import Bodies
from budget.session._candidates import Candidates
from budget.session._copies import Copies
from budget.session._estimator import Estimator
from budget.session._history import History
from budget.session._journal import Journal
from budget.session._prices import SessionPrices
from budget.session._quotes import Quotes
from budget.session._resumed import Reactive
from budget.session._tally import Tally
from budget.tokens._estimates_cache import load as load_estimates
from budget.tokens._memo import TextTokens
from budget.tokens._tokens import TokenizerProfile
from spill import Store

__all__ = ["Parts"]

ANY_REF = "0" * 32
"""A ref of a stub measured before its result is trimmed: every ref has 32 hex digits, and a
store names the file of any one with a path as long. Asked once, at open: a local store notes
the ref as named (a body of that ref, which no text hashes to, would get a file of its own) and
looks it up among its packs."""


def _stubs(config: BudgetConfig, store: Store) -> Callable[[str, str], str]:
    """The stub a trim would show a result's text as, but for its ref (its length is that of
    the real one): what the cost model prices a trim's reclaim by."""
    path = store.path_of(ANY_REF) if config.include_path else None

    def stub_of(text: str, tool: str) -> str:
        return stub_text(config, text, ANY_REF, tool, path)

    return stub_of


@dataclass(frozen=True, slots=True)
class Parts:
    """A session's parts (see the module doc)."""

    config: BudgetConfig
    store: Store
    log: Events
    journal: Journal
    """The decision log and metadata: append, restore."""
    ledger: Ledger
    """The frozen decisions by result."""
    bodies: Bodies
    """The spilled bodies: stored as one group before their decisions are logged."""
    tally: Tally
    """The request counters and the overflow streak."""
    estimator: Estimator
    """Calibration, usage anchor and context window."""
    text_tokens: TextTokens
    """Text token estimates, memoized for two requests."""
    history: History
    """The history cache: per message its scan, results and token sums."""
    copies: Copies
    """The request copy: per message the copy sent, its token sums and markers."""
    candidates: Candidates
    """The staleness candidates."""
    quotes: Quotes
    """The kept results' quotable lines and those found needed (read-back evidence)."""
    prices: SessionPrices
    """The prompt-cache prices the cost policy and the bill use (``_prices``)."""
    reactive: Reactive = field(default_factory=Reactive)
    """The reactive compaction schedule the log left (for compaction's turn)."""

    @classmethod
    def build(
        cls,
        config: BudgetConfig,
        store: Store,
        log: Events,
        profile: TokenizerProfile,
        compactor: Compactor,
        discover_window: Callable[[], int | None] | None,
        text_tokens: Callable[[str], int] | None,
    ) -> Parts:
        """A session's parts over ``store``, resumed from its decision log (which restores the
        ledger, ``compactor`` and the counters)."""
        journal = Journal(store, log)
        ledger = Ledger(on_invalid=journal.invalid_record)
        known = (
            None if text_tokens is not None else load_estimates(store, profile, profile.text_tokens)
        )
        tt = TextTokens(profile, exact=text_tokens, known=known)
        prices = SessionPrices(config)
        # The format never changes the read price: the floor is the session's from the start.
        floor = floor_at(config.stale_floor, prices.listed.read, config.stub_chars)
        candidates = Candidates(config, ledger, tt, floor, _stubs(config, store))
        history = History(config, ledger, log, profile, tt)
        resumed = journal.restore(ledger, compactor, config.model)
        return cls(
            config=config,
            store=store,
            log=log,
            journal=journal,
            ledger=ledger,
            bodies=Bodies(store, config, ledger, log, resumed.recent_refs),
            tally=Tally.resumed(resumed),
            estimator=Estimator(
                config,
                journal,
                discover_window,
                resumed.calibration,
                resumed.window_cap,
                resumed.anchor,
            ),
            text_tokens=tt,
            history=history,
            copies=Copies(ledger, log, history, candidates),
            candidates=candidates,
            quotes=Quotes(config, ledger, history, resumed.evidence),
            prices=prices,
            reactive=resumed.reactive,
        )
