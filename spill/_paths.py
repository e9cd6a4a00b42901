"""What may name a session directory or a gc root: a path checked once, where it enters."""

from __future__ import annotations

import os

from spill._errors import ConfigError

__all__ = ["checked_path", "refuse_current_dir"]


def checked_path(path: object, what: str) -> str:
    """``path`` as a str a file name can be made of, or a ConfigError naming ``what`` it is: not
    a str or path, empty (an unset variable), holding a NUL, or not encodable to the file
    system's bytes (a lone surrogate, as a JSON id cut in the middle of an emoji holds)."""
    if not isinstance(path, str | os.PathLike):
        raise ConfigError(f"{what} must be a str or path, not {type(path).__name__}")
    raw = os.fspath(path)
    if not isinstance(raw, str) or not raw:
        # "" would name the current directory: an unset variable is enough.
        raise ConfigError(f"{what} must be a non-empty str path, got {raw!r}")
    if "\0" in raw:
        raise ConfigError(f"{what} must not contain a NUL character")
    try:
        os.fsencode(raw)
    except UnicodeEncodeError as exc:
        bad = raw[exc.start : exc.end]
        raise ConfigError(f"{what} {raw!r} holds {bad!r}, which no file name can encode") from None
    return raw


def refuse_current_dir(path: str | os.PathLike[str], what: str, purpose: str, example: str) -> None:
    """ConfigError if ``path`` names the current directory as an unset variable does
    (``Path("")`` is ``Path(".")``): a gc would collect it, a proxy or a traces download fill it.
    The message names ``what`` the path is and ``purpose`` the directory serves, with an
    ``example`` of a name to give instead."""
    raw = os.fspath(path)
    if os.path.normpath(raw) == ".":
        raise ConfigError(
            f"{what} {raw!r} is the current directory as an unset variable names it; name the "
            f"directory {purpose} by its path (e.g. {example}, or $PWD)"
        )
