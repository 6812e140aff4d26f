"""One reconciliation run, stage by stage; each stage takes the earlier stages' frozen values
and returns its own.

- ``values``: ``Options`` and what the stages hand each other (``SourcesRead``, ``Scan``,
  ``Assessment``, ``GuardDecision``, ``Report``).
- ``reading``: stage 1, the systems of record.
- ``running``: ``Reconciler``, which chains the stages; stage 2 (the table and the collection,
  streamed once) and stage 3 (the families left after the scan, checked and planned).
- ``checking``: what a family check sees and finds, family by family (``FamilyChecks``).
- ``guarding``: stage 4, the blast-radius guard.
- ``recording``: stage 5, apply the plan and record the run (writing modes).
"""
