"""One reconciliation run, stage by stage; each stage takes the earlier stages' frozen values
and returns its own.

- ``values``: ``Options`` and what the stages hand each other (``SourcesRead``, ``Scan``,
  ``Assessment``, ``GuardDecision``, ``Report``).
- ``reading``: stage 1, the systems of record.
- ``scanning``: stage 2, the table and the collection, streamed once, with the first pass of
  the family checks (``Scan.first``).
- ``assessing``: stage 3, the families left after the scan, checked with their chunks, and
  the plan.
- ``running``: ``Reconciler``, which chains the stages.
- ``checking``: what a family check sees and finds, family by family (``FamilyChecks``, one
  stage's working state).
- ``guarding``: stage 4, the blast-radius guard.
- ``recording``: stage 5, apply the plan and record the run (writing modes).
"""
