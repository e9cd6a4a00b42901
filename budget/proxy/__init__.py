"""``toolbudget proxy``: toolbudget between any agent and its model API (extra ``[proxy]``).

Point the agent's base URL at it (``ANTHROPIC_BASE_URL=http://127.0.0.1:8788 claude``,
``OPENAI_BASE_URL=http://127.0.0.1:8788/v1 codex``): each conversation gets a session, each
request's history goes through ``prepare``, and the request copy goes upstream. See
docs/proxy.md.
"""

from __future__ import annotations

from budget.proxy._app import create_app
from budget.proxy._keys import SESSION_HEADER, session_key
from budget.proxy._routes import budgeted_api
from budget.proxy._serve import serve
from budget.proxy._settings import DEFAULT_BUDGET, ProxySettings

__all__ = [
    "DEFAULT_BUDGET",
    "SESSION_HEADER",
    "ProxySettings",
    "budgeted_api",
    "create_app",
    "serve",
    "session_key",
]
