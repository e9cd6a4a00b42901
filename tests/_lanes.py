"""The two test lanes: ``make test`` runs everything (CI), ``make test-fast`` skips the tests
marked ``slow`` and runs property tests with fewer examples (``--hypothesis-profile=fast``).

A property test that sets its own ``max_examples`` passes it through :func:`examples`, so the
count is the one written in the full lane and a fifth of it in the fast lane: hypothesis applies
a loaded profile only to the settings a test leaves unset.

Both lanes run on two xdist workers with ``--dist loadgroup``, which :class:`GroupedScheduling`
implements: tests go out module by module, and the modules that import a framework SDK
(:data:`SDK_MODULES`) all go to one worker, so only that worker pays the seconds those imports cost.
"""

from __future__ import annotations

import sys
from typing import Final

from hypothesis import HealthCheck, settings
from xdist.scheduler import LoadScopeScheduling

__all__ = [
    "FAST_EXAMPLES",
    "FULL_EXAMPLES",
    "HUNT_EXAMPLES",
    "SDK_GROUP",
    "SDK_MODULES",
    "SDK_PACKAGES",
    "GroupedScheduling",
    "at_least",
    "examples",
    "loaded",
    "register_profiles",
    "scaled",
    "sdk_import_error",
    "unit_of",
]

FULL_EXAMPLES: Final = 100
"""Examples per property test in the full lane: hypothesis's default."""
HUNT_EXAMPLES: Final = 5000
"""Examples per property test of a longer hunt (``--hypothesis-profile=hunt``): the tests that
take the loaded profile's count when it is larger than their own (:func:`at_least`,
:func:`examples`)."""
FAST_EXAMPLES: Final = 20
"""Examples per property test in the fast lane: a fifth, still enough to catch a broken invariant
on the next full run at the latest."""
_FLOOR: Final = 10


def register_profiles() -> None:
    """Register the ``fast`` and ``hunt`` profiles (loaded by ``--hypothesis-profile=NAME``) and
    load the default one, all three without hypothesis's 200 ms deadline per example nor its
    "too slow" check of the data drawn: speed is measured side by side in ``benchmarks/``, and on
    a loaded 2-core machine an example of a whole session's requests can take longer without
    anything being wrong."""
    untimed = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile("default", untimed)
    settings.register_profile("fast", untimed, max_examples=FAST_EXAMPLES)
    settings.register_profile("hunt", untimed, max_examples=HUNT_EXAMPLES)
    settings.load_profile("default")


