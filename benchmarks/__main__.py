"""``python -m benchmarks perf|soak|store-perf|tokens``: see ``benchmarks/cli.py``."""

from benchmarks.cli import main

main()
