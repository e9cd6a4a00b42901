"""The session's price list: what the cost policy and the bill price a cache write and read at.

The caller's prices (``cache_write_price``, ``cache_read_price``), else the model's published
ones (``budget.policy.price_list``), in the caller's caching style (``cache_breakpoints``), else
the maker's, else that of the API the messages are shaped for: the format is known only once a
request names it or it is detected, so the list follows each request's format, a guessed one
included (``budget.formats._detect``: a tool-less request is billed in its guess's style).
"""

from __future__ import annotations

from budget._config import BudgetConfig
from budget._view import Format
from budget.policy import Observed, PriceList, Prices, price_list, prices_for

__all__ = ["SessionPrices"]


class SessionPrices:
    """The session's price list, following the format of its requests."""

    def __init__(self, config: BudgetConfig) -> None:
        self._config = config
        self._wire = True
        self.listed: PriceList = self._priced()
        """The prices of the current format (explicit breakpoints until one says otherwise)."""

    def now(self, observed: Observed) -> Prices:
        """This request's prices: the list's, as the session's usage so far corrects them (the
        cache regime, automatic caching's write, the TTL: ``budget.policy.prices_for``)."""
        listed = self.listed
        return prices_for(
            observed,
            write=listed.write,
            read=listed.read,
            ttl_s=self._config.cache_ttl_s,
            explicit=listed.explicit,
            write_long=listed.write_long,
        )

    def use(self, fmt: Format) -> None:
        """Price the requests of ``fmt``: its API's caching style, where nothing else tells it."""
        if fmt.breakpoints != self._wire:
            self._wire = fmt.breakpoints
            self.listed = self._priced()

    def _priced(self) -> PriceList:
        cfg = self._config
        return price_list(
            cfg.model,
            write=cfg.cache_write_price,
            read=cfg.cache_read_price,
            breakpoints=cfg.cache_breakpoints,
            wire=self._wire,
        )
