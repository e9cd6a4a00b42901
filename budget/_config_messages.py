"""The settings' environment variables (``TOOLBUDGET_<FIELD>``: their names, their values, those
naming no setting) and a refused setting as one line: what :class:`budget.BudgetConfig` and its
tool policies say when pydantic refuses a value, naming the environment variable that gave it."""

from __future__ import annotations

import difflib
import os
import re
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError
from pydantic_settings import SettingsError

__all__ = [
    "ENV_PREFIX",
    "describe",
    "describe_too_deep",
    "describe_unparsed",
    "env_name",
    "env_value",
    "unknown_variables",
]

ENV_PREFIX = "TOOLBUDGET_"
"""Environment variables named ``TOOLBUDGET_<FIELD>`` set the fields not passed explicitly."""


def env_name(field: str) -> str:
    """The environment variable that sets ``field``: ``TOOLBUDGET_<FIELD>``."""
    return f"{ENV_PREFIX}{field}".upper()


def env_value(field: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The value ``TOOLBUDGET_<FIELD>`` has in ``environ`` (any case, as pydantic-settings
    matches it), or None when it is not set."""
    wanted = env_name(field)
    env = os.environ if environ is None else environ
    return next((value for key, value in env.items() if key.upper() == wanted), None)


def describe(
    exc: ValidationError, explicit: dict[str, Any] | None = None, fields: Iterable[str] = ()
) -> str:
    """``exc`` as one line naming each setting refused and why, and the variable that gave it
    where the environment did (``explicit``: what the caller passed; ``fields``: the settings,
    among which a misspelt one's closest is named)."""
    parts = []
    for err in exc.errors():
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            # Not pydantic's "Extra inputs are not permitted": a misspelt setting, and its guess.
            msg = "no such setting" + _did_you_mean(str(err["loc"][-1]), fields)
        field = ".".join(str(p) for p in err["loc"]) or "config"
        top = str(err["loc"][0]) if err["loc"] else ""
        # A value from the environment is named as such: the caller did not pass it.
        origin = (
            f" (from the environment variable {env_name(top)})"
            if explicit is not None and top and top not in explicit and env_value(top) is not None
            else ""
        )
        if not top and explicit is not None:
            # Settings that contradict each other: name those of them the environment gave.
            named = _from_env(msg, explicit, fields)
            origin = f" (from the environment: {', '.join(named)})" if named else ""
        parts.append(f"{field}{origin}: {_message(msg)}")
    return "invalid toolbudget setting: " + "; ".join(parts)


def _message(msg: str) -> str:
    """A validation message without pydantic's ``Value error, `` prefix, nor a nested setting's
    own ``invalid toolbudget setting: `` (a tool policy's error inside ``tools``)."""
    return msg.removeprefix("Value error, ").removeprefix("invalid toolbudget setting: ")


def describe_unparsed(exc: SettingsError) -> str:
    """An environment value pydantic-settings could not even parse, as one line naming it."""
    field = re.search(r'field "([^"]+)"', str(exc))
    if field is None:
        return f"invalid toolbudget setting: a {ENV_PREFIX}* variable cannot be parsed: {exc}"
    name = field.group(1)
    cause = exc.__cause__
    why = f"not JSON ({cause})" if isinstance(cause, ValueError) else str(exc)
    env = env_name(name)
    return f"invalid toolbudget setting: {name} (from the environment variable {env}): {why}"


def describe_too_deep(fields: Iterable[str]) -> str:
    """A ``TOOLBUDGET_*`` value of JSON nested past Python's recursion limit, as one line naming
    the variables holding JSON (pydantic-settings' json.loads raises RecursionError there, which
    it does not wrap as it wraps a ValueError)."""
    named = [env_name(f) for f in fields if (env_value(f) or "").lstrip()[:1] in ("[", "{")]
    where = ", ".join(named) or f"a {ENV_PREFIX}* variable"
    return f"invalid toolbudget setting: {where} holds JSON nested too deeply to read"


def _from_env(msg: str, explicit: dict[str, Any], fields: Iterable[str]) -> list[str]:
    """The variables of the settings ``msg`` names that the environment, not the caller, gave."""
    names = [f for f in fields if re.search(rf"\b{f}\b", msg)]
    return [env_name(f) for f in names if f not in explicit and env_value(f) is not None]


def unknown_variables(fields: Iterable[str], environ: Mapping[str, str]) -> None:
    """Warn of each ``TOOLBUDGET_*`` variable that names no setting (a typo, a setting since
    removed): pydantic-settings reads only the names it knows, so ``TOOLBUDGET_RESULTCAP=10000``
    would change nothing, silently. A ``UserWarning``, shown once per place by Python's filters,
    not an event on every config built."""
    known = {f.upper() for f in fields}
    for key in sorted(environ):
        name = key.upper()
        if name.startswith(ENV_PREFIX) and name.removeprefix(ENV_PREFIX) not in known:
            # Matched without the prefix they all share, or every name is close to some setting
            # (TOOLBUDGET_FUZZ_EXAMPLES was "did you mean TOOLBUDGET_STALENESS?").
            hint = _did_you_mean(name.removeprefix(ENV_PREFIX), known, ENV_PREFIX)
            warnings.warn(f"{key} names no toolbudget setting{hint}", UserWarning, stacklevel=3)


def _did_you_mean(name: str, known: Iterable[str], prefix: str = "") -> str:
    """`` (did you mean <prefix><closest>?)`` for the known name closest to ``name``, or ""."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {prefix}{close[0]}?)" if close else ""
