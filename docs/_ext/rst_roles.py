"""A griffe extension: the reST markup of toolbudget's docstrings, as Markdown for the site.

The docstrings are written for ``help()`` and Sphinx habits (``:class:`X```, ``text::`` before a
literal block); mkdocstrings renders Markdown, where those would show as raw markup. Roles become
code spans (not links: many name private modules that the reference does not document).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:class|func|meth|attr|data|mod|exc|obj):`~?([^`]+)`")
_LITERAL = re.compile(r"::$", flags=re.M)


def _markdown(text: str) -> str:
    text = _ROLE.sub(lambda m: f"`{m.group(1).rsplit('.', 1)[-1]}`", text)
    return _LITERAL.sub(":", text)


class RstRoles(griffe.Extension):
    """Rewrites each docstring once, when griffe has loaded its object."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _markdown(obj.docstring.value)
