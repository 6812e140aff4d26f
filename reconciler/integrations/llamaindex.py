"""A LlamaIndex retriever that serves only versions in force at the instant of each query.

LlamaIndex's ``MetadataFilters`` cannot say the default filter (it has no date range on a
datetime payload, and no "not true" for the quarantine), so the only way through its Qdrant
store is a Qdrant filter handed in as ``qdrant_filters``, and one handed in once is kept:
after a successor's ``effective_from`` passes it goes on citing the replaced version. This
retriever builds the filter inside every call (``retrieving.search``), from its ``clock``::

    from reconciler.integrations.llamaindex import VersionAwareRetriever

    retriever = VersionAwareRetriever.from_vector_store(
        vector_store, embed_model=embed_model, settings=settings
    )
    nodes = retriever.retrieve("what may I expense?")

Needs the extra: ``pip install 'corpus-reconciler[llamaindex]'``.
"""

from __future__ import annotations

import asyncio
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

try:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from llama_index.core.vector_stores.utils import metadata_dict_to_node
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without the extra
    raise ImportError(
        "reconciler.integrations.llamaindex needs LlamaIndex: "
        "pip install 'corpus-reconciler[llamaindex]'"
    ) from exc
from pydantic import PrivateAttr

from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.embedding import Embedder
from reconciler.integrations.retrieving import (
    Hit,
    Route,
    distance_of,
    historical_flag,
    instant_of,
    lower_is_better,
    search,
    vector_name_of,
)
from reconciler.model import ALL_KEYS
from reconciler.payload import KeyMap

if TYPE_CHECKING:
    from llama_index.vector_stores.qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient

    from reconciler.settings import Settings

__all__ = ["EmbedderEmbedding", "VersionAwareRetriever"]


class EmbedderEmbedding(BaseEmbedding):
    """One of this project's embedders (``reconciler.embedding``) as a LlamaIndex embedding
    model: query a collection the reference ingestion wrote with the vectors it wrote."""

    _embedder: Embedder = PrivateAttr()

    def __init__(self, embedder: Embedder, **kwargs: Any) -> None:
        super().__init__(model_name=type(embedder).__name__, **kwargs)
        self._embedder = embedder

    def _get_query_embedding(self, query: str) -> list[float]:
        return list(self._embedder.embed([query])[0])

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return list(self._embedder.embed([text])[0])


class VersionAwareRetriever(BaseRetriever):
    """Retrieves the ``similarity_top_k`` best chunks in force at the instant of each query.

    ``as_of`` asks what was (or will be) in force at that instant; ``include_historical=True``
    adds superseded and retired versions (logged), over the archive too in a split store.
    Quarantined chunks never come back. A node's metadata carries the version keys as the
    payload holds them now (``doc_id``, ``version_state``, ``effective_from``,
    ``effective_to``...), not as the node was written: the reconciler keeps the payload true.
    """

    def __init__(
        self,
        client: QdrantClient,
        route: Route,
        *,
        embed_model: BaseEmbedding,
        similarity_top_k: int = 4,
        score_threshold: float | None = None,
        as_of: datetime | date | str | None = None,
        include_historical: bool = False,
        clock: Clock = SYSTEM_CLOCK,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self.client = client
        self.route = route
        self.embed_model = embed_model
        self.similarity_top_k = similarity_top_k
        self.score_threshold = score_threshold
        self.as_of = instant_of(as_of)
        self.include_historical = historical_flag(include_historical)
        self.clock = clock

    @classmethod
    def from_vector_store(
        cls,
        store: QdrantVectorStore,
        *,
        embed_model: BaseEmbedding,
        settings: Settings | None = None,
        archive: str | None = None,
        keys: KeyMap | None = None,
        **options: Any,
    ) -> VersionAwareRetriever:
        """Search the collection of a ``llama_index.vector_stores.qdrant.QdrantVectorStore``
        through its client. The payload layout and the archive come from the deployment's
        ``settings`` (``[index]``) when given, else from ``keys`` and ``archive``, else the
        version keys are read at the top level, where LlamaIndex flattens metadata."""
        client = store.client
        collection = store.collection_name
        if client is None:
            raise ValueError(
                "the vector store has no synchronous client (it was built with aclient= "
                "alone): build it with client=QdrantClient(...) too; this retriever searches "
                "through that one (aretrieve in a worker thread)"
            )
        layout = keys or (settings.index.key_map if settings is not None else KeyMap())
        if archive is None and settings is not None:
            archive = settings.index.archive_collection
        # (the store names its dense vector "text-dense" but reads collections written with
        # the unnamed one too: ask the collection, as the store does; one the store has not
        # made yet, at its first add, is asked at each query until it is there)
        vector: str | None = None
        lower: bool | None = None
        if client.collection_exists(collection):
            try:
                vector = vector_name_of(client, collection, None) or ""
            except ValueError:  # (several named vectors: the store's dense one)
                vector = store.dense_vector_name
            lower = lower_is_better(distance_of(client, collection, vector or None))
        route = Route(
            collection=collection,
            archive=archive,
            keys=layout,
            text_key=store.text_key or "text",
            vector_name=vector,
            lower_is_better=lower,
        )
        return cls(client, route, embed_model=embed_model, **options)

    @classmethod
    def from_client(
        cls,
        client: QdrantClient,
        collection: str | None = None,
        *,
        embed_model: BaseEmbedding,
        settings: Settings | None = None,
        archive: str | None = None,
        keys: KeyMap | None = None,
        text_key: str | None = None,
        vector_name: str | None = None,
        **options: Any,
    ) -> VersionAwareRetriever:
        """Search ``collection`` (default: the deployment's ``[index] collection``) through
        ``client``, laid out as ``settings`` say (or as ``keys``, ``text_key`` and
        ``archive`` say; the defaults are the reconciler's own layout). ``vector_name``: the
        dense vector to search where the collection has several named ones."""
        route = Route.of(
            collection,
            settings=settings,
            archive=archive,
            keys=keys,
            text_key=text_key,
            vector_name=vector_name,
        )
        return cls(client, route, embed_model=embed_model, **options)

    def _search(self, vector: list[float]) -> list[NodeWithScore]:
        hits = search(
            self.client,
            self.route,
            vector,
            k=self.similarity_top_k,
            score_threshold=self.score_threshold,
            as_of=self.as_of,
            include_historical=self.include_historical,
            clock=self.clock,
        )
        return [NodeWithScore(node=self._node(hit), score=hit.score) for hit in hits]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        vector = query_bundle.embedding or self.embed_model.get_query_embedding(
            query_bundle.query_str
        )
        return self._search(list(vector))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        vector = query_bundle.embedding or await self.embed_model.aget_query_embedding(
            query_bundle.query_str
        )
        return await asyncio.to_thread(self._search, list(vector))

    def _node(self, hit: Hit) -> TextNode:
        stored: Any = None
        if "_node_content" in hit.payload:
            try:
                stored = metadata_dict_to_node(dict(hit.payload))
            except ValueError:
                stored = None
        node = (
            stored
            if isinstance(stored, TextNode)
            else TextNode(id_=hit.point_id, text=hit.text or "")
        )
        keys = self.route.keys
        for key in ALL_KEYS:  # the payload's version keys now, not the node's when written
            # (under the logical name, and under the stored one where a rename put it in the
            # flattened metadata, whose copy in ``_node_content`` is the node's when written)
            names = {key} if keys.prefix else {key, keys.name(key)}
            for name in names:
                if key in hit.version:
                    node.metadata[name] = hit.version[key]
                else:
                    node.metadata.pop(name, None)
        return node