def scaled(full: int, profile_examples: int) -> int:
    """``full`` under the full lane's profile; the larger of the two under a larger one (a hunt:
    ``--hypothesis-profile=hunt`` runs every property test it selects that hard); the same share
    of a smaller profile's count, at least 10."""
    if profile_examples > FULL_EXAMPLES:
        return max(full, profile_examples)
    if profile_examples == FULL_EXAMPLES:
        return full
    return max(_FLOOR, full * profile_examples // FULL_EXAMPLES)


def at_least(count: int) -> int:
    """``count``, or the loaded profile's count when larger (a hunt's): for the tests that run
    only in the full lane and set more examples than the default."""
    return max(count, settings().max_examples)


def examples(full: int) -> int:
    """:func:`scaled` for the loaded profile (read when the test module is imported, after
    ``--hypothesis-profile`` was applied)."""
    return scaled(full, settings().max_examples)  # a fresh settings inherits the loaded profile


SDK_PACKAGES: Final = frozenset(
    {"agents", "anthropic", "langchain", "langchain_core", "langgraph", "openai", "pydantic_ai"}
)
"""The framework SDKs the integrations and the peers' strategies run: about 6 s of imports in a
worker that loads them all (``python -X importtime``: openai-agents 2.4 s, anthropic 1.9 s,
langchain's agents 1.4 s, pydantic-ai 0.9 s, with openai and pydantic shared)."""

SDK_MODULES: Final = frozenset(
    {
        "tests/benchmarks/test_bench_cli.py",
        "tests/benchmarks/test_compaction_bench.py",
        "tests/benchmarks/test_replay.py",
        "tests/benchmarks/test_strategies.py",
        "tests/budget/test_compaction_faults.py",
        "tests/budget/test_compaction_session.py",
        "tests/budget/test_formats_detect.py",
        "tests/budget/test_formats_openai_chat.py",
        "tests/budget/test_formats_openai_responses.py",
        "tests/budget/test_kept_evidence_hostile.py",
        "tests/budget/test_markers.py",
        "tests/budget/test_overflow.py",
        "tests/budget/test_summarizers.py",
        "tests/budget/test_tokens.py",
        "tests/budget/test_usage.py",
        "tests/integrations/test_docs_snippets.py",
        "tests/integrations/test_langchain.py",
        "tests/integrations/test_langchain_compaction.py",
        "tests/integrations/test_openai_agents.py",
        "tests/integrations/test_openai_agents_compaction.py",
        "tests/integrations/test_pydantic_ai.py",
        "tests/integrations/test_hostile_pydantic_ai.py",
        "tests/integrations/test_hostile_integrations.py",
        "tests/integrations/test_pydantic_ai_compaction.py",
        "tests/proxy/test_proxy_adversarial.py",
        "tests/proxy/test_proxy_sdks.py",
        "tests/test_hostile_review.py",
    }
)
"""The test modules some test of which imports one of :data:`SDK_PACKAGES` (directly, through a
``needs_*`` fixture or by running a peer's strategy). A test elsewhere that imports one fails
(tests/conftest.py), naming the module to add here."""

SDK_GROUP: Final = "sdk"
"""The scope :class:`GroupedScheduling` gives every test of :data:`SDK_MODULES`."""


def loaded(packages: frozenset[str]) -> frozenset[str]:
    """The top-level ``packages`` this interpreter has imported (a submodule's import puts its
    package in ``sys.modules`` too)."""
    return packages.intersection(sys.modules)


def sdk_import_error(nodeid: str, new: frozenset[str]) -> str | None:
    """Why the test ``nodeid``, which imported the SDKs ``new``, must not (it is not in one of
    :data:`SDK_MODULES`), or None."""
    module = nodeid.split("::", 1)[0]
    if not new or module in SDK_MODULES:
        return None
    return (
        f"{nodeid} imported {', '.join(sorted(new))}: add {module} to SDK_MODULES in "
        "tests/_lanes.py so every SDK import stays on one xdist worker"
    )


# xdist ships no type information: its scheduler classes are Any to mypy.
class GroupedScheduling(LoadScopeScheduling):  # type: ignore[misc]
    """``--dist loadgroup`` as this suite needs it: a test module is one unit of work, every
    module of :data:`SDK_MODULES` belongs to one unit (:data:`SDK_GROUP`), and a test xdist tags
    with an ``xdist_group`` (``nodeid@name``) joins its group's unit.

    xdist's own loadgroup reads the ``xdist_group`` marks only, and with pytest 9.2 not even
    those (pytest-dev/pytest-xdist#1386): each test became its own unit, so both workers imported
    every SDK. Side by side on the 2-core development machine (three pairs, load 1.6-2.1), the
    fast lane took 25.1 / 25.9 / 26.3 s this way against 26.2 / 27.9 / 32.0 s with
    ``--dist load``, with 3.6-10.8 s less CPU.
    """

    def _split_scope(self, nodeid: str) -> str:
        # The one method xdist's LoadScopeScheduling leaves to a subclass to say what a unit is,
        # as its own LoadFileScheduling and LoadGroupScheduling do.
        return unit_of(nodeid)


def unit_of(nodeid: str) -> str:
    """The unit of work :class:`GroupedScheduling` hands the test ``nodeid`` out in: its xdist
    group (``nodeid@name``), :data:`SDK_GROUP` for a test of :data:`SDK_MODULES`, else its
    module."""
    if nodeid.rfind("@") > nodeid.rfind("]"):  # an "@" inside a parametrize id names no group
        return nodeid.rsplit("@", 1)[1]
    module = nodeid.split("::", 1)[0]
    return SDK_GROUP if module in SDK_MODULES else module
