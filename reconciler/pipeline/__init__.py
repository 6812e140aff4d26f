"""One reconciliation run, stage by stage; each stage takes the earlier stages' frozen values
and returns its own.

- ``values``: ``Options`` and what the stages hand each other (``SourcesRead``, ``Scan``,
  ``Assessment``, ``GuardDecision``, ``Report``).
- ``reading``: stage 1, the systems of record.
- ``scanning``: stage 2, the table and the collection, streamed once (each document's chunks
  kept compact in ``chunk_tally``).
- ``assessing``: stage 3, every family checked with its chunks, the checks over the
  collection and the sources (the registry's parts, ``checks.parts``), and the plan.
- ``running``: ``Reconciler``, which chains the stages.
- ``checking``: what the checks see of one family and find there (``FamilyOutcome``).
- ``guarding``: stage 4, the blast-radius guard.
- ``recording``: stage 5, apply the plan and record the run (writing modes).
"""
