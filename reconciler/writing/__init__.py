"""The writing side: the only code handed the ports' writer methods (``tests/unit/test_writers.py``
holds the list of who calls them).

- ``applying``: the ``Applier``, which writes a plan: audit intents first, then table rows and
  re-ingest requests in one transaction, chunk payloads in batches by point id, payload
  indexes; ``differs``: whether a point still needs a write, and what it sends.
- ``runs``: every command's record in the run log, one lifecycle (``recorded``).
- ``recovery``: what a killed run left, finished from its intents.
- ``rollback``: a run undone, from its audit entries; ``dry``: the stores of a dry run, whose
  writes stay in memory (the same rollback runs on them).
"""
