"""The two test lanes: ``make test`` runs everything (CI), ``make test-fast`` skips the tests
marked ``slow`` and runs property tests with fewer examples (``--hypothesis-profile=fast``).

A property test that sets its own ``max_examples`` passes it through :func:`examples`, so the
count is the one written in the full lane and a fifth of it in the fast lane: hypothesis applies
a loaded profile only to the settings a test leaves unset.
"""

from __future__ import annotations

from typing import Final

from hypothesis import settings

__all__ = ["FAST_EXAMPLES", "FULL_EXAMPLES", "examples", "register_profiles", "scaled"]

FULL_EXAMPLES: Final = 100
"""Examples per property test in the full lane: hypothesis's default."""
FAST_EXAMPLES: Final = 20
"""Examples per property test in the fast lane: a fifth, still enough to catch a broken invariant
on the next full run at the latest."""
_FLOOR: Final = 10


def register_profiles() -> None:
    """Register the ``fast`` profile (loaded by ``--hypothesis-profile=fast``)."""
    settings.register_profile("fast", max_examples=FAST_EXAMPLES)


def scaled(full: int, profile_examples: int) -> int:
    """``full`` under a profile of :data:`FULL_EXAMPLES` or more; the same share of a smaller
    profile's count, at least 10."""
    if profile_examples >= FULL_EXAMPLES:
        return full
    return max(_FLOOR, full * profile_examples // FULL_EXAMPLES)


def examples(full: int) -> int:
    """:func:`scaled` for the loaded profile (read when the test module is imported, after
    ``--hypothesis-profile`` was applied)."""
    return scaled(full, settings().max_examples)  # a fresh settings inherits the loaded profile
