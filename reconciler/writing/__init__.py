"""The writing side: the only code handed the ports' writer methods (``tests/unit/test_writers.py``
holds the list of who calls them).

- ``applying``: the ``Applier``, which writes a plan: audit intents first, then table rows and
  re-ingest requests in one transaction, chunk payloads in batches by point id, payload
  indexes; ``differs``: whether a point still needs a write, and what it sends.
- ``runs``: every command's record in the run log, one lifecycle (``recorded``).
- ``executing``: the one executor every plan goes through (``Executable``: the protocol a plan
  kind implements).
- ``recovery``: what a killed run left, planned from its intents and finished.
- ``rollback_plan``: a run undone, planned (a pure fold over its audit entries, cascade
  included; ``rollback_documents`` its documents' part); ``rollback_pages``: the same a page
  of documents at a time, planned and applied (memory flat); ``rollback``: the command's
  entry, its result (``--dry-run``: the pages' counts added up).
"""
