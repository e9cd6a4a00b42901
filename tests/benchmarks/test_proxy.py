"""The proxy's overhead benchmark (benchmarks/proxy.py): its conversation and one small run."""

from __future__ import annotations

from pathlib import Path

import pytest

from budget import BudgetConfig
from tests._ci import require_module


def test_the_conversation_spills_one_output_in_fifty_at_the_default_cap() -> None:
    """Outputs 1-49 fit the default cap, output 50 does not: the proxy both passes results
    through and spills them, as the module says."""
    require_module("httpx", extra="proxy")
    from benchmarks.proxy import conversation

    history = conversation(100)
    outputs = [m["content"][0]["content"] for m in history[2::2]]
    cap = BudgetConfig().result_cap
    assert len(outputs) == 100
    assert [i for i, text in enumerate(outputs) if len(text) > cap] == [49, 99]
    assert conversation(100) == history


@pytest.mark.slow
def test_a_small_run_measures_every_figure() -> None:
    """A 3-round run through a real ``toolbudget proxy`` process reports the hop, the latency,
    the first byte and the memory, with times that are real (positive, direct under proxied
    for the whole streamed answer's last byte at 20 ms between events); ``against`` (here this
    checkout again) adds a second proxy's latency and first byte from the same loops; the
    latency has its floor (the stand-in against itself), the first byte its control (the same
    bodies non-streamed after an idle pause)."""
    for name in ("starlette", "uvicorn", "httpx"):
        require_module(name, extra="proxy")
    from benchmarks.proxy import render, run

    result = run((3,), stream_rounds=3, memory_requests=100, against=Path(__file__).parents[2])
    [latency] = result["latency"]
    assert latency["requests"] == 3 and latency["direct_total_s"] > 0
    assert isinstance(latency["against_added_median_ms"], float)
    first = result["first_byte"]
    assert first["last_byte_median_ms_direct"] >= 3 * 20.0
    assert first["last_byte_median_ms_proxy"] >= 3 * 20.0
    assert first["last_byte_median_ms_against"] >= 3 * 20.0
    assert all(first[f"paused_median_ms_{s}"] > 0 for s in ("direct", "proxy", "against"))
    assert isinstance(latency["floor_p99_ms"], float)
    assert len(result["memory"]["rss_mib_every_100"]) == 1
    assert len(result["memory_same"]["rss_mib_every_100"]) == 1
    assert "added median" in render(result)


def test_a_child_of_another_checkout_imports_that_checkouts_code(tmp_path: Path) -> None:
    """A child started for ``--against DIR`` imports ``budget`` from DIR, not from the checkout
    the benchmark runs in (``python -c`` puts the current directory ahead of ``PYTHONPATH``)."""
    import sys

    from benchmarks.proxy import _process

    (tmp_path / "budget").mkdir()
    (tmp_path / "budget" / "__init__.py").write_text("")
    code = "import sys, time, budget; print('at', budget.__file__, file=sys.stderr, flush=True)"
    cmd = [sys.executable, "-c", code + "; time.sleep(60)"]
    with _process(cmd, r"at (\S+)", tmp_path) as (_, where):
        assert Path(where) == tmp_path / "budget" / "__init__.py"


def test_the_standin_process_runs_without_the_cyclic_collector_unless_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``python -m benchmarks.standin`` serves with the collector off (its pauses would count as
    the proxy's added latency), and with it on under ``--gc``."""
    import gc

    for name in ("starlette", "uvicorn"):
        require_module(name, extra="proxy")
    from benchmarks import standin

    enabled: list[bool] = []

    class Serving:
        url = "http://127.0.0.1:1"

        def __init__(self, _app: object, *, port: int = 0) -> None:
            assert port == 0

        def wait(self) -> None:
            enabled.append(gc.isenabled())

    monkeypatch.setattr(standin, "Served", Serving)
    try:
        standin.main([])
        gc.enable()
        gc.unfreeze()
        standin.main(["--gc"])
    finally:
        gc.enable()
        gc.unfreeze()
    assert enabled == [False, True]
