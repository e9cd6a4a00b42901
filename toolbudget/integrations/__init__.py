"""The framework integrations under the distribution's name; each module needs its extra.

``toolbudget.integrations.langchain`` (extra ``langchain``), ``.pydantic_ai`` (``pydantic-ai``)
and ``.openai_agents`` (``openai-agents``) re-export :mod:`budget.integrations`' modules.
"""

from __future__ import annotations

__all__: list[str] = []
