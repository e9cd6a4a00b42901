"""The Ray engine of ``toolbudget bench --engine ray``: each trace × strategy replay is a Ray task.

:class:`RayEngine` runs the very function the local engine runs
(:func:`benchmarks.replay.replay_job`, so :func:`benchmarks.replay.replay_trace`) in Ray workers and
hands the replays back in the jobs' order: the report, the JSON and the table are those of the
local engine, timings aside (``ms_median``, ``ms_p99``). Each replay writes in the directory the
local engine would use (the path is chosen by the driver); a task removes it once its replay is
done, since a worker on another node has no driver to clean up after it.

Without ``address`` the engine starts a local cluster of ``workers`` CPUs (default: this machine's)
for the run and shuts it down afterwards: no dashboard, Ray's own logging kept to errors. With
``address`` (``ray://host:10001``, ``host:6379`` or ``auto``) it joins that cluster, whose nodes
need toolbudget installed (``pip install 'toolbudget[ray]'``) at the driver's version. When Ray is
already initialized in this process (a notebook, a test fixture) the engine uses that connection
and leaves it open.

Each trace is put once in Ray's object store and read by its strategies' tasks; at most
:data:`IN_FLIGHT_PER_CPU` tasks per CPU of the cluster are queued at a time, so the driver does not
hold every trace of a large corpus in the object store at once.

Ray's APIs used (ray 2.x, docs.ray.io ``ray.init``, ``ray.remote``, ``ray.wait``):
``ray.init(address=..., num_cpus=..., include_dashboard=False, logging_level=...,
log_to_driver=False)``; a task's exception comes back from ``ray.get`` as a ``RayTaskError`` that
is also an instance of the original exception's class, so a :class:`~budget.BudgetError` raised in
a replay is still one here.
"""

from __future__ import annotations

import importlib
import logging
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any

from benchmarks.replay import Replay, ReplayJob, replay_job
from benchmarks.trace import Trace
from budget._errors import ConfigError

__all__ = ["EXTRA", "IN_FLIGHT_PER_CPU", "RayEngine", "import_ray"]

EXTRA = "ray"
"""The extra that installs Ray: ``pip install 'toolbudget[ray]'``."""
IN_FLIGHT_PER_CPU = 4
"""Tasks queued per cluster CPU at a time (enough to keep every worker busy between waits)."""


def import_ray() -> ModuleType:
    """The ``ray`` module, or a :class:`~budget.ConfigError` naming the extra that installs it.

    The first ``import ray`` of a process installs a process-wide ``logging`` record factory that
    adds ``_ray_timestamp_ns`` to every record (``_setup_log_record_factory`` in
    ``ray/_private/log.py``, ray 2.60): the application's own structured logs would grow that
    field. The factory the process had is put back (Ray's formatters read the field only when a
    record has it).
    """
    factory = logging.getLogRecordFactory()
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise ConfigError(
            f"--engine ray needs the 'ray' package: pip install 'toolbudget[{EXTRA}]'"
        ) from None
    finally:
        logging.setLogRecordFactory(factory)


def _run_job(trace: Trace, job: ReplayJob) -> Replay:
    """A Ray task's body: the replay of ``job`` on ``trace``, its directory removed afterwards."""
    try:
        return replay_job(replace(job, trace=trace))
    finally:
        shutil.rmtree(job.workdir, ignore_errors=True)


@dataclass(frozen=True, slots=True)
class RayEngine:
    """Trace × strategy replays as Ray tasks, on a local cluster or the one at ``address``."""

    address: str | None = None
    """A running cluster to join (``ray://host:10001``, ``host:6379``, ``auto``); None starts a
    local cluster for the run."""
    workers: int | None = None
    """CPUs of the local cluster (one replay runs per CPU); None: this machine's CPU count."""

    def __post_init__(self) -> None:
        if self.workers is not None and self.workers < 1:
            raise ConfigError(f"workers must be at least 1, got {self.workers}")
        if self.workers is not None and self.address is not None:
            raise ConfigError(
                "workers sizes the local cluster; a cluster at an address has its own CPUs"
            )

    def replay(
        self, jobs: Sequence[ReplayJob], done: Callable[[ReplayJob, Replay], None] | None = None
    ) -> list[Replay]:
        """Every job's replay, computed by Ray tasks, in the order of ``jobs``."""
        ray = import_ray()
        started = not ray.is_initialized()
        if started:
            self._init(ray)
        try:
            return self._replay(ray, jobs, done)
        finally:
            if started:
                ray.shutdown()

    def _init(self, ray: ModuleType) -> None:
        kwargs: dict[str, Any] = {
            "include_dashboard": False,
            "logging_level": logging.ERROR,
            "log_to_driver": False,
        }
        if self.address is not None:
            kwargs["address"] = self.address
        else:
            # A local cluster, even when RAY_ADDRESS names another one: --address is how to join.
            kwargs["address"] = "local"
            kwargs["num_cpus"] = self.workers if self.workers is not None else os.cpu_count() or 1
        ray.init(**kwargs)

    def _replay(
        self,
        ray: ModuleType,
        jobs: Sequence[ReplayJob],
        done: Callable[[ReplayJob, Replay], None] | None,
    ) -> list[Replay]:
        task = ray.remote(num_cpus=1, max_retries=0)(_run_job)
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        limit = cpus * IN_FLIGHT_PER_CPU
        last_use = {id(job.trace): k for k, job in enumerate(jobs)}
        trace_refs: dict[int, Any] = {}
        results: list[Replay | None] = [None] * len(jobs)
        pending: dict[Any, int] = {}
        submitted = 0
        while submitted < len(jobs) or pending:
            while submitted < len(jobs) and len(pending) < limit:
                job = jobs[submitted]
                key = id(job.trace)
                if key not in trace_refs:
                    trace_refs[key] = ray.put(job.trace)
                ref = task.remote(trace_refs[key], _shipped(job))
                pending[ref] = submitted
                if last_use[key] == submitted:
                    # The queued tasks hold the trace; the driver's reference is no longer needed.
                    del trace_refs[key]
                submitted += 1
            # Block for one finished task, then take every other one already finished with it.
            ready, rest = ray.wait(list(pending), num_returns=1)
            if rest:
                more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
                ready += more
            for ref in ready:
                k = pending.pop(ref)
                replay: Replay = ray.get(ref)
                results[k] = replay
                if done is not None:
                    done(jobs[k], replay)
        return [r for r in results if r is not None]


_NO_TRACE = Trace(name="", path="", format="", provider="anthropic", messages=(), requests=())
"""Stands in for the trace in a shipped job: the trace travels once, through the object store."""


def _shipped(job: ReplayJob) -> ReplayJob:
    """``job`` without its trace (sent apart), its directory as an absolute path."""
    return replace(job, trace=_NO_TRACE, workdir=Path(os.path.abspath(job.workdir)))
