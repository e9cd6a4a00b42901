"""Shared fixtures."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from tests._ci import require_dir
from tests._collect_probe import PLUGIN_NAME, CollectImports
from tests._lanes import (
    SDK_PACKAGES,
    GroupedScheduling,
    loaded,
    register_profiles,
    sdk_import_error,
)
from tests._s3 import MotoS3, moto_s3_server
from tests._shared import SharedTraces, digest, load_shared

register_profiles()  # before the hypothesis plugin reads --hypothesis-profile

SHARED_TRACES = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces"


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    """The public recorded traces beside the checkout; skipped when absent, but required under CI."""
    return require_dir(
        SHARED_TRACES, "../shared/traces is absent (a fresh clone without the public trace set)"
    )


@pytest.fixture(scope="session")
def shared_trace_set(shared_traces: Path) -> Iterator[SharedTraces]:
    """The public traces loaded once a worker (a load takes ~0.1 s and a dozen tests read them);
    a test that changed one in place fails the run at its end."""
    loaded = load_shared(shared_traces)
    before = digest(loaded[0])
    yield loaded
    assert digest(loaded[0]) == before, "a test changed a shared trace in place: copy it first"


@pytest.fixture
def structlog_restored() -> Iterator[None]:
    """structlog's configuration as the test found it, restored afterwards (a CLI call sets it)."""
    configured, saved = structlog.is_configured(), structlog.get_config()
    try:
        yield
    finally:
        if configured:
            structlog.configure(**saved)
        else:
            structlog.reset_defaults()


@pytest.fixture
def structlog_defaults(structlog_restored: None) -> None:
    """structlog at its defaults (a CLI test may have configured a level), restored afterwards."""
    structlog.reset_defaults()


def pytest_configure(config: pytest.Config) -> None:
    """Register the plugin noting what collecting each test module imports (tests/test_structure.py
    reads it)."""
    config.pluginmanager.register(CollectImports(), PLUGIN_NAME)


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> GroupedScheduling | None:
    """``--dist loadgroup`` hands work out by :class:`tests._lanes.GroupedScheduling`; every
    other ``--dist`` mode is xdist's own (None lets xdist choose)."""
    if config.getvalue("dist") == "loadgroup":
        return GroupedScheduling(config, log)
    return None


@pytest.fixture(autouse=True)
def _sdk_imports_stay_in_the_sdk_group(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test outside ``SDK_MODULES`` that imports a framework SDK fails, naming its module: the
    scheduler would not keep it on the SDK worker, and the other worker would pay the import."""
    before = loaded(SDK_PACKAGES)
    yield
    error = sdk_import_error(request.node.nodeid, loaded(SDK_PACKAGES) - before)
    if error:
        pytest.fail(error)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that reads ../shared/traces ``traces``, so ``-m "not traces"`` leaves it out."""
    for item in items:
        if "shared_traces" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.traces)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print the figures the reliability tests recorded (trials, faults, bad inputs, losses)."""
    figures: dict[str, Any] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            for key, value in getattr(report, "user_properties", ()):
                if isinstance(key, str) and key.startswith("reliability."):
                    figures[key.removeprefix("reliability.")] = value
    if not figures:
        return
    faults: Counter[str] = Counter()
    for key, value in figures.items():
        if key.startswith("faults.") and isinstance(value, dict):
            faults[key.split(".")[1]] += sum(value.values())
    bad = sum(v for k, v in figures.items() if k.startswith("bad_inputs.") and isinstance(v, int))
    write = terminalreporter.write_line
    terminalreporter.section("reliability figures")
    for key in sorted(figures):
        write(f"{key}: {figures[key]}")
    totals: Counter[str] = Counter()
    for key, value in figures.items():
        if key.startswith("crash") and isinstance(value, int):
            totals[key.rsplit(".", 1)[1]] += value
    write(f"crash totals: {dict(totals)}")
    write(f"faults injected by errno: {dict(faults)} (total {sum(faults.values())})")
    write(f"bad inputs tried: {bad}")


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[MotoS3]:
    """moto's S3 server on loopback for the whole run (skipped without the s3 extra and moto)."""
    yield from moto_s3_server()
