"""Adapters of the engine's ports: the document table and the chunk index."""
