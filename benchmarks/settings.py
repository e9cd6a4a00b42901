"""toolbudget's settings in a bench run: what ``--set`` and ``TOOLBUDGET_*`` made them, and why.

``toolbudget bench`` replays the real library, whose :class:`~budget.BudgetConfig` reads
``TOOLBUDGET_<SETTING>`` variables for what it is not given. A run therefore records, for every
setting, the value the ``toolbudget`` strategy used and where it came from:

- ``default``: the library's default;
- ``bench``: set by the bench itself, as for every run (``include_path``: every recorded agent
  has file tools, :mod:`benchmarks.strategies.toolbudget`; ``window``: ``--window``);
- ``env``: a ``TOOLBUDGET_*`` variable of the environment the bench ran in;
- ``--set``: ``toolbudget bench --set KEY=VALUE``, which wins over the environment.

The settings are read when the command runs, never when a module is imported, and a bad key or
value is a :class:`~budget.ConfigError` (one line, naming the key or the variable).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

import orjson
from pydantic_core import to_jsonable_python

from benchmarks.strategies import toolbudget
from budget import BudgetConfig
from budget._config import NONE_WORDS, NULLABLE
from budget._config_messages import env_name, env_value
from budget._errors import ConfigError

__all__ = [
    "BENCH_FIXED",
    "COMPACT_FIXED",
    "BenchSettings",
    "Setting",
    "Source",
    "parse_sets",
    "resolve",
]

Source = Literal["default", "bench", "env", "--set"]

BENCH_FIXED: tuple[str, ...] = ("include_path", "window")
"""Settings the bench gives toolbudget on every run (unless ``--set`` or the environment does)."""

COMPACT_FIXED: Mapping[str, Any] = MappingProxyType({"compaction": "auto"})
"""What ``toolbudget-compact`` sets beyond :data:`BENCH_FIXED`
(:func:`benchmarks.strategies.toolbudget._configure_compact`); ``--set`` overrides it too."""


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting of the ``toolbudget`` strategy in a run."""

    name: str
    value: Any
    default: Any
    source: Source
    variable: str | None = None
    """The environment variable it was read from (``source == "env"``)."""
    usual: tuple[Any, ...] = ()
    """What the bench's toolbudget strategies run with when neither the environment nor
    ``--set`` gives the setting (empty: the default): the bench's own value for
    :data:`BENCH_FIXED` settings, and for ``compaction`` both ``toolbudget``'s and
    ``toolbudget-compact``'s (:data:`COMPACT_FIXED`), which ``--set`` reaches alike."""

    @property
    def changed(self) -> bool:
        """Set by the environment or ``--set`` to something other than what the bench runs with.

        An environment variable reaches the ``toolbudget`` strategy's defaults only (the bench
        passes its own settings explicitly); ``--set`` reaches both strategies and everything
        the bench sets, so ``--set include_path=false``, ``window=none`` or ``compaction=off``
        are said even though they equal the library's defaults (before this, each went unsaid
        in the header while the figures moved).
        """
        if self.source == "env":
            return bool(self.value != self.default)
        if self.source == "--set":
            return any(self.value != usual for usual in self.usual or (self.default,))
        return False

    def as_dict(self) -> dict[str, Any]:
        """The JSON object of the setting: ``value``, ``default``, ``source`` (and ``variable``)."""
        out: dict[str, Any] = {
            "value": _plain(self.value),
            "default": _plain(self.default),
            "source": self.source,
        }
        if self.variable is not None:
            out["variable"] = self.variable
        return out


def _plain(value: Any) -> Any:
    """A JSON-ready form of a setting's value (per-tool policies as plain dicts).

    pydantic's own conversion, not an orjson round trip: BudgetConfig accepts any integer
    (``--set result_cap=10**30`` means "never spill"), and orjson refuses one past 64 bits,
    which before this stopped the bench with a traceback after the whole replay had run.
    """
    return to_jsonable_python(value)


