"""What a store's or a connector's own tests reuse, importable by a third party's adapter: the
dict-backed fake chunk index (``memory``: ``InMemoryChunkIndex``, for fast tests of the logic)
and the contract suites of the ports' adapters: the document table's (``table_contract``), the
chunk index's (``index_contract`` and ``points_contract``, over ``index_kit``'s layouts and
harness). Connectors have theirs in ``connectors.testing``. Nothing of the product imports
this package; the suites need pytest (the ``test`` extra).
"""
