"""Framework integrations, one optional extra each; import the submodule for your framework.

``budget.integrations.langchain`` (LangChain v1 agent middleware),
``budget.integrations.pydantic_ai`` (a pydantic-ai capability and history processor) and
``budget.integrations.openai_agents`` (an OpenAI Agents SDK ``call_model_input_filter``). Each
submodule imports its framework when it is imported; this package imports none of them, so
``budget`` works without any framework installed.
"""

from __future__ import annotations

__all__: list[str] = []
