"""The chunk index over Qdrant Edge, the embedded engine (the ``edge`` extra): ``index``
(``EdgeChunkIndex``, the adapter of the ``ChunkIndex`` port), ``shard`` (opening a shard,
Edge's failures said as the port's errors), ``files`` (reading ahead, the free-space floor)
and ``requests`` (what it hands the engine, in Edge's own types; pure)."""
