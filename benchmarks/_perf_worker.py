"""One side of :mod:`benchmarks.perf_base`: warm sessions, then one timed request per line read.

Run as ``python -c <this source> ROUNDS REQUESTS CHARS`` with the checkout to time first on
``PYTHONPATH`` and as the working directory, so that checkout's ``budget`` and its own
``benchmarks.perf`` workload (``_warm_slot``: the history the ``prepare`` scaling row times) are
the ones imported. Prints ``ready`` (or, when ``budget`` was imported
from elsewhere than that checkout, where from, and exits), then for each line read ``CPU_NS BATCH`` (thread CPU time of
one ``prepare`` adding a round; 1 when its request ran a staleness batch), and exits at end of
input. The cyclic collector is paused while timing, as in :mod:`benchmarks.perf`.
"""

from __future__ import annotations

import gc
import math
import os
import sys
import time
from pathlib import Path


def _serve(rounds: int, requests: int, chars: int) -> None:
    import budget
    from benchmarks.perf import _warm_slot

    tree = Path(os.getcwd()).resolve()
    imported = Path(budget.__file__).resolve()
    if tree not in imported.parents:
        # An installed copy found instead of the checkout's: its timings would be another's.
        print(f"budget imported from {imported}, not from {tree}", flush=True)
        return

    per = max(1, min(requests, rounds // 4))
    slots = [
        _warm_slot(rounds, per, chars, fresh_list=False) for _ in range(math.ceil(requests / per))
    ]
    print("ready", flush=True)
    gc.collect()
    gc.disable()
    for i in range(requests):
        if not sys.stdin.readline():
            break
        call = slots[i // per].step()
        started = time.thread_time_ns()
        prepared = call()
        cpu = time.thread_time_ns() - started
        print(cpu, int(prepared.report.staleness_ran), flush=True)
    for slot in slots:
        slot.session.close()


if __name__ == "__main__":
    _serve(*(int(a) for a in sys.argv[1:4]))
