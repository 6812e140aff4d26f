"""The chunk index over qdrant-client: ``index`` (``QdrantChunkIndex``, the adapter of the
``ChunkIndex`` port), ``errors`` (the client's failures said as the port's errors, once, at
this edge) and ``requests`` (what it sends, in the client's models; pure)."""
