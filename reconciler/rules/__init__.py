"""The rules every stage applies alike, pure functions of plain values (no store, no clock):

- ``time_rule``: how a family stands at an instant (``settle``): which version is in force,
  which are superseded, when each one's window ends (docs/engine.md, "The one time rule");
- ``declared_state``: what a document row should say, from what its system of record declares
  (``expected_document``), for the ingestion and the family check alike;
- ``identity``: which family each source document belongs to, with ids that stay stable
  (``resolve_families``, the identity map);
- ``storable``: what a connector read, screened against what the stores can hold (``screen``):
  an unrepresentable document is a finding, never a crash;
- ``sharding``: which runner reconciles which families (``--shard i/N``, ``Shard``).
"""