@dataclass(frozen=True, slots=True)
class BenchSettings:
    """toolbudget's effective settings in one run, and the ``--set`` overrides that made them."""

    config: BudgetConfig
    """The configuration the ``toolbudget`` strategy replays with (its model set per trace)."""
    overrides: Mapping[str, Any]
    """``--set`` values, parsed: the strategy's keyword overrides."""
    settings: tuple[Setting, ...]

    def changed(self) -> list[Setting]:
        """The settings the environment or ``--set`` moved away from the defaults."""
        return [s for s in self.settings if s.changed]

    def as_dict(self) -> dict[str, Any]:
        """The ``settings`` object of the JSON report: one entry per setting, by name."""
        return {s.name: s.as_dict() for s in self.settings}

    def header(self) -> str | None:
        """One line for the table's header when a setting differs from the defaults, else None."""
        changed = self.changed()
        if not changed:
            return None
        parts = [
            f"{s.name}={_plain(s.value)} ({s.variable if s.source == 'env' else '--set'})"
            for s in changed
        ]
        return "toolbudget settings differ from the defaults: " + ", ".join(parts)


def _default(name: str) -> Any:
    field = BudgetConfig.model_fields[name]
    return field.default_factory() if field.default_factory is not None else field.default  # type: ignore[call-arg]


def _bench_value(name: str, window: int | None) -> Any:
    """The value the bench gives the :data:`BENCH_FIXED` setting ``name`` on every run: what
    :mod:`benchmarks.strategies.toolbudget` passes (``include_path=True``) and ``--window``.
    Not read from a config built here: that would read the environment, whose bad value a
    ``--set`` may be overriding."""
    return {"include_path": True, "window": window}[name]


def parse_sets(items: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` strings as keyword settings (``-`` read as ``_``, the key in any case).

    Values are given to :class:`BudgetConfig` as text, which parses them as it parses the
    environment's (numbers, booleans), except ``tools`` (JSON) and ``none`` for a setting that
    may be None. Refused: an item without ``=``, an unknown key, a key given twice.
    """
    out: dict[str, Any] = {}
    fields = BudgetConfig.model_fields
    for item in items:
        key, eq, value = item.partition("=")
        name = key.strip().lower().replace("-", "_")
        if not eq or not name:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE (e.g. --set result_cap=15000)")
        if name not in fields:
            known = ", ".join(sorted(fields))
            raise ConfigError(f"--set {name}: no such toolbudget setting; known: {known}")
        if name in out:
            raise ConfigError(f"--set {name} given twice")
        value = value.strip()
        if name == "tools":
            try:
                out[name] = orjson.loads(value)
            except orjson.JSONDecodeError as exc:
                raise ConfigError(f"--set tools: not JSON ({exc})") from None
        elif value.lower() in NONE_WORDS and name in NULLABLE:
            out[name] = None
        else:
            out[name] = value
    return out


def resolve(items: Sequence[str] = (), *, window: int | None) -> BenchSettings:
    """toolbudget's settings for a run with ``--set`` ``items`` and ``--window`` ``window`` (None:
    each trace in its recorded model's window).

    The configuration is the one the ``toolbudget`` strategy builds (so what is recorded is what
    ran): ``--set`` first, then the bench's own (:data:`BENCH_FIXED`, which the strategy passes
    explicitly, so a ``TOOLBUDGET_*`` variable does not change them), then the environment, then
    the defaults. Raises :class:`ConfigError` on a bad key or value.
    """
    overrides = parse_sets(items)
    config = toolbudget.STRATEGY.make(**{"window": window, **overrides}).config.budget
    settings = []
    for name in BudgetConfig.model_fields:
        variable = env_name(name) if env_value(name) is not None else None
        source: Source
        if name in overrides:
            source, variable = "--set", None
        elif name in BENCH_FIXED:
            source, variable = "bench", None
        elif variable is not None:
            source = "env"
        else:
            source = "default"
        usual: tuple[Any, ...] = ()
        if name in BENCH_FIXED:
            usual = (_bench_value(name, window),)
        elif name in COMPACT_FIXED:
            usual = (_default(name), COMPACT_FIXED[name])
        settings.append(
            Setting(name, getattr(config, name), _default(name), source, variable, usual)
        )
    return BenchSettings(config, overrides, tuple(settings))
