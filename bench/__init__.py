"""Throughput and memory benchmark of the reconciliation engine (``python -m bench``).

The orchestrator (``bench.__main__``) builds a synthetic corpus in a temporary folder and runs
each measured phase in a fresh subprocess (``bench.phases``), so no phase inherits another's
peak RSS. See ``bench/README.md``.
"""
